package sipx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/overload"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// Proxy is the framework every SIP network function of the testbed stands on: an endpoint, a forwarder with
// peer health, the trust of the node (who may assert identity, who may send orig and restore=1) and the
// handler prelude of a loose-routing stateful proxy (RFC 3261 §16), written once:
//
//   - a panic in a handler is recovered and answered 500, the node keeps serving;
//   - Max-Forwards and Via loops are answered 483 / 482;
//   - the sender's role is read from its source address (Trust), never from the message;
//   - from a sender outside the trust domain, P-Asserted-Identity is removed (and P-Preferred-Identity too,
//     except from the BAC) and orig / restore parameters are removed from every Route entry; a request whose
//     own Route entry (or Service-Route user "orig") carries them is refused 403;
//   - the node's own Route entry is popped from a copy (Request.Out);
//   - every request gets a context derived from the node's, cancelled when its handler returns.
//
// A network function then only implements its procedures (func(*Request)).
type Proxy struct {
	EP     *Endpoint
	Fwd    *Forwarder
	Health *pool.Health
	Res    pool.Resolver
	Rec    *obs.Recorder
	Log    *slog.Logger
	Trust  *Trust
	// Self are the host names a Route entry may carry and still be ours: the node's own host and, for pool
	// members, the other members of its pool (a peer's per-host SRV record fails over to us).
	Self []string
	// TryingFromBAC answers a new INVITE from the BAC 100 Trying at once, before the handler (the P-CSCF sets
	// it): the BAC times that answer to see how loaded the core is (overload.ObserveChain) without the wait of a
	// takeover further down. Without it sipgo sends 100 Trying only if nothing else came within 200 ms.
	TryingFromBAC bool
	// TryingAtOnce answers every new INVITE (outside a dialog) 100 Trying at once, before the handler, whoever
	// sent it. NewProxy sets it when the lab runs fast failure detection (ForwarderConfig.ProvisionalTimeout): the
	// node upstream takes a member that stays silent that long for dead, and sipgo's own 100 Trying comes only
	// after 200 ms.
	TryingAtOnce bool

	base atomic.Pointer[context.Context]
}

// Request is one request as a handler sees it, after the prelude.
type Request struct {
	Ctx  context.Context
	Req  *sip.Request // as received; read it, do not change it
	Out  *sip.Request // the copy to forward: own Route entry popped, untrusted identity and markers removed
	Tx   sip.ServerTransaction
	Role Role // the sender's role, from its source address
	// Top is this node's Route entry (popped from Out) when Popped.
	Top    sip.Uri
	Popped bool
}

// InDialog reports a request that belongs to a dialog (To tag present).
func (r *Request) InDialog() bool { return HasToTag(r.Req) }

// Orig reports the originating marker on this node's Route entry: the orig parameter, or the user part "orig"
// of a Service-Route. Only possible from the trust domain (the prelude refuses it from anyone else).
func (r *Request) Orig() bool {
	return r.Popped && (r.Top.User == "orig" || HasParam(r.Top, ParamOrig))
}

// Restore reports restore=1 on this node's Route entry. Only possible from the trust domain.
func (r *Request) Restore() bool { return r.Popped && ParamValue(r.Top, ParamRestore) == "1" }

// Source is the sender's address (ip:port).
func (r *Request) Source() string { return r.Req.Source() }

// Identity is the asserted identity of the request (P-Asserted-Identity, kept only from the trust domain), "" when
// there is none.
func (r *Request) Identity() string {
	if pai := FirstHeader(r.Out, HdrPAssertedIdentity); pai != "" {
		if id, err := IdentityOf(pai); err == nil {
			return id
		}
	}
	return ""
}

// Start sets the context every request context derives from (the node's); before it, context.Background.
func (p *Proxy) Start(ctx context.Context) { p.base.Store(&ctx) }

func (p *Proxy) baseContext() context.Context {
	if c := p.base.Load(); c != nil {
		return *c
	}
	return context.Background()
}

