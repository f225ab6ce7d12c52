// Package pcscf is the Proxy-CSCF: the first IMS hop behind the BAC. It adds Path on REGISTER and keeps the
// registrations that pass through it (Service-Route), asserts the caller's identity, and in the quasi-pool takes
// over users registered through a dead peer: an originating request from a user it does not know goes to the
// I-CSCF marked orig;restore=1, and a terminating request from a trusted S-CSCF for a user it does not know is
// passed on by its Request-URI (the BAC).
package pcscf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/restore"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
	"github.com/imslab/quasipool/internal/runtime/repl"
)

// Config configures a P-CSCF.
type Config struct {
	Host      string     // e.g. pcscf1.ims.test
	Listen    string     // SIP/UDP listen address
	Domain    string     // home domain (P-Visited-Network-ID)
	ICSCF     string     // host of the home I-CSCF
	PoolHosts []string   // the P-CSCF pool members' hosts
	Peers     sipx.Peers // source addresses of the lab's SIP nodes by role (docs/security.md)
	Forward   sipx.ForwarderConfig
	// Restore and SCSCFFailover are the node's restore.Policy, where the decisions are.
	//
	// Restore enables the quasi-pool takeover (default true). Without it a P-CSCF refuses requests of users
	// whose registration state it does not hold (504 with the restoration body for originating requests, 480 for
	// terminating ones) and answers 504 with the restoration body when the user's S-CSCF cannot be reached, as
	// under plain load sharing (docs/schemes.md).
	Restore *bool
	// SCSCFFailover sends an originating request to the S-CSCF of the Service-Route through that S-CSCF's
	// per-host SRV record, so a pool member holding a replicated copy serves it when the S-CSCF is down
	// (S-CSCF pools with pool-sync, active-standby or mutual). Without it only the named S-CSCF is tried.
	SCSCFFailover bool
	// Replication, when set, copies every registration this P-CSCF keeps to its pool peers and keeps theirs
	// (pool-sync, active-standby, mutual; internal/runtime/repl).
	Replication *repl.Config
}

// Validate names the bad field.
func (c *Config) Validate() error {
	switch {
	case c.Host == "":
		return errors.New("pcscf: host: must be set")
	case c.Listen == "":
		return errors.New("pcscf: listen: must be set")
	case c.Domain == "":
		return errors.New("pcscf: domain: must be set")
	case c.ICSCF == "":
		return errors.New("pcscf: icscf: must be set")
	}
	return nil
}

type registration struct {
	IMPU         string    `json:"impu"`
	Contact      string    `json:"contact,omitempty"` // AOR of the registered Contact (the BAC token URI)
	ServiceRoute []string  `json:"service_route"`
	Associated   []string  `json:"associated,omitempty"`
	Expires      time.Time `json:"expires"`
	Replicated   bool      `json:"-"` // a pool peer's registration, copied to us
}

// Node is a running P-CSCF.
type Node struct {
	cfg    Config
	policy restore.Policy // from cfg
	px     *sipx.Proxy
	log    *slog.Logger
	rec    *obs.Recorder
	now    func() time.Time

	repl *repl.Replicator

	mu       sync.Mutex
	regs     map[string]*registration // IMPU → registration
	contacts map[string]*registration // registered Contact AOR → registration
}

// New builds a P-CSCF on an endpoint.
func New(cfg Config, ep *sipx.Endpoint, res pool.Resolver, health *pool.Health, rec *obs.Recorder, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Restore == nil {
		t := true
		cfg.Restore = &t
	}
	if log == nil {
		log = slog.Default()
	}
	self := slices.Clone(cfg.PoolHosts)
	if !slices.Contains(self, cfg.Host) {
		self = append(self, cfg.Host)
	}
	n := &Node{cfg: cfg, policy: restore.Policy{Restore: *cfg.Restore, SCSCFFailover: cfg.SCSCFFailover},
		log: log, rec: rec, now: time.Now, regs: map[string]*registration{}, contacts: map[string]*registration{},
		px: sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Health: health, Rec: rec, Log: log, Trust: sipx.NewTrust(cfg.Peers)},
			cfg.Forward, self...)}
	n.px.TryingFromBAC = true // the BAC times it (overload.ObserveChain)
	n.px.Serve(sipx.Handlers{Register: n.onRegister, Request: n.onRequest, Ack: n.onAck})
	r, err := repl.Open(cfg.Replication, replState{n}, rec, log)
	if err != nil {
		return nil, fmt.Errorf("pcscf: %w", err)
	}
	n.repl = r
	return n, nil
}

