package scscf

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// onRegister is the registrar: SIP Digest with MAR, then SAR with the restoration info (TS 24.229 §5.4.1).
//
// Registrations come through the I-CSCF: a REGISTER from anyone else is refused.
func (n *Node) onRegister(r *sipx.Request) {
	req, stx := r.Req, r.Tx
	if r.Role != sipx.RoleICSCF {
		n.px.Refuse(r, "register_not_from_icscf")
		return
	}
	ctx, cancel := context.WithTimeout(r.Ctx, 5*time.Second)
	defer cancel()
	to := req.To()
	if to == nil {
		n.px.Respond(stx, req, 400, "Bad Request")
		return
	}
	impu := sipx.AOR(to.Address)
	impi := impu
	if i := strings.Index(impi, ":"); i >= 0 {
		impi = impi[i+1:]
	}
	authz := sipx.FirstHeader(req, "Authorization")
	var cred *digest.Credentials
	if authz != "" {
		c, err := digest.ParseCredentials(authz)
		if err != nil {
			n.px.Respond(stx, req, 400, "Bad Authorization")
			return
		}
		cred = c
		if c.Username != "" {
			impi = c.Username
		}
	}
	if cred == nil || cred.Response == "" || cred.Nonce == "" {
		n.challenge(ctx, stx, req, impi, impu, false)
		return
	}
	ch := n.take(cred.Nonce)
	if ch == nil {
		// Unknown, expired or already answered nonce (a replayed Authorization, or the second of two copies of
		// one REGISTER): a fresh challenge with stale=true, never a registration.
		n.challenge(ctx, stx, req, impi, impu, true)
		return
	}
	if ch.impi != impi || ch.impu != impu {
		// The nonce was issued to another identity: it is spent; challenge the identity presented now.
		n.log.Info("digest: nonce of another identity", "impi", impi, "impu", impu, "challenged", ch.impi,
			"call_id", sipx.CallID(req))
		n.challenge(ctx, stx, req, impi, impu, false)
		return
	}
	if reason := checkCredentials(ch, cred, req); reason != "" {
		n.log.Info("digest: refused", "impi", impi, "impu", impu, "reason", reason, "uri", cred.URI,
			"request_uri", req.Recipient.String(), "realm", cred.Realm, "qop", cred.QOP, "call_id", sipx.CallID(req))
		n.mu.Lock()
		n.failures[impi]++
		fails := n.failures[impi]
		if fails >= 2 {
			delete(n.failures, impi)
		}
		n.mu.Unlock()
		if fails >= 2 {
			_, _ = n.hss.ServerAssignment(ctx, &cx.SAR{UserName: impi, PublicIdentities: []string{impu},
				ServerName: n.cfg.ServerName(), AssignmentType: cx.SATAuthenticationFailure, UserDataAlreadyAvailable: true})
			n.rec.Emit(obs.Registration{IMPU: impu, IMPI: impi, Event: "auth_failed"})
			n.px.Respond(stx, req, 403, "Forbidden")
			return
		}
		n.challenge(ctx, stx, req, impi, impu, false)
		return
	}
	n.mu.Lock()
	delete(n.failures, impi)
	n.mu.Unlock()
	n.register(ctx, stx, req, impi, impu)
}

// take looks a nonce up and deletes it in one locked step: a nonce authorises at most one REGISTER, so two
// copies of one authorised REGISTER cannot both pass. An expired nonce is deleted and not returned.
func (n *Node) take(nonce string) *challenge {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch := n.nonces[nonce]
	if ch == nil {
		return nil
	}
	delete(n.nonces, nonce)
	if n.now().Sub(ch.created) > n.cfg.NonceTTL {
		return nil
	}
	return ch
}

// challenge sends MAR and answers 401 with a fresh nonce.
func (n *Node) challenge(ctx context.Context, stx sip.ServerTransaction, req *sip.Request, impi, impu string, stale bool) {
	maa, err := n.hss.MultimediaAuth(ctx, &cx.MAR{UserName: impi, PublicIdentity: impu, ServerName: n.cfg.ServerName(),
		NumberAuthItems: 1, AuthItem: cx.AuthItem{Scheme: cx.SchemeSIPDigest}})
	if err != nil {
		n.cxFailure(stx, req, "MAR", impi, err)
		return
	}
	if len(maa.AuthItems) == 0 || maa.AuthItems[0].Digest == nil {
		n.px.Respond(stx, req, 500, "No Authentication Vector")
		return
	}
	d := maa.AuthItems[0].Digest
	nonce := newNonce()
	n.mu.Lock()
	n.nonces[nonce] = &challenge{impi: impi, impu: impu, realm: d.Realm, ha1: d.HA1, qop: qopAuth, created: n.now()}
	n.mu.Unlock()
	chal := digest.Challenge{Realm: d.Realm, Nonce: nonce, Algorithm: "MD5", QOP: []string{qopAuth}, Stale: stale}
	n.px.Respond(stx, req, 401, "Unauthorized", sip.NewHeader("WWW-Authenticate", chal.String()))
}