// IsSelf reports whether a URI points at this node (or its pool, see Self).
func (p *Proxy) IsSelf(u sip.Uri) bool {
	for _, h := range p.Self {
		if IsHost(u, h) {
			return true
		}
	}
	return false
}

// PopSelf removes the top Route when it points at this node and returns it.
func (p *Proxy) PopSelf(req *sip.Request) (sip.Uri, bool) {
	r := req.Route()
	if r == nil || !p.IsSelf(r.Address) {
		return sip.Uri{}, false
	}
	return PopRoute(req)
}

// NextHop is where a loose-routed request goes: the top Route, else the Request-URI.
func NextHop(req *sip.Request) Hop {
	if r := req.Route(); r != nil {
		return HopFor(r.Address)
	}
	return HopFor(req.Recipient)
}

// Respond answers a request with a locally generated response.
func (p *Proxy) Respond(stx sip.ServerTransaction, req *sip.Request, code int, reason string, hdrs ...sip.Header) {
	res := sip.NewResponseFromRequest(req, code, reason, nil)
	for _, h := range hdrs {
		res.AppendHeader(h)
	}
	if err := stx.Respond(res); err != nil {
		p.Log.Debug("respond", "call_id", callID(req), "method", string(req.Method), "status", code, "err", err)
	}
}

// Reply answers the request of r.
func (r *Request) Reply(p *Proxy, code int, reason string, hdrs ...sip.Header) {
	p.Respond(r.Tx, r.Req, code, reason, hdrs...)
}

// Refuse answers 403 to a request the node does not accept from this sender and records it as a "refused"
// event (reason, method, call_id, the sender's address and role), so reports can count the refusals.
func (p *Proxy) Refuse(r *Request, reason string) {
	p.Rec.Emit(obs.Refused{Reason: reason, Method: string(r.Req.Method), CallID: callID(r.Req),
		Peer: r.Source(), Role: r.Role.String()})
	p.Log.Info("refused", "reason", reason, "method", string(r.Req.Method), "call_id", callID(r.Req), "peer", r.Source(),
		"role", r.Role.String())
	p.Respond(r.Tx, r.Req, 403, "Forbidden ("+reason+")")
}

// RefuseAck records a refused ACK (no answer is possible: it is dropped).
func (p *Proxy) RefuseAck(r *Request, reason string) {
	p.Rec.Emit(obs.Refused{Reason: reason, Method: string(r.Req.Method), CallID: callID(r.Req),
		Peer: r.Source(), Role: r.Role.String()})
	p.Log.Info("ack dropped", "reason", reason, "call_id", callID(r.Req), "peer", r.Source(), "role", r.Role.String())
}

// Finish relays a forward's final response upstream, or answers for a forward that got none.
func (p *Proxy) Finish(stx sip.ServerTransaction, req *sip.Request, out Outcome) {
	switch {
	case out.Cancelled:
		return // sipgo already answered 487 upstream
	case out.Final != nil:
		p.Fwd.Relay(stx, req, out.Final)
	case errors.Is(out.Err, ErrNoTarget):
		// Every member known down: come back later, like every 503 a node generates (docs/architecture.md,
		// "Overload control"); a phone without Retry-After would retry at once.
		p.Respond(stx, req, 503, "Service Unavailable", sip.NewHeader("Retry-After", "1"))
	default:
		code, reason := 504, "Server Time-out" // no answer, a transport error, a name that does not resolve
		var se *StatusError
		if errors.As(out.Err, &se) {
			code, reason = se.Code, se.Reason
		}
		p.Respond(stx, req, code, reason)
	}
}

