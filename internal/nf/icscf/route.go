package icscf

import (
	"context"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/restore"
)

// onRequest: LIR and the serving S-CSCF for terminating requests (SPEC §3.2, §4.6), and the takeover of
// originating requests a backup P-CSCF marked with orig;restore=1 (SPEC §4.1, §4.5).
//
// Trust (docs/sip-core.md): the prelude (sipx.Proxy) has already refused orig and restore=1 on our Route entry
// from outside the trust domain and removed P-Asserted-Identity from such senders. On top of it:
//   - restore=1 is honoured from a P-CSCF only (an S-CSCF or an I-CSCF never asks for it);
//   - the served identity of an originating request is its P-Asserted-Identity, never From or the Request-URI:
//     an orig request without one is refused before the HSS is asked;
//   - a terminating request from outside the trust domain is served (the I-CSCF is the home network's entry
//     point) with its identity headers removed;
//   - the I-CSCF never Record-Routes, so no dialog runs through it: an in-dialog request from outside the trust
//     domain is refused, whatever Route it carries (no open relay).
func (n *Node) onRequest(r *sipx.Request) {
	req := r.Req
	if r.InDialog() {
		if !r.Role.InTrustDomain() {
			n.px.Refuse(r, "in_dialog_from_untrusted")
			return
		}
		n.px.InDialog(r)
		return
	}
	orig, marked := r.Orig(), r.Restore()
	if marked {
		switch d := n.policy.ICSCFMarker(r.Role); d.Verdict {
		case restore.Refuse:
			n.px.Refuse(r, d.Reason)
			return
		case restore.NoRestoration:
			r.Reply(n.px, 403, "Forbidden (no restoration)")
			return
		}
	}
	if !r.Role.InTrustDomain() {
		// The prelude removed P-Asserted-Identity; P-Preferred-Identity from the BAC is for a P-CSCF to check,
		// never for an S-CSCF reached through the I-CSCF.
		sipx.RemoveHeaders(r.Out, sipx.HdrPPreferredIdentity)
	}
	impu := sipx.AOR(req.Recipient)
	if orig {
		if impu = r.Identity(); impu == "" {
			n.px.Refuse(r, "no_asserted_identity")
			return
		}
	}
	var flags []string
	if orig {
		flags = append(flags, sipx.ParamOrig)
	}
	if marked {
		flags = append(flags, restore.Marker)
	}
	n.selectAndForward(r, selection{
		// A request marked for restoration asks for the name and the capabilities at once.
		Selection: n.policy.LIRSelection(marked),
		cmd:       "LIR",
		impu:      impu,
		query: func(ctx context.Context, uat2 bool) (string, *cx.ServerCapabilities, error) {
			q := &cx.LIR{PublicIdentity: impu, Originating: orig}
			if uat2 {
				t := cx.UATRegistrationAndCapabilities
				q.AuthorizationType = &t
			}
			lia, err := n.hss.LocationInfo(ctx, q)
			if err != nil {
				return "", nil, err
			}
			return lia.ServerName, lia.ServerCapabilities, nil
		},
		route: true,
		flags: flags,
	})
}

// onAck relays an ACK for a 2xx only from the trust domain: the I-CSCF is in no dialog's route set, so an ACK
// from anyone else that names it in a Route is an attempt to use it as a relay, and is dropped.
func (n *Node) onAck(r *sipx.Request) {
	if !r.Role.InTrustDomain() {
		n.log.Info("ack dropped: not from the trust domain", "call_id", sipx.CallID(r.Req), "peer", r.Source())
		return
	}
	n.px.Ack(r)
}
