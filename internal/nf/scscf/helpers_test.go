package scscf_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/scscf"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

const realm = "ims.test"

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// fakeHSS implements scscf.HSS: MAR answers the HA1 of a known user (impi → password), SAR records every request
// and answers UNREGISTERED_USER with the restoration info scripted for the public identity.
type fakeHSS struct {
	mu       sync.Mutex
	users    map[string]string
	restore  map[string]*cx.SCSCFRestorationInfo
	mars     []cx.MAR
	sars     []cx.SAR
	userData map[string][]byte
}

func newFakeHSS() *fakeHSS {
	return &fakeHSS{users: map[string]string{}, restore: map[string]*cx.SCSCFRestorationInfo{}, userData: map[string][]byte{}}
}

func (h *fakeHSS) MultimediaAuth(_ context.Context, req *cx.MAR) (*cx.MAA, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mars = append(h.mars, *req)
	pw, ok := h.users[req.UserName]
	if !ok {
		return nil, &cx.Error{Command: "MAR", Result: cx.ErrorUserUnknown}
	}
	return &cx.MAA{Result: cx.Success, UserName: req.UserName, PublicIdentity: req.PublicIdentity, NumberAuthItems: 1,
		AuthItems: []cx.AuthItem{{Scheme: cx.SchemeSIPDigest, Digest: &cx.DigestAuthenticate{Realm: realm,
			Algorithm: "MD5", QoP: "auth", HA1: md5hex(req.UserName + ":" + realm + ":" + pw)}}}}, nil
}

func (h *fakeHSS) ServerAssignment(_ context.Context, req *cx.SAR) (*cx.SAA, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sars = append(h.sars, *req)
	saa := &cx.SAA{Result: cx.Success, UserName: req.UserName}
	if req.AssignmentType == cx.SATUnregisteredUser && len(req.PublicIdentities) > 0 {
		if ri := h.restore[req.PublicIdentities[0]]; ri != nil {
			saa.Restoration = []*cx.SCSCFRestorationInfo{ri}
			saa.UserName = ri.UserName
		}
	}
	return saa, nil
}

// SARs returns the SARs of an assignment type.
func (h *fakeHSS) SARs(t cx.ServerAssignmentType) []cx.SAR {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []cx.SAR
	for _, s := range h.sars {
		if s.AssignmentType == t {
			out = append(out, s)
		}
	}
	return out
}

func (h *fakeHSS) MARs() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.mars)
}

func (h *fakeHSS) allSARs() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sars)
}

// script makes SAR UNREGISTERED_USER for impu return restoration info: registered through pcscf1, contact at the
// BAC, expiring in 10 minutes.
func (h *fakeHSS) script(impu, impi string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restore[impu] = &cx.SCSCFRestorationInfo{UserName: impi, RegistrationTimeOut: time.Now().Add(10 * time.Minute),
		AuthScheme: cx.SchemeSIPDigest, Registrations: []cx.RestorationInfo{{Path: "<sip:term@pcscf1.ims.test;lr>",
			Contact: "<sip:" + sipUser(impi) + "@bac.ims.test>", InitialCSeq: 1, CallID: "restored-" + impi}}}
}

func sipUser(impi string) string {
	for i, c := range impi {
		if c == '@' {
			return impi[:i]
		}
	}
	return impi
}

// lab is one S-CSCF (scscf1.ims.test) with a fake HSS and fake peers: the I-CSCF, a P-CSCF (pcscf1), another
// S-CSCF, the BAC and a stranger.
type lab struct {
	node                             *scscf.Node
	addr                             string
	hss                              *fakeHSS
	ev                               *sipxtest.Events
	icscf, pcscf, scscf2, bac, stray *peer
}