// Fail answers a request with the status of err (StatusOf).
func (p *Proxy) Fail(r *Request, err error) {
	code, reason := StatusOf(err)
	if code >= 500 {
		p.Log.Warn("request failed", "method", string(r.Req.Method), "call_id", callID(r.Req), "status", code, "err", err)
	}
	if code == 503 {
		// Every 503 this node generates is "come back later": an overloaded HSS, or no member of a pool up.
		p.Respond(r.Tx, r.Req, code, reason, sip.NewHeader("Retry-After", "1"))
		return
	}
	p.Respond(r.Tx, r.Req, code, reason)
}

// CheckLoop answers 483 when Max-Forwards is exhausted and 482 when this node's address already appears in the
// Via chain more than a few times; it returns false when the request must not be processed.
func (p *Proxy) CheckLoop(stx sip.ServerTransaction, req *sip.Request) bool {
	if mf := req.MaxForwards(); mf != nil && mf.Val() <= 1 {
		p.Respond(stx, req, 483, "Too Many Hops")
		return false
	}
	mine := 0
	for _, h := range req.GetHeaders("Via") {
		if v, ok := h.(*sip.ViaHeader); ok && p.EP.isOwnAddr(v.Host, v.Port) {
			mine++
		}
	}
	if mine >= 3 {
		p.Respond(stx, req, 482, "Loop Detected")
		return false
	}
	return true
}

// Options answers OPTIONS (the peers' health probes) with 200.
func (p *Proxy) Options(req *sip.Request, stx sip.ServerTransaction) {
	p.Respond(stx, req, 200, "OK")
}

// InDialog loose-routes a request that belongs to a dialog (To tag present) to the next hop, but only when it
// carries this node's own Record-Route (our Route entry was popped) or comes from the trust domain: the node is
// no open relay for whoever sends a request with a To tag.
//
// From outside the trust domain the next hop must moreover be a host of the home network (a name under the
// node's own domain, no IP literal, no port): every route set and remote target the lab hands out names such a host, so
// only a forged route set leads elsewhere.
func (p *Proxy) InDialog(r *Request) {
	if !r.Popped && !r.Role.InTrustDomain() {
		p.Refuse(r, "not_our_dialog")
		return
	}
	hop := NextHop(r.Out)
	if !r.Role.InTrustDomain() && !p.inHomeNetwork(hop) {
		p.Refuse(r, "relay_outside_home_network")
		return
	}
	p.Finish(r.Tx, r.Req, p.Fwd.Forward(r.Ctx, r.Tx, r.Out, hop))
}

// inHomeNetwork reports a hop whose host is a name under this node's domain (pcscf1.ims.test → ims.test) with no
// port, resolved through its SRV record (a port would skip SRV and could name any socket of the host).
func (p *Proxy) inHomeNetwork(h Hop) bool {
	if h.SRV == "" {
		return false
	}
	_, domain, ok := strings.Cut(strings.TrimSuffix(p.EP.Host, "."), ".")
	if !ok || domain == "" {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(h.Host, "."))
	domain = strings.ToLower(domain)
	return host == domain || strings.HasSuffix(host, "."+domain)
}

// Ack forwards an ACK for a 2xx (its own transaction-less request) statelessly along its Route, under the rule
// of InDialog.
func (p *Proxy) Ack(r *Request) {
	if !r.Popped && !r.Role.InTrustDomain() {
		p.RefuseAck(r, "not_our_dialog")
		return
	}
	if !r.Role.InTrustDomain() && !p.inHomeNetwork(NextHop(r.Out)) {
		p.RefuseAck(r, "relay_outside_home_network")
		return
	}
	p.SendAck(r.Ctx, r.Out)
}

// SendAck sends an ACK (already routed: own Route popped) statelessly to its next hop.
func (p *Proxy) SendAck(ctx context.Context, out *sip.Request) {
	hop := NextHop(out)
	targets, err := p.Fwd.Targets(ctx, hop, nil)
	if err != nil || len(targets) == 0 {
		p.Log.Warn("ack: no target", "call_id", callID(out), "hop", hop.String(), "err", err)
		return
	}
	out = out.Clone()
	out.PrependHeader(p.EP.Via())
	if mf := out.MaxForwards(); mf != nil {
		mf.Dec()
	}
	p.EP.Bind(out)
	out.SetDestination(targets[0].Addr)
	if err := p.EP.Client.WriteRequest(out, noBuild); err != nil {
		p.Log.Warn("ack: send", "call_id", callID(out), "peer", targets[0].Name, "err", err)
	}
}

