package scscf

import (
	"context"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/nf/cxsip"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/restore"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// onRequest routes every request but REGISTER, ACK and OPTIONS: in-dialog requests by their Route set, initial
// requests by originating (Route carries orig) or terminating procedures.
//
// Initial requests come from the trust domain only (a P-CSCF by Service-Route, the I-CSCF): the S-CSCF serves
// and restores users on behalf of the node that asserted their identity, never on a stranger's word. In-dialog
// requests are relayed only along our own Record-Route (our Route entry popped) or from the trust domain.
func (n *Node) onRequest(r *sipx.Request) {
	if r.InDialog() {
		n.px.InDialog(r)
		return
	}
	if !r.Role.InTrustDomain() {
		n.px.Refuse(r, "initial_request_from_untrusted")
		return
	}
	if r.Orig() {
		n.originating(r.Ctx, r, r.Req, r.Out, r.Restore())
	} else {
		n.terminating(r.Ctx, r, r.Req, r.Out, r.Restore())
	}
}

func (n *Node) recordRoute(out *sip.Request) {
	out.PrependHeader(&sip.RecordRouteHeader{Address: sipx.RouteURI("", n.cfg.Host)})
}

// originating serves a request from a registered user (TS 24.229 §5.4.3.2): identity from P-Asserted-Identity,
// no application servers in the lab, then on to the callee's home network (its I-CSCF). A user it does not hold is
// taken over as restore.Policy.SCSCFOriginating decides; marked is restore=1 on our Route entry.
func (n *Node) originating(ctx context.Context, r *sipx.Request, req, out *sip.Request, marked bool) {
	stx := r.Tx
	served := r.Identity()
	if served == "" {
		n.px.Refuse(r, "no_asserted_identity")
		return
	}
	b := n.lookup(served)
	if b == nil {
		d := n.policy.SCSCFOriginating(r.Role)
		if d.Verdict == restore.Reregister {
			// TS 24.229 §5.4.3.2 with restoration not supported: no registration here, the UE must register again.
			n.rec.Emit(obs.Refused{Direction: "mo", IMPU: served, CallID: sipx.CallID(req),
				Method: string(req.Method), Reason: "not_registered_here"})
			n.px.RespondRestoration(stx, req, d.Reason)
			return
		}
		if d.Verdict == restore.Refuse {
			n.px.Refuse(r, d.Reason)
			return
		}
		var err error
		if b, err = n.restore(ctx, served, "mo", marked); err != nil {
			// The HSS did not answer the SAR, or refused it: the one Cx → SIP mapping (cxsip.Status).
			code, reason := cxsip.Status(err)
			n.px.Respond(stx, req, code, reason)
			return
		}
		if b == nil {
			// The HSS holds no restoration data for the caller (registered nowhere, or by a member that stores
			// none): the takeover cannot be done, so the UE is asked to register again at once with the
			// restoration 504 (TS 24.229 §5.4.3.2, TS 23.380 §5.3) instead of waiting for its periodic refresh.
			n.rec.Emit(obs.Refused{Direction: "mo", IMPU: served, CallID: sipx.CallID(req),
				Method: string(req.Method), Reason: "no_restoration_data"})
			n.px.RespondRestoration(stx, req, vocab.ReasonNoRestorationData)
			return
		}
	}
	n.recordRoute(out)
	hop := sipx.SRVHop(n.cfg.ICSCF)
	if out.Route() != nil {
		hop = sipx.NextHop(out)
	}
	n.px.Finish(stx, req, n.px.Fwd.Forward(ctx, stx, out, hop))
}

// terminating delivers a request to a registered user: Request-URI = the registered Contact, Route = the Path.
// The Path names a P-CSCF by host, so its per-host SRV record fails over to a surviving P-CSCF (SPEC §4.2). A
// callee it does not hold is taken over as restore.Policy.SCSCFTerminating decides; marked is restore=1.
func (n *Node) terminating(ctx context.Context, r *sipx.Request, req, out *sip.Request, marked bool) {
	stx := r.Tx
	callee := sipx.AOR(req.Recipient)
	b := n.lookup(callee)
	if b == nil {
		switch d := n.policy.SCSCFTerminating(r.Role); d.Verdict {
		case restore.Refuse:
			n.px.Refuse(r, d.Reason)
			return
		case restore.Take:
			b, _ = n.restore(ctx, callee, "mt", marked) // the callee cannot be reached either way: 480
		}
		if b == nil {
			n.px.Respond(stx, req, 480, "Temporarily Unavailable")
			return
		}
	}
	sipx.RemoveHeaders(out, "Route")
	for i := len(b.Path) - 1; i >= 0; i-- {
		if u, err := sipx.ParseNameAddr(b.Path[i]); err == nil {
			sipx.PrependRoute(out, u)
		}
	}
	out.Recipient = b.ContactU
	n.recordRoute(out)
	n.px.Finish(stx, req, n.px.Fwd.Forward(ctx, stx, out, sipx.NextHop(out)))
}

// restore takes over a user this S-CSCF does not know: SAR UNREGISTERED_USER makes the HSS record this S-CSCF
// and return the SCSCF-Restoration-Info the previous S-CSCF stored at registration (SPEC §4.5, §4.6). It returns
// nil and no error when there is nothing to take over (no restoration data, or data that cannot be used), and the
// SAR's error when the HSS did not answer or refused it.
func (n *Node) restore(ctx context.Context, impu, direction string, marked bool) (*binding, error) {
	if impu == "" || !n.policy.Restore {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := n.now()
	saa, err := n.hss.ServerAssignment(cctx, &cx.SAR{PublicIdentities: []string{impu}, ServerName: n.cfg.ServerName(),
		AssignmentType: cx.SATUnregisteredUser})
	if err != nil {
		n.log.Info("restore: sar unregistered user", "impu", impu, "err", err)
		return nil, err
	}
	if len(saa.Restoration) == 0 || len(saa.Restoration[0].Registrations) == 0 {
		return nil, nil // not registered anywhere, or by a member that stores no restoration data
	}
	r := saa.Restoration[0]
	ri := r.Registrations[0]
	cu, err := sipx.ParseNameAddr(ri.Contact)
	if err != nil {
		n.log.Warn("restore: stored contact", "impu", impu, "contact", ri.Contact, "err", err)
		return nil, nil
	}
	exp := r.RegistrationTimeOut
	if exp.IsZero() {
		exp = n.now().Add(n.cfg.Expires.Default)
	}
	if n.now().After(exp) {
		return nil, nil
	}
	b := &binding{IMPI: r.UserName, IMPUs: []string{impu}, Contact: ri.Contact, ContactU: cu, Path: sipx.SplitList(ri.Path),
		CallID: ri.CallID, CSeq: ri.InitialCSeq, Expires: exp, Restored: true}
	if ids := publicIdentities(saa.UserData); len(ids) > 0 {
		b.IMPUs = ids
		if !contains(ids, impu) {
			b.IMPUs = append([]string{impu}, ids...)
		}
	}
	n.store(b)
	n.rec.Emit(obs.Takeover{IMPU: impu, IMPI: b.IMPI, Direction: direction, RestoreMarker: marked,
		Path: ri.Path, LatencyUs: n.now().Sub(start).Microseconds()})
	n.log.Info("user taken over from the HSS restoration info", "impu", impu, "impi", b.IMPI, "direction", direction)
	return b, nil
}
