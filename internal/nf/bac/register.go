package bac

import (
	"net"
	"strconv"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// onRegister forwards a phone's REGISTER, by the pool record on a first registration and by the per-host record
// of the P-CSCF used afterwards. The phone's binding is not touched on the way: only a 200 installs or moves it
// (expires 0 removes it), so a REGISTER answered 401 — or never answered — changes nothing (attack 1).
func (n *Node) onRegister(s side, r *sipx.Request) {
	switch {
	case s == sideCore:
		n.refuse(r, "register_not_from_access")
		return
	case s == sideBoth && r.Role != sipx.RoleUntrusted:
		n.refuse(r, "register_from_core")
		return
	}
	req := r.Req
	to, contact := req.To(), req.Contact()
	if to == nil || contact == nil {
		r.Reply(n.core, 400, "Bad Request (To and Contact needed)")
		return
	}
	token := tokenFor(to.Address)
	if token == "" {
		r.Reply(n.core, 400, "Bad Request (no user)")
		return
	}
	if n.tab.full(token) {
		n.overloaded(r, token)
		return
	}
	prev, registered := n.tab.current(token, n.now())

	b := binding{Token: token, IMPU: sipx.AOR(to.Address), Source: r.Source(), Contact: *contact.Address.Clone()}
	b.Addr = b.Source
	if ip := net.ParseIP(contact.Address.Host); ip != nil && contact.Address.Port != 0 {
		// No NAT in the lab: a phone that names its address is reached there (SIPp registers from one
		// process and answers calls in another).
		b.Addr = sipx.HostPort(contact.Address.Host, contact.Address.Port)
	}

	out := r.Out
	sanitize(out)
	sipx.RemoveHeaders(out, "Route")
	n.replaceContact(out, token)
	hop := sipx.SRVHop(n.cfg.PCSCFPool)
	if registered && prev.PCSCF != "" {
		hop = sipx.SRVHop(prev.PCSCF)
	}
	phoneContact := b.Contact
	ct := newChainTimer()
	o := n.core.Fwd.Forward(r.Ctx, r.Tx, out, hop, sipx.WithResponseHook(func(res *sip.Response) {
		ct.seen(res)
		// The phone must see its own Contact in the answer.
		if c, ok := res.GetHeader("Contact").(*sip.ContactHeader); ok && c != nil {
			nc := &sip.ContactHeader{Address: *phoneContact.Clone(), Params: c.Params.Clone()}
			sipx.RemoveHeaders(res, "Contact")
			res.AppendHeader(nc)
		}
	}))
	ct.report(n.access.EP.Overload, o)
	if o.Final != nil && o.Final.StatusCode == 200 {
		if exp, _ := vocab.GrantedExpiry(o.Final, nil); exp > 0 {
			b.PCSCF = o.Target.Name
			b.Expires = n.now().Add(time.Duration(exp) * time.Second)
			if !n.tab.install(b) {
				n.overloaded(r, token) // the table filled up while this REGISTER was on its way
				return
			}
		} else {
			n.tab.remove(token)
		}
		if registered && prev.PCSCF != "" && o.Target.Name != prev.PCSCF {
			n.rec.Emit(obs.PCSCFChange{IMPU: b.IMPU, From: prev.PCSCF, To: o.Target.Name, Method: "REGISTER"})
		}
	}
	n.core.Finish(r.Tx, req, o)
}

// overloaded answers a registration beyond MaxPhones 503 with Retry-After and records it.
func (n *Node) overloaded(r *sipx.Request, token string) {
	n.rec.Emit(obs.Refused{Reason: "max_phones", Status: 503, Method: string(r.Req.Method),
		CallID: sipx.CallID(r.Req), Peer: r.Source(), Role: r.Role.String(), MaxPhones: n.cfg.MaxPhones})
	n.log.Warn("binding table full", "max_phones", n.cfg.MaxPhones, "peer", r.Source(), "call_id", sipx.CallID(r.Req))
	r.Reply(n.core, 503, "Service Unavailable (too many phones)", sip.NewHeader("Retry-After", strconv.Itoa(RetryAfter)))
}