func startLab(restore bool) *lab {
	l := &lab{hss: newFakeHSS(), ev: sipxtest.NewEvents("scscf1")}
	for i := 1; i <= 9; i++ {
		l.hss.users[fmt.Sprintf("user%04d@ims.test", i)] = fmt.Sprintf("pass%04d", i)
	}
	l.icscf = startPeer("icscf.ims.test")
	l.pcscf = startPeer("pcscf1.ims.test")
	l.scscf2 = startPeer("scscf2.ims.test")
	l.bac = startPeer("bac.ims.test")
	l.stray = startPeer("attacker.example")
	ep, err := sipx.NewEndpoint("scscf1.ims.test", "127.0.0.1:0", sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	l.addr = ep.Addr
	res := pool.NewStaticResolver().
		SetSRV("_sip._udp.icscf.ims.test", pool.Target{Name: "icscf.ims.test", Addr: l.icscf.Addr(), Priority: 1, Weight: 1}).
		SetSRV("_sip._udp.pcscf1.ims.test", pool.Target{Name: "pcscf1.ims.test", Addr: l.pcscf.Addr(), Priority: 1, Weight: 1})
	cfg := scscf.Config{Host: "scscf1.ims.test", Listen: ep.Addr, Domain: "ims.test", ICSCF: "icscf.ims.test",
		PoolHosts: []string{"scscf1.ims.test", "scscf2.ims.test"}, Restore: &restore,
		Peers: sipx.Peers{BAC: []string{l.bac.Addr()}, PCSCF: []string{l.pcscf.Addr()}, ICSCF: []string{l.icscf.Addr()},
			SCSCF: []string{l.scscf2.Addr()}},
		Forward: sipx.ForwarderConfig{NoAnswer: 500 * time.Millisecond, MaxAttempts: 1}}
	n, err := scscf.New(cfg, l.hss, ep, res, nil, l.ev.Rec, sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	l.node = n
	// The endpoint serves only once New has registered the handlers (sipxtest.Endpoint serves at once, and
	// sipgo's handler map is written by New without a lock: the race detector sees it).
	ctx, cancel := context.WithCancel(context.Background())
	served, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(served); _ = ep.Serve(ctx) }()
	go func() { defer close(done); _ = n.Run(ctx) }()
	DeferCleanup(func() { cancel(); <-done; <-served })
	Eventually(ep.Listening()).Should(BeClosed())
	return l
}

// refused returns the reasons of the refused events so far.
func (l *lab) refused() []string {
	var out []string
	for _, e := range l.ev.Of("refused") {
		out = append(out, fmt.Sprint(e["reason"]))
	}
	return out
}

// registerReq is a REGISTER as the I-CSCF passes it on: Request-URI the home domain, Path of pcscf1, Contact at
// the BAC, the phone's Authorization.
func registerReq(user, callID string, cseq int, authz string) *sip.Request {
	hdrs := []string{"From: <sip:" + user + "@ims.test>;tag=reg" + user, "To: <sip:" + user + "@ims.test>",
		"Call-ID: " + callID, fmt.Sprintf("CSeq: %d REGISTER", cseq), "Contact: <sip:" + user + "@bac.ims.test>",
		"Expires: 600", "Path: <sip:term@pcscf1.ims.test;lr>"}
	if authz != "" {
		hdrs = append(hdrs, "Authorization: "+authz)
	}
	return sipxtest.Request(sip.REGISTER, "sip:ims.test", hdrs...)
}

// answer is how a spec answers a challenge: the phones' form by default, with overrides to attack it.
type answer struct {
	user, password, uri, realm, qop, username string
	rfc2069                                   bool // no qop, no cnonce, no nc (the RFC 2069 form)
}

// authorization answers a challenge like internal/harness/ue and SIPp do: MD5, qop=auth, nc=00000001, a cnonce.
func (a answer) authorization(ch *digest.Challenge) string {
	if a.password == "" {
		a.password = "pass" + a.user[len(a.user)-4:]
	}
	if a.uri == "" {
		a.uri = "sip:ims.test"
	}
	if a.realm == "" {
		a.realm = ch.Realm
	}
	if a.username == "" {
		a.username = a.user + "@ims.test"
	}
	ha1 := md5hex(a.username + ":" + ch.Realm + ":" + a.password)
	ha2 := md5hex("REGISTER:" + a.uri)
	if a.rfc2069 {
		return fmt.Sprintf(`Digest username="%s", realm="%s", nonce="%s", uri="%s", response="%s", algorithm=MD5`,
			a.username, a.realm, ch.Nonce, a.uri, md5hex(ha1+":"+ch.Nonce+":"+ha2))
	}
	if a.qop == "" {
		a.qop = "auth"
	}
	const nc, cnonce = "00000001", "0a4f113b"
	return fmt.Sprintf(`Digest username="%s", realm="%s", nonce="%s", uri="%s", response="%s", algorithm=MD5, cnonce="%s", qop=%s, nc=%s`,
		a.username, a.realm, ch.Nonce, a.uri, md5hex(ha1+":"+ch.Nonce+":"+nc+":"+cnonce+":"+a.qop+":"+ha2), cnonce, a.qop, nc)
}

// challengeOf parses the WWW-Authenticate of a 401.
func challengeOf(res *sip.Response) *digest.Challenge {
	Expect(res.StatusCode).To(Equal(401), "want a challenge, got %d %s", res.StatusCode, res.Reason)
	h := res.GetHeader("WWW-Authenticate")
	Expect(h).NotTo(BeNil())
	ch, err := digest.ParseChallenge(h.Value())
	Expect(err).NotTo(HaveOccurred())
	return ch
}

// challenge sends the first REGISTER of user from the I-CSCF and returns the challenge and the Call-ID.
func (l *lab) challenge(user string) (*digest.Challenge, string) {
	callID := "reg-" + user + "-" + sip.GenerateBranchN(6)
	res := l.icscf.MustSend(registerReq(user, callID, 1,
		`Digest username="`+user+`@ims.test", realm="ims.test", nonce="", uri="sip:ims.test", response=""`), l.addr)
	return challengeOf(res), callID
}

// register runs the full digest registration of user from the I-CSCF and expects 200.
func (l *lab) register(user string) *sip.Response {
	ch, callID := l.challenge(user)
	res := l.icscf.MustSend(registerReq(user, callID, 2, answer{user: user}.authorization(ch)), l.addr)
	Expect(res.StatusCode).To(Equal(200), "register %s: %d %s", user, res.StatusCode, res.Reason)
	return res
}

// invite builds an INVITE from user0001 to callee with extra headers.
func invite(ruri string, hdrs ...string) *sip.Request {
	return sipxtest.Request(sip.INVITE, ruri, append([]string{"Contact: <sip:user0001@bac.ims.test>"}, hdrs...)...)
}

func identityOf(req *sip.Request) string {
	id, err := sipx.IdentityOf(sipx.FirstHeader(req, sipx.HdrPAssertedIdentity))
	if err != nil {
		return ""
	}
	return id
}