// HasToTag reports an in-dialog request.
func HasToTag(req *sip.Request) bool {
	if to := req.To(); to != nil && to.Params != nil {
		_, ok := to.Params.Get("tag")
		return ok
	}
	return false
}

// CallID returns the Call-ID of a message (vocab.CallID).
func CallID(m sip.Message) string { return vocab.CallID(m) }

// Deps are the collaborators every SIP network function is built from.
type Deps struct {
	EP     *Endpoint
	Res    pool.Resolver
	Health *pool.Health
	Rec    *obs.Recorder
	Log    *slog.Logger
	// Trust maps source addresses to roles (nil: every sender is untrusted).
	Trust *Trust
	// Seed seeds the forwarder's target choice (0: the ForwarderConfig's Seed, and when that is 0 too, the clock).
	Seed uint64
}

// NewProxy builds the shared proxy of a network function whose Route entries name one of self.
func NewProxy(d Deps, fwd ForwarderConfig, self ...string) *Proxy {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	seed := d.Seed
	if seed == 0 {
		seed = fwd.Seed
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return &Proxy{EP: d.EP, Health: d.Health, Res: d.Res, Rec: d.Rec, Log: d.Log, Self: self, Trust: d.Trust,
		TryingAtOnce: fwd.ProvisionalTimeout > 0, Fwd: NewForwarder(d.EP, d.Res, d.Health, fwd, d.Rec, d.Log, seed)}
}

// Handler is a network function's procedure for one request, after the prelude.
type Handler func(r *Request)

// Handlers are a network function's entry points; nil Ack gets Proxy.Ack. OPTIONS is answered by the proxy;
// CANCEL by sipgo.
type Handlers struct {
	Register Handler
	Request  Handler // every other method but ACK, CANCEL and OPTIONS
	Ack      Handler
}

// Serve registers a network function's handlers on its endpoint, each behind the prelude.
func (p *Proxy) Serve(h Handlers) {
	srv := p.EP.Server
	if h.Ack == nil {
		h.Ack = p.Ack
	}
	srv.OnRegister(p.wrap(h.Register, true))
	req := p.wrap(h.Request, true)
	for _, m := range []sip.RequestMethod{sip.INVITE, sip.BYE, sip.MESSAGE, sip.UPDATE, sip.INFO, sip.PRACK, sip.NOTIFY,
		sip.SUBSCRIBE, sip.REFER, sip.PUBLISH} {
		srv.OnRequest(m, req)
	}
	srv.OnAck(p.wrap(h.Ack, false))
	srv.OnOptions(func(req *sip.Request, stx sip.ServerTransaction) {
		defer p.recover(req, stx)
		p.Options(req, stx)
	})
}

// recover turns a handler panic into a 500 answer (when there is a transaction) and an event.
func (p *Proxy) recover(req *sip.Request, stx sip.ServerTransaction) {
	v := recover()
	if v == nil {
		return
	}
	p.Log.Error("sip handler panic", "method", string(req.Method), "call_id", callID(req), "panic", fmt.Sprint(v),
		"stack", string(debug.Stack()))
	p.Rec.Emit(obs.SIPPanic{Method: string(req.Method), CallID: callID(req), Panic: fmt.Sprint(v)})
	if stx != nil {
		p.Respond(stx, req, 500, "Server Internal Error")
	}
}

// wrap puts the prelude in front of a handler (see Proxy).
func (p *Proxy) wrap(h Handler, withTx bool) func(*sip.Request, sip.ServerTransaction) {
	return func(req *sip.Request, stx sip.ServerTransaction) {
		if !withTx {
			stx = nil
		}
		defer p.recover(req, stx)
		if h == nil {
			if stx != nil {
				p.Respond(stx, req, 405, "Method Not Allowed")
			}
			return
		}
		if stx != nil && !p.CheckLoop(stx, req) {
			return
		}
		if missing := missingHeader(req); missing != "" {
			if stx != nil {
				p.Respond(stx, req, 400, "Bad Request (no "+missing+")")
			}
			return
		}
		if stx != nil && !HasToTag(req) {
			// A new transaction that is not part of a dialog: admitted only while the node keeps up. Requests
			// that finish admitted work (in-dialog, ACK, CANCEL) and health probes are never shed. A phone's
			// (outside the trust domain) is also held to the node's configured rate (overload.max_rate).
			admit := p.EP.Overload.Admit
			if !p.Trust.RoleOf(req.Source()).InTrustDomain() {
				admit = p.EP.Overload.AdmitAccess
			}
			ok, retryAfter := admit()
			if !ok {
				p.Respond(stx, req, 503, "Service Unavailable (overload)",
					sip.NewHeader("Retry-After", strconv.Itoa(overload.RetryAfterSeconds(retryAfter))))
				return
			}
			defer p.EP.Overload.Done()
			if req.IsInvite() && (p.TryingAtOnce || p.TryingFromBAC && p.Trust.RoleOf(req.Source()) == RoleBAC) {
				if err := stx.Respond(sip.NewResponseFromRequest(req, 100, "Trying", nil)); err != nil {
					p.Log.Debug("100 Trying not sent", "call_id", CallID(req), "err", err)
				}
			}
		}
		ctx, cancel := context.WithCancel(p.baseContext())
		defer cancel()
		r := &Request{Ctx: ctx, Req: req, Tx: stx, Role: p.Trust.RoleOf(req.Source())}
		r.Out = req.Clone()
		if !r.Role.InTrustDomain() {
			marked := p.sanitize(r)
			if marked {
				if stx != nil {
					p.Refuse(r, "marker_from_untrusted")
				} else {
					p.RefuseAck(r, "marker_from_untrusted")
				}
				return
			}
		}
		r.Top, r.Popped = p.PopSelf(r.Out)
		h(r)
	}
}

// sanitize removes from a request of a sender outside the trust domain what only the trust domain may assert:
// P-Asserted-Identity, P-Preferred-Identity (except from the BAC: the P-CSCF checks it), and orig / restore on
// every Route entry. It reports whether this node's own Route entry carried orig or restore (such a request is
// refused, SPEC §4).
func (p *Proxy) sanitize(r *Request) (marked bool) {
	out := r.Out
	RemoveHeaders(out, HdrPAssertedIdentity)
	if r.Role != RoleBAC {
		RemoveHeaders(out, HdrPPreferredIdentity)
	}
	routes := Routes(out)
	if len(routes) == 0 {
		return false
	}
	RemoveHeaders(out, "Route")
	for i := len(routes) - 1; i >= 0; i-- {
		u := routes[i]
		if i == 0 && p.IsSelf(u) && (u.User == "orig" || HasParam(u, ParamOrig) || HasParam(u, ParamRestore)) {
			marked = true
		}
		if u.UriParams != nil {
			u.UriParams = u.UriParams.Clone()
			u.UriParams.Remove(ParamOrig)
			u.UriParams.Remove(ParamRestore)
		}
		PrependRoute(out, u)
	}
	return marked
}

// missingHeader names a header RFC 3261 §8.1.1 requires of every request that the request lacks, "" when none.
func missingHeader(req *sip.Request) string {
	switch {
	case req.From() == nil:
		return "From"
	case req.To() == nil:
		return "To"
	case req.CallID() == nil:
		return "Call-ID"
	case req.CSeq() == nil:
		return "CSeq"
	case req.Via() == nil:
		return "Via"
	}
	return ""
}