func (n *Node) cxFailure(stx sip.ServerTransaction, req *sip.Request, cmd, impi string, err error) {
	if res, ok := cx.ResultOf(err); ok {
		switch res {
		case cx.ErrorUserUnknown, cx.ErrorIdentitiesDontMatch:
			n.px.Respond(stx, req, 403, "Forbidden")
			return
		case cx.ErrorAuthSchemeNotSupported:
			n.px.Respond(stx, req, 403, "Authentication Scheme Not Supported")
			return
		}
	}
	n.log.Warn("cx failure", "cmd", cmd, "impi", impi, "call_id", sipx.CallID(req), "err", err)
	n.px.Respond(stx, req, 500, "HSS Failure")
}

// qopAuth is the quality of protection every challenge offers.
const qopAuth = "auth"

// checkCredentials checks a digest response to a challenge (RFC 2617 §3.2.2, RFC 3261 §22.4) and returns why
// it is refused, "" when it is good: the qop offered (auth) must be the qop used, with its cnonce and nonce
// count (no downgrade to the RFC 2069 form); the realm must be the challenge's; the digest uri must be the
// REGISTER's Request-URI (compared as SIP URIs; SIPp needs -auth_uri for that, its default is the address it
// sent to); the algorithm MD5; the response must match the HA1 from the HSS.
func checkCredentials(ch *challenge, c *digest.Credentials, req *sip.Request) string {
	switch {
	case ch.qop != "" && !strings.EqualFold(c.QOP, ch.qop):
		return "qop"
	case ch.qop != "" && (c.Cnonce == "" || c.Nc <= 0):
		return "cnonce"
	case c.Algorithm != "" && !strings.EqualFold(c.Algorithm, "MD5"):
		return "algorithm"
	case c.Realm != ch.realm:
		return "realm"
	case !sameURI(c.URI, req.Recipient):
		return "uri"
	case !verify(ch, c, string(req.Method)):
		return "response"
	}
	return ""
}

// sameURI compares a digest uri with a Request-URI as SIP URIs (RFC 3261 §19.1.4, tolerant): same scheme, user
// and password, host (case-insensitive, ignoring a trailing dot) and port (absent = the scheme's default);
// URI parameters and headers are not compared. The value may come with angle brackets.
func sameURI(s string, ruri sip.Uri) bool {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "<"), ">")
	if s == "" {
		return false
	}
	var u sip.Uri
	if err := sip.ParseUri(s, &u); err != nil {
		return false
	}
	scheme := func(x sip.Uri) string {
		if x.Scheme == "" {
			return "sip"
		}
		return strings.ToLower(x.Scheme)
	}
	port := func(x sip.Uri) int {
		if x.Port != 0 {
			return x.Port
		}
		if scheme(x) == "sips" {
			return 5061
		}
		return 5060
	}
	host := func(x sip.Uri) string { return strings.ToLower(strings.TrimSuffix(x.Host, ".")) }
	return scheme(u) == scheme(ruri) && u.User == ruri.User && u.Password == ruri.Password &&
		host(u) != "" && host(u) == host(ruri) && port(u) == port(ruri)
}