// Run blocks until ctx is done, dropping lapsed registrations.
func (n *Node) Run(ctx context.Context) error {
	n.px.Start(ctx)
	defer n.repl.Start(ctx)()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			now := n.now()
			n.mu.Lock()
			for k, r := range n.regs {
				if now.After(r.Expires) {
					delete(n.regs, k)
				}
			}
			for k, r := range n.contacts {
				if now.After(r.Expires) {
					delete(n.contacts, k)
				}
			}
			n.mu.Unlock()
		}
	}
}

// onRegister adds Path and forwards to the I-CSCF; a 200 OK records the registration (SPEC §3.1 step 2, 7).
// Phones register through the BAC: a REGISTER from anyone else is refused.
func (n *Node) onRegister(r *sipx.Request) {
	ctx, req, stx, out := r.Ctx, r.Req, r.Tx, r.Out
	if r.Role != sipx.RoleBAC {
		n.px.Refuse(r, "register_not_from_bac")
		return
	}
	if !n.wellFormed(r) || n.forgedMarker(r) {
		return
	}
	sipx.RemoveHeaders(out, sipx.HdrPPreferredIdentity) // identity is asserted by the S-CSCF's P-Associated-URI
	out.PrependHeader(sip.NewHeader(sipx.HdrPath, sipx.NameAddr(sipx.RouteURI("term", n.cfg.Host))))
	if out.GetHeader(sipx.HdrPVisitedNetworkID) == nil {
		out.AppendHeader(sip.NewHeader(sipx.HdrPVisitedNetworkID, `"`+n.cfg.Domain+`"`))
	}
	o := n.px.Fwd.Forward(ctx, stx, out, sipx.SRVHop(n.cfg.ICSCF))
	if o.Final != nil && o.Final.StatusCode == 200 {
		n.remember(req, o.Final)
	}
	n.px.Finish(stx, req, o)
}

func (n *Node) remember(req *sip.Request, res *sip.Response) {
	to := req.To()
	if to == nil {
		return
	}
	impu := sipx.AOR(to.Address)
	exp, _ := vocab.GrantedExpiry(res, nil) // none granted: the registration is gone
	if exp <= 0 {
		n.forget(impu)
		if n.repl != nil {
			n.repl.Delete(impu)
		}
		return
	}
	r := &registration{IMPU: impu, ServiceRoute: sipx.HeaderValues(res, sipx.HdrServiceRoute),
		Expires: n.now().Add(time.Duration(exp) * time.Second)}
	if c, ok := res.GetHeader("Contact").(*sip.ContactHeader); ok && c != nil {
		r.Contact = sipx.AOR(c.Address)
	}
	for _, a := range sipx.HeaderValues(res, sipx.HdrPAssociatedURI) {
		if id, err := sipx.IdentityOf(a); err == nil {
			r.Associated = append(r.Associated, id)
		}
	}
	n.keep(r)
	if n.repl != nil {
		n.repl.Put(impu, r)
	}
}

// keep stores a registration under its IMPU, its associated IMPUs and its Contact.
func (n *Node) keep(r *registration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.regs[r.IMPU] = r
	for _, a := range r.Associated {
		n.regs[a] = r
	}
	if r.Contact != "" {
		n.contacts[r.Contact] = r
	}
}

// forget removes the registration of an IMPU.
func (n *Node) forget(impu string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.regs[impu]
	if r == nil {
		return
	}
	for _, a := range r.Associated {
		if n.regs[a] == r {
			delete(n.regs, a)
		}
	}
	delete(n.regs, impu)
	if r.Contact != "" && n.contacts[r.Contact] == r {
		delete(n.contacts, r.Contact)
	}
}

