package icscf

import (
	"context"
	"time"

	"github.com/imslab/quasipool/internal/cx"
	"github.com/imslab/quasipool/internal/sipx"
)

// onRequest: LIR and the serving S-CSCF for terminating requests (SPEC §3.2, §4.6), and the takeover of
// originating requests a backup P-CSCF marked with orig;restore=1 (SPEC §4.1, §4.5).
//
// The prelude (sipx.Proxy) has already refused orig and restore=1 from outside the trust domain and removed
// P-Asserted-Identity from such senders; restore=1 is honoured from a P-CSCF only.
func (n *Node) onRequest(r *sipx.Request) {
	ctx, req, stx, out := r.Ctx, r.Req, r.Tx, r.Out
	if r.InDialog() {
		n.px.InDialog(r)
		return
	}
	orig, restore := r.Orig(), r.Restore()
	if restore && r.Role != sipx.RolePCSCF {
		n.px.Refuse(r, "restore_not_from_pcscf")
		return
	}
	if restore && !*n.cfg.AcceptRestore {
		n.px.Respond(stx, req, 403, "Forbidden (no restoration)")
		return
	}
	impu := sipx.AOR(req.Recipient)
	if orig {
		if impu = r.Identity(); impu == "" {
			n.px.Refuse(r, "no_asserted_identity")
			return
		}
	}
	lir := func(uat2 bool) (*cx.LIA, error) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		q := &cx.LIR{PublicIdentity: impu, Originating: orig}
		if uat2 {
			t := cx.UATRegistrationAndCapabilities
			q.AuthorizationType = &t
		}
		return n.hss.LocationInfo(cctx, q)
	}
	// A request marked for restoration asks for the name and the capabilities at once.
	lia, err := lir(restore)
	if err != nil {
		n.answerCx(stx, req, "LIR", err)
		return
	}
	var flags []string
	if orig {
		flags = append(flags, sipx.ParamOrig)
	}
	if restore {
		flags = append(flags, sipx.ParamRestore+"=1")
	}
	tried := map[string]bool{}
	var order []string
	stored := ""
	if lia.ServerName != "" {
		stored = hostOf(lia.ServerName)
		order = append(order, stored)
	}
	askedCaps := restore
	if lia.ServerName == "" || (restore && *n.cfg.Restore) {
		order = append(order, n.candidates(ctx, lia.ServerCapabilities, tried, impu, stored)...)
	}
	var last sipx.Outcome
	for {
		if len(order) == 0 {
			if askedCaps || !*n.cfg.Restore {
				break
			}
			askedCaps = true
			caps, err := lir(true)
			if err != nil {
				n.answerCx(stx, req, "LIR", err)
				return
			}
			n.rec.Emit("reselect", map[string]any{"impu": impu, "cmd": "LIR", "uat": 2, "tried": keys(tried), "call_id": sipx.CallID(req)})
			order = n.candidates(ctx, caps.ServerCapabilities, tried, impu, firstTried(stored, tried))
			if !hasParam(flags, sipx.ParamRestore+"=1") {
				flags = append(flags, sipx.ParamRestore+"=1") // tell the new S-CSCF it is taking over
			}
			continue
		}
		host := order[0]
		order = order[1:]
		if tried[host] {
			continue
		}
		tried[host] = true
		last = n.toSCSCF(ctx, stx, out, host, append([]string{}, flags...), n.cfg.SCSCFFailover)
		if !last.Retryable() {
			n.px.Finish(stx, req, last)
			return
		}
	}
	if last.Final != nil && (!sipx.Retryable(last.Final.StatusCode) || sipx.IsRestoration(last.Final)) {
		n.px.Finish(stx, req, last)
		return
	}
	n.px.Respond(stx, req, 504, "Server Time-out (no S-CSCF reachable)")
}

func hasParam(list []string, p string) bool {
	for _, x := range list {
		if x == p {
			return true
		}
	}
	return false
}
