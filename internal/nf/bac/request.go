package bac

import (
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/overload"
)

// onRequest: requests towards phones only from a P-CSCF (and never on the access socket); everything else is a
// phone's request (attack 3).
func (n *Node) onRequest(s side, r *sipx.Request) {
	if s != sideAccess && r.Role == sipx.RolePCSCF {
		n.toPhone(r)
		return
	}
	if s == sideCore {
		n.refuse(r, "not_from_pcscf")
		return
	}
	n.fromPhone(r)
}

// fromPhone sends a phone's request to the P-CSCF it registered through, as the identity it registered from
// this source (attack 2); an in-dialog one along its route set.
func (n *Node) fromPhone(r *sipx.Request) {
	out := r.Out
	sanitize(out)
	if r.InDialog() {
		n.inDialogFromPhone(r, out)
		return
	}
	if n.isToken(out.Recipient) {
		// A new request straight to another phone would bypass the core.
		n.refuse(r, "to_phone_not_from_pcscf")
		return
	}
	b, k, ok := n.tab.originator(r.Source(), fromToken(r.Req), n.now())
	switch {
	case k == 0:
		n.refuse(r, "not_registered")
		return
	case !ok:
		n.refuse(r, "identity_not_registered_from_source")
		return
	}
	sipx.RemoveHeaders(out, "Route")
	out.AppendHeader(sip.NewHeader(sipx.HdrPPreferredIdentity, "<"+b.IMPU+">"))
	n.replaceContact(out, b.Token)
	ct := newChainTimer()
	o := n.core.Fwd.Forward(r.Ctx, r.Tx, out, sipx.SRVHop(b.PCSCF), sipx.WithResponseHook(ct.seen))
	ct.report(n.access.EP.Overload, o)
	if o.Target.Name != "" && o.Target.Name != b.PCSCF && o.Final != nil {
		n.rec.Emit(obs.PCSCFChange{IMPU: b.IMPU, From: b.PCSCF, To: o.Target.Name, Method: string(r.Req.Method)})
	}
	n.core.Finish(r.Tx, r.Req, o)
}

// inDialogFromPhone relays a phone's in-dialog request along a route set whose top Route is a P-CSCF, or
// delivers it to another phone behind this BAC; the BAC is no open relay.
func (n *Node) inDialogFromPhone(r *sipx.Request, out *sip.Request) {
	sender, isPhone := n.tab.phoneAt(r.Source(), fromToken(r.Req), n.now())
	if isPhone {
		n.replaceContact(out, sender.Token)
	}
	if top := out.Route(); top != nil {
		if !n.isPCSCFRoute(top.Address) {
			n.refuse(r, "route_not_pcscf")
			return
		}
		n.core.Finish(r.Tx, r.Req, n.core.Fwd.Forward(r.Ctx, r.Tx, out, sipx.NextHop(out)))
		return
	}
	if !isPhone || !n.isToken(out.Recipient) {
		n.refuse(r, "no_pcscf_route")
		return
	}
	n.deliver(r, out) // both phones behind this BAC and no route set
}

// toPhone delivers a request from a P-CSCF whose Request-URI is a phone token.
func (n *Node) toPhone(r *sipx.Request) {
	n.deliver(r, r.Out)
}

// deliver sends a request whose Request-URI is a phone token to the phone, with its own Contact as Request-URI,
// from the access side; the phone's answers carry its token instead of its address.
func (n *Node) deliver(r *sipx.Request, out *sip.Request) {
	if !n.isToken(out.Recipient) {
		r.Reply(n.core, 404, "Not Found")
		return
	}
	b, ok := n.tab.current(out.Recipient.User, n.now())
	if !ok {
		r.Reply(n.core, 404, "Not Found")
		return
	}
	out.Recipient = b.contact()
	sipx.RemoveHeaders(out, "Route")
	token := b.Token
	o := n.access.Fwd.Forward(r.Ctx, r.Tx, out, sipx.AddrHop(b.Addr), sipx.WithResponseHook(func(res *sip.Response) {
		n.replaceContact(res, token)
	}))
	n.access.Finish(r.Tx, r.Req, o)
}

// onAck forwards an ACK for a 2xx: from a P-CSCF to the phone, from a phone along a route set whose top Route is
// a P-CSCF (or to another phone here). Anything else is dropped and recorded.
func (n *Node) onAck(s side, r *sipx.Request) {
	out := r.Out
	if s != sideAccess && r.Role == sipx.RolePCSCF {
		n.ackToPhone(r, out)
		return
	}
	if s == sideCore {
		n.refuse(r, "not_from_pcscf")
		return
	}
	sanitize(out)
	if top := out.Route(); top != nil {
		if !n.isPCSCFRoute(top.Address) {
			n.refuse(r, "route_not_pcscf")
			return
		}
		n.core.SendAck(r.Ctx, out)
		return
	}
	if _, isPhone := n.tab.phoneAt(r.Source(), fromToken(r.Req), n.now()); !isPhone || !n.isToken(out.Recipient) {
		n.refuse(r, "no_pcscf_route")
		return
	}
	n.ackToPhone(r, out)
}

func (n *Node) ackToPhone(r *sipx.Request, out *sip.Request) {
	if !n.isToken(out.Recipient) {
		return
	}
	b, ok := n.tab.current(out.Recipient.User, n.now())
	if !ok {
		return
	}
	out.Recipient = b.contact()
	sipx.RemoveHeaders(out, "Route")
	sipx.PrependRoute(out, sip.Uri{Scheme: "sip", Host: hostOnly(b.Addr), Port: portOnly(b.Addr), UriParams: sip.HeaderParams{{K: "lr"}}})
	n.access.SendAck(r.Ctx, out)
}

// fromToken is the token of the From user: among the bindings of one source, it selects which one a request is
// sent as; it never makes a sender a phone.
func fromToken(req *sip.Request) string {
	if from := req.From(); from != nil {
		return tokenFor(from.Address)
	}
	return ""
}

// chainTimer times how long the core takes to answer a phone's new request: from forwarding it to the P-CSCF's
// first answer, for an INVITE the 100 Trying the P-CSCF sends at once (sipx.Proxy.TryingFromBAC), for a REGISTER
// its final answer: a registration storm loads the S-CSCFs and the HSS, not the P-CSCF, and a 100 Trying would
// not show it (docs/results/bench/overload-2026-12-01: 22 registrations/s at 1,000/s offered with it, 3d1ae3d/;
// 196 with the final, db954d4/; n = 1 each). The overload control refuses phones' new requests when these grow
// (overload.ObserveChain): the BAC is where the lab sheds before the core saturates. The 100 Trying measures
// the core's load without the wait of a takeover behind the P-CSCF.
type chainTimer struct {
	start time.Time
	first time.Duration // 0 until the first answer
}

func newChainTimer() *chainTimer { return &chainTimer{start: time.Now()} }

// seen is the forward's response hook (called on the forwarding goroutine, answer by answer).
func (t *chainTimer) seen(*sip.Response) {
	if t.first == 0 {
		t.first = max(time.Since(t.start), time.Nanosecond)
	}
}

// report feeds the answer time to the overload control when the first P-CSCF tried answered: a failover's wait
// for a dead member says nothing about load.
func (t *chainTimer) report(c *overload.Controller, o sipx.Outcome) {
	if t.first > 0 && o.Attempts == 1 {
		c.ObserveChain(t.first)
	}
}