func (n *Node) lookup(impu string) *registration {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.regs[impu]
	if r == nil || n.now().After(r.Expires) {
		return nil
	}
	return r
}

// knowsCallee reports whether this P-CSCF holds the registration a terminating request is for: the Request-URI
// is the registered Contact, the To header the callee's public identity.
func (n *Node) knowsCallee(req *sip.Request) bool {
	n.mu.Lock()
	r := n.contacts[sipx.AOR(req.Recipient)]
	n.mu.Unlock()
	if r != nil && !n.now().After(r.Expires) {
		return true
	}
	if to := req.To(); to != nil {
		return n.lookup(sipx.AOR(to.Address)) != nil
	}
	return false
}

// onRequest routes initial requests (originating from the BAC, terminating from an S-CSCF) and in-dialog ones.
func (n *Node) onRequest(r *sipx.Request) {
	if !n.wellFormed(r) {
		return
	}
	if r.Role == sipx.RoleUntrusted {
		// Phones reach the network through the BAC only: nothing a stranger sends is relayed, in dialog or not.
		n.px.Refuse(r, "not_from_bac_or_core")
		return
	}
	if n.forgedMarker(r) {
		return
	}
	if r.InDialog() {
		if r.Role == sipx.RoleBAC {
			// The prelude removed P-Asserted-Identity; P-Preferred-Identity is only read on initial requests.
			sipx.RemoveHeaders(r.Out, sipx.HdrPPreferredIdentity)
		}
		n.px.InDialog(r) // only with our (or a pool peer's) Record-Route, or from the trust domain
		return
	}
	if r.Popped && r.Top.User == "term" {
		n.terminating(r.Ctx, r, r.Req, r.Out)
		return
	}
	n.originating(r.Ctx, r, r.Req, r.Out)
}

// onAck relays an ACK for a 2xx under the rule of in-dialog requests; an ACK from a stranger is dropped.
func (n *Node) onAck(r *sipx.Request) {
	if r.Role == sipx.RoleUntrusted {
		n.log.Info("ack dropped: not from bac or core", "call_id", sipx.CallID(r.Req), "peer", r.Source())
		return
	}
	if r.Role == sipx.RoleBAC {
		sipx.RemoveHeaders(r.Out, sipx.HdrPPreferredIdentity)
	}
	n.px.Ack(r)
}

// wellFormed answers 400 to a request without the headers a proxy needs (From, To, Call-ID, CSeq): sipgo hands
// such requests to the handlers when it can still build a transaction.
func (n *Node) wellFormed(r *sipx.Request) bool {
	req := r.Req
	missing := ""
	switch {
	case req.From() == nil:
		missing = "From"
	case req.To() == nil:
		missing = "To"
	case req.CallID() == nil:
		missing = "Call-ID"
	case req.CSeq() == nil:
		missing = "CSeq"
	}
	if missing == "" {
		return true
	}
	n.px.Respond(r.Tx, req, 400, "Bad Request (missing "+missing+")")
	return false
}

// forgedMarker refuses a request from outside the trust domain (the BAC) that carries restore on any Route
// entry, or orig on any Route entry of an initial request: only this P-CSCF adds restore=1 (on its own Route to
// the I-CSCF), and the BAC never routes an initial request. The prelude already stripped the markers from the
// copy and refused them on our own entry; this closes the other entries too.
func (n *Node) forgedMarker(r *sipx.Request) bool {
	if r.Role.InTrustDomain() {
		return false
	}
	for _, u := range sipx.Routes(r.Req) {
		if sipx.HasParam(u, sipx.ParamRestore) || !r.InDialog() && (u.User == "orig" || sipx.HasParam(u, sipx.ParamOrig)) {
			n.px.Refuse(r, "marker_from_untrusted")
			return true
		}
	}
	return false
}

func (n *Node) recordRoute(out *sip.Request) {
	out.PrependHeader(&sip.RecordRouteHeader{Address: sipx.RouteURI("", n.cfg.Host)})
}

