package sipx

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/obs"
	"github.com/imslab/quasipool/internal/pool"
)

// Proxy is what every SIP network function of the testbed shares: an endpoint, a forwarder with health and the
// routing rules of a loose-routing stateful proxy (RFC 3261 §16) for requests that need no decision of the node
// itself (in-dialog requests, ACK for 2xx, OPTIONS).
type Proxy struct {
	EP     *Endpoint
	Fwd    *Forwarder
	Health *pool.Health
	Res    pool.Resolver
	Rec    *obs.Recorder
	Log    *slog.Logger
	// Self are the host names a Route entry may carry and still be ours: the node's own host and, for pool
	// members, the other members of its pool (a peer's per-host SRV record fails over to us).
	Self []string
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

// Finish relays a forward's final response upstream, or answers for a forward that got none.
func (p *Proxy) Finish(stx sip.ServerTransaction, req *sip.Request, out Outcome) {
	switch {
	case out.Cancelled:
		return // sipgo already answered 487 upstream
	case out.Final != nil:
		p.Fwd.Relay(stx, req, out.Final)
	case out.Err != nil && strings.Contains(out.Err.Error(), ErrNoTarget.Error()):
		p.Respond(stx, req, 503, "Service Unavailable")
	default:
		p.Respond(stx, req, 504, "Server Time-out")
	}
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
		if v, ok := h.(*sip.ViaHeader); ok && HostPort(v.Host, v.Port) == p.EP.Addr {
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

// InDialog loose-routes a request that belongs to a dialog (To tag present): pop our Route, send to the next hop.
func (p *Proxy) InDialog(ctx context.Context, req *sip.Request, stx sip.ServerTransaction) {
	if !p.CheckLoop(stx, req) {
		return
	}
	out := req.Clone()
	p.PopSelf(out)
	p.Finish(stx, req, p.Fwd.Forward(ctx, stx, out, NextHop(out)))
}

// Ack forwards an ACK (for a 2xx: its own transaction-less request) statelessly along its Route.
func (p *Proxy) Ack(ctx context.Context, req *sip.Request) {
	out := req.Clone()
	p.PopSelf(out)
	hop := NextHop(out)
	targets, err := p.Fwd.Targets(ctx, hop, nil)
	if err != nil || len(targets) == 0 {
		p.Log.Warn("ack: no target", "call_id", callID(req), "hop", hop.String(), "err", err)
		return
	}
	out.PrependHeader(p.EP.Via())
	if mf := out.MaxForwards(); mf != nil {
		mf.Dec()
	}
	p.EP.Bind(out)
	out.SetDestination(targets[0].Addr)
	if err := p.EP.Client.WriteRequest(out, noBuild); err != nil {
		p.Log.Warn("ack: send", "call_id", callID(req), "peer", targets[0].Name, "err", err)
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

// CallID returns the Call-ID of a message.
func CallID(m sip.Message) string { return callID(m) }

// Deps are the collaborators every SIP network function is built from.
type Deps struct {
	EP     *Endpoint
	Res    pool.Resolver
	Health *pool.Health
	Rec    *obs.Recorder
	Log    *slog.Logger
}

// NewProxy builds the shared proxy of a network function whose Route entries name one of self.
func NewProxy(d Deps, fwd ForwarderConfig, self ...string) *Proxy {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Proxy{EP: d.EP, Health: d.Health, Res: d.Res, Rec: d.Rec, Log: d.Log, Self: self,
		Fwd: NewForwarder(d.EP, d.Res, d.Health, fwd, d.Rec, d.Log, uint64(time.Now().UnixNano()))}
}

// Handlers are a network function's entry points; nil Ack and Options get the proxy's defaults.
type Handlers struct {
	Register sipgo.RequestHandler
	Request  sipgo.RequestHandler // every other method but ACK, CANCEL (sipgo answers it) and OPTIONS
	Ack      sipgo.RequestHandler
}

// Serve registers a network function's handlers on its endpoint.
func (p *Proxy) Serve(h Handlers) {
	srv := p.EP.Server
	if h.Ack == nil {
		h.Ack = func(req *sip.Request, _ sip.ServerTransaction) { p.Ack(context.Background(), req) }
	}
	srv.OnRegister(h.Register)
	for _, m := range []sip.RequestMethod{sip.INVITE, sip.BYE, sip.MESSAGE, sip.UPDATE, sip.INFO, sip.PRACK} {
		srv.OnRequest(m, h.Request)
	}
	srv.OnAck(h.Ack)
	srv.OnOptions(p.Options)
}