// verify checks an RFC 2617 digest response (qop=auth) against the HA1 from the HSS.
func verify(ch *challenge, c *digest.Credentials, method string) bool {
	ha2 := md5hex(method + ":" + c.URI)
	var want string
	if c.QOP != "" {
		want = md5hex(ch.ha1 + ":" + c.Nonce + ":" + fmt.Sprintf("%08x", c.Nc) + ":" + c.Cnonce + ":" + c.QOP + ":" + ha2)
	} else {
		want = md5hex(ch.ha1 + ":" + c.Nonce + ":" + ha2)
	}
	return subtle.ConstantTimeCompare([]byte(strings.ToLower(want)), []byte(strings.ToLower(c.Response))) == 1
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// expiresOf returns the requested expiry (vocab.RequestedExpiry: the Contact's expires parameter, else the
// Expires header), else the default.
func (n *Node) expiresOf(req *sip.Request) time.Duration {
	if s, ok := vocab.RequestedExpiry(req); ok {
		return time.Duration(s) * time.Second
	}
	return n.cfg.Expires.Default
}

// register completes an authenticated REGISTER: SAR and 200 OK, or de-registration for expires 0.
func (n *Node) register(ctx context.Context, stx sip.ServerTransaction, req *sip.Request, impi, impu string) {
	exp := n.expiresOf(req)
	existing := n.lookup(impu)
	if exp == 0 {
		if existing != nil {
			n.remove(existing)
			n.replicateDelete(existing)
		}
		_, err := n.hss.ServerAssignment(ctx, &cx.SAR{UserName: impi, PublicIdentities: []string{impu},
			ServerName: n.cfg.ServerName(), AssignmentType: cx.SATUserDeregistration, UserDataAlreadyAvailable: true})
		if err != nil {
			n.cxFailure(stx, req, "SAR", impi, err)
			return
		}
		n.rec.Emit(obs.Registration{IMPU: impu, IMPI: impi, Event: "deregistered", CallID: sipx.CallID(req)})
		res := sip.NewResponseFromRequest(req, 200, "OK", nil)
		_ = stx.Respond(res)
		return
	}
	if exp < n.cfg.Expires.Min {
		n.px.Respond(stx, req, 423, "Interval Too Brief", sip.NewHeader(vocab.HdrMinExpires, strconv.Itoa(int(n.cfg.Expires.Min.Seconds()))))
		return
	}
	exp = min(exp, n.cfg.Expires.Max)
	contact := req.Contact()
	if contact == nil {
		n.px.Respond(stx, req, 400, "Missing Contact")
		return
	}
	cu := contact.Address
	cu.UriParams = cu.UriParams.Clone()
	contactValue := "<" + cu.String() + ">"
	path := sipx.HeaderValues(req, sipx.HdrPath)
	cseq := uint32(0)
	if c := req.CSeq(); c != nil {
		cseq = c.SeqNo
	}
	b := &binding{IMPI: impi, IMPUs: []string{impu}, Contact: contactValue, ContactU: cu, Path: path,
		CallID: sipx.CallID(req), CSeq: cseq, Expires: n.now().Add(exp)}
	sat := cx.SATRegistration
	if existing != nil && existing.IMPI == impi && !existing.Restored && !existing.Replicated {
		sat = cx.SATReRegistration
		b.IMPUs = existing.IMPUs
		if existing.CallID == b.CallID {
			b.CSeq = existing.CSeq // Initial-CSeq-Sequence-Number is the CSeq of the initial REGISTER
		}
	}
	saa, err := n.hss.ServerAssignment(ctx, &cx.SAR{UserName: impi, PublicIdentities: []string{impu},
		ServerName: n.cfg.ServerName(), AssignmentType: sat, UserDataAlreadyAvailable: sat == cx.SATReRegistration,
		Restoration: b.restoration(n.cfg)})
	if err != nil {
		n.cxFailure(stx, req, "SAR", impi, err)
		return
	}
	if ids := publicIdentities(saa.UserData); len(ids) > 0 {
		b.IMPUs = ids
		if !contains(ids, impu) {
			b.IMPUs = append([]string{impu}, ids...)
		}
	}
	if existing != nil {
		n.remove(existing)
	}
	n.store(b)
	n.replicate(b)
	event := "registered"
	if sat == cx.SATReRegistration {
		event = "reregistered"
	}
	n.rec.Emit(obs.Registration{IMPU: impu, IMPI: impi, Event: event, ExpiresS: int(exp.Seconds()),
		CallID: b.CallID, Path: strings.Join(path, ",")})

	res := sip.NewResponseFromRequest(req, 200, "OK", nil)
	cu.UriParams = cu.UriParams.Clone()
	ch := &sip.ContactHeader{Address: cu, Params: sip.NewParams()}
	ch.Params.Add(vocab.ParamExpires, strconv.Itoa(int(exp.Seconds())))
	res.AppendHeader(ch)
	for _, p := range path {
		res.AppendHeader(sip.NewHeader(sipx.HdrPath, p))
	}
	res.AppendHeader(sip.NewHeader(sipx.HdrServiceRoute, sipx.NameAddr(sipx.RouteURI("orig", n.cfg.Host))))
	var assoc []string
	for _, u := range b.IMPUs {
		assoc = append(assoc, "<"+u+">")
	}
	res.AppendHeader(sip.NewHeader(sipx.HdrPAssociatedURI, strings.Join(assoc, ", ")))
	if err := stx.Respond(res); err != nil {
		n.log.Warn("respond 200 to register", "impu", impu, "err", err)
	}
}

// restoration builds the SCSCF-Restoration-Info of a binding.
func (b *binding) restoration(cfg Config) *cx.SCSCFRestorationInfo {
	return &cx.SCSCFRestorationInfo{
		UserName:            b.IMPI,
		RegistrationTimeOut: b.Expires.Truncate(time.Second),
		AuthScheme:          cx.SchemeSIPDigest,
		Registrations: []cx.RestorationInfo{{
			Path: strings.Join(b.Path, ","), Contact: b.Contact, InitialCSeq: b.CSeq, CallID: b.CallID,
		}},
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