// terminating passes a request from the S-CSCF on by its Request-URI (the BAC). A request for a user this P-CSCF
// does not know is taken over only from a trusted S-CSCF (SPEC §4.2).
func (n *Node) terminating(ctx context.Context, r *sipx.Request, req, out *sip.Request) {
	stx := r.Tx
	if r.Role != sipx.RoleSCSCF {
		n.px.Refuse(r, "terminating_not_from_scscf")
		return
	}
	if !n.policy.PCSCFPassesUnknownCallee() && !n.knowsCallee(req) {
		// Without restoration a P-CSCF cannot reach a phone that did not register through it (or a peer that
		// replicates to it): the callee is unreachable until it registers again.
		n.rec.Emit(obs.Refused{Direction: "mt", CallID: sipx.CallID(req), Method: string(req.Method),
			Reason: "not_registered_here"})
		n.px.Respond(stx, req, 480, "Temporarily Unavailable (not registered here)")
		return
	}
	n.recordRoute(out)
	n.px.Finish(stx, req, n.px.Fwd.Forward(ctx, stx, out, sipx.NextHop(out)))
}

// originating asserts the caller's identity and routes by its Service-Route; a caller registered elsewhere (its
// P-CSCF died) or whose S-CSCF cannot be reached goes to the I-CSCF marked orig;restore=1 (SPEC §4.1, §4.5).
func (n *Node) originating(ctx context.Context, r *sipx.Request, req, out *sip.Request) {
	stx := r.Tx
	if r.Role != sipx.RoleBAC {
		n.px.Refuse(r, "originating_not_from_bac")
		return
	}
	identity, ok := n.callerIdentity(r)
	if !ok {
		return
	}
	sipx.RemoveHeaders(out, sipx.HdrPPreferredIdentity)
	sipx.RemoveHeaders(out, sipx.HdrPAssertedIdentity)
	out.AppendHeader(sip.NewHeader(sipx.HdrPAssertedIdentity, "<"+identity+">"))
	sipx.RemoveHeaders(out, "Route")
	n.recordRoute(out)

	reg := n.lookup(identity) // the registration the identity belongs to (callerIdentity checked the binding)
	unreachable := false
	if reg != nil && len(reg.ServiceRoute) > 0 {
		viaSR := out.Clone()
		var first sip.Uri
		for i := len(reg.ServiceRoute) - 1; i >= 0; i-- {
			if u, err := sipx.ParseNameAddr(reg.ServiceRoute[i]); err == nil {
				sipx.PrependRoute(viaSR, u)
				first = u
			}
		}
		o := n.toSCSCF(ctx, stx, viaSR, first.Host)
		// Only silence means the S-CSCF is unreachable (no answer, a transport error, every member down): a
		// 408/503/504 that a live S-CSCF relays (the terminating side failed, the HSS is down) is the answer to
		// this call, and a restoration through the I-CSCF would need the same failed part again (issue 11's
		// hss-outage: 1,298 useless restorations in a 20 s HSS outage before this rule).
		if o.Final != nil || !o.Retryable() {
			n.px.Finish(stx, req, o)
			return
		}
		unreachable = true
	}
	d := n.policy.PCSCFOriginating(unreachable)
	if d.Verdict == restore.Reregister {
		// TS 24.229 §5.2.6.3: not registered here, or the S-CSCF cannot be reached; the UE is asked to register again.
		n.px.RespondRestoration(stx, req, d.Reason)
		return
	}
	reason := d.Reason
	sipx.PrependRoute(out, sipx.RouteURI("", n.cfg.ICSCF, sipx.ParamOrig, restore.Marker))
	n.rec.Emit(obs.Restore{IMPU: identity, Reason: reason, CallID: sipx.CallID(req), Method: string(req.Method)})
	n.px.Finish(stx, req, n.px.Fwd.Forward(ctx, stx, out, sipx.SRVHop(n.cfg.ICSCF)))
}

// callerIdentity returns the identity to assert for an originating request from the BAC: its
// P-Preferred-Identity, which the BAC binds to the phone's registration (docs/security.md). When this P-CSCF holds
// the registration of that identity, the request must come with that registration's Contact (the phone's BAC
// token); when it holds the registration of the request's Contact, the identity must be one of that
// registration's (the registered IMPU or a P-Associated-URI). Without either (a takeover of a dead peer's user)
// the BAC's word is taken. A missing identity is answered 403, an unparsable one 400; ok is false when answered.
func (n *Node) callerIdentity(r *sipx.Request) (identity string, ok bool) {
	ppi := sipx.HeaderValues(r.Out, sipx.HdrPPreferredIdentity)
	if len(ppi) == 0 {
		n.px.Respond(r.Tx, r.Req, 403, "Forbidden (no identity)")
		return "", false
	}
	id, err := sipx.IdentityOf(ppi[0])
	if err != nil || !validIdentity(id) {
		n.px.Respond(r.Tx, r.Req, 400, "Bad Request (P-Preferred-Identity)")
		return "", false
	}
	contact := ""
	if c := r.Req.Contact(); c != nil {
		contact = sipx.AOR(c.Address)
	}
	if reg := n.lookup(id); reg != nil && reg.Contact != "" && contact != "" && !strings.EqualFold(reg.Contact, contact) {
		n.px.Refuse(r, "identity_of_other_contact")
		return "", false
	}
	if reg := n.byContact(contact); reg != nil && !reg.has(id) {
		n.px.Refuse(r, "identity_not_of_contact")
		return "", false
	}
	return id, true
}

// validIdentity accepts a sip:, sips: or tel: URI with something in it.
func validIdentity(id string) bool {
	scheme, rest, ok := strings.Cut(id, ":")
	if !ok || rest == "" || strings.ContainsAny(rest, " \t\r\n<>\"") {
		return false
	}
	switch scheme {
	case "sip", "sips":
		user, host, _ := strings.Cut(rest, "@")
		return user != "" && host != ""
	case "tel":
		return true
	}
	return false
}

// has reports an identity of the registration: its IMPU or an associated one.
func (r *registration) has(id string) bool {
	return strings.EqualFold(r.IMPU, id) || slices.ContainsFunc(r.Associated, func(a string) bool { return strings.EqualFold(a, id) })
}

// byContact returns the live registration of a registered Contact AOR, nil when none.
func (n *Node) byContact(contact string) *registration {
	if contact == "" {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.contacts[contact]
	if r == nil || n.now().After(r.Expires) {
		return nil
	}
	return r
}

// toSCSCF sends to the S-CSCF of the Service-Route and to it only; its failure is handled by the I-CSCF with
// restore=1, not by the per-host SRV fallback (SPEC §4.5), unless the S-CSCF pool replicates (restore.Policy.SCSCFHop).
func (n *Node) toSCSCF(ctx context.Context, stx sip.ServerTransaction, out *sip.Request, host string) sipx.Outcome {
	return n.px.Fwd.Forward(ctx, stx, out, n.policy.SCSCFHop(host))
}

// replState is the P-CSCF's registrations as seen by the replicator.
type replState struct{ n *Node }

// Apply stores or removes a pool peer's registration.
func (s replState) Apply(m repl.Message) {
	switch m.Op {
	case repl.OpPut:
		var r registration
		if err := json.Unmarshal(m.Data, &r); err != nil || r.IMPU == "" {
			s.n.log.Warn("repl: bad registration", "peer", m.From, "impu", m.Key, "err", err)
			return
		}
		r.Replicated = true
		s.n.forget(r.IMPU)
		s.n.keep(&r)
	case repl.OpDelete:
		s.n.forget(m.Key)
	}
}

// Snapshot returns every registration this P-CSCF holds, its own and its peers', once each.
func (s replState) Snapshot() []repl.Message {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	var out []repl.Message
	for k, r := range s.n.regs {
		if k != r.IMPU {
			continue // an associated IMPU: sent with its registration
		}
		b, err := json.Marshal(r)
		if err == nil {
			out = append(out, repl.Message{Op: repl.OpPut, Key: k, Data: b})
		}
	}
	return out
}
