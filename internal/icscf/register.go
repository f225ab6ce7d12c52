package icscf

import (
	"context"
	"strings"
	"time"

	"github.com/icholy/digest"

	"github.com/imslab/quasipool/internal/cx"
	"github.com/imslab/quasipool/internal/sipx"
)

// onRegister: UAR, then the assigned S-CSCF, and when it cannot be reached UAR with UAT 2 and another S-CSCF
// (SPEC §3.1, §4.4). No S-CSCF left: 504.
// Registrations come through a P-CSCF: a REGISTER from anyone else is refused.
func (n *Node) onRegister(r *sipx.Request) {
	ctx, req, stx := r.Ctx, r.Req, r.Tx
	if r.Role != sipx.RolePCSCF {
		n.px.Refuse(r, "register_not_from_pcscf")
		return
	}
	to := req.To()
	if to == nil {
		n.px.Respond(stx, req, 400, "Bad Request")
		return
	}
	impu := sipx.AOR(to.Address)
	impi := strings.TrimPrefix(impu, "sip:")
	if a := sipx.FirstHeader(req, "Authorization"); a != "" {
		if c, err := digest.ParseCredentials(a); err == nil && c.Username != "" {
			impi = c.Username
		}
	}
	vni := sipx.FirstHeader(req, sipx.HdrPVisitedNetworkID)
	if vni == "" {
		vni = n.cfg.VisitedNetwork
	}
	uar := func(t cx.UserAuthorizationType) (*cx.UAA, error) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if exp := sipx.FirstHeader(req, "Expires"); strings.TrimSpace(exp) == "0" && t == cx.UATRegistration {
			t = cx.UATDeRegistration
		}
		return n.hss.UserAuthorization(cctx, &cx.UAR{UserName: impi, PublicIdentity: impu,
			VisitedNetworkIdentifier: strings.Trim(vni, `"`), AuthorizationType: t})
	}
	uaa, err := uar(cx.UATRegistration)
	if err != nil {
		if res, ok := cx.ResultOf(err); ok && res == cx.ErrorUserUnknown {
			n.px.Respond(stx, req, 403, "Forbidden (unknown user)") // TS 24.229 §5.3.1.2
			return
		}
		n.answerCx(stx, req, "UAR", err)
		return
	}
	out := r.Out
	tried := map[string]bool{}
	var order []string
	stored := ""
	if uaa.ServerName != "" {
		stored = hostOf(uaa.ServerName)
		order = []string{stored}
	} else {
		order = n.candidates(ctx, uaa.ServerCapabilities, tried, impu, "")
	}
	askedCaps := uaa.ServerName == ""
	var last sipx.Outcome
	for {
		if len(order) == 0 {
			if askedCaps {
				break // S-CSCF re-selection at registration is standard 3GPP (TS 24.229 §5.3.1.2): every scheme
			}
			askedCaps = true
			caps, err := uar(cx.UATRegistrationAndCapabilities)
			if err != nil {
				n.answerCx(stx, req, "UAR", err)
				return
			}
			n.rec.Emit("reselect", map[string]any{"impu": impu, "cmd": "UAR", "uat": 2, "tried": keys(tried), "call_id": sipx.CallID(req)})
			order = n.candidates(ctx, caps.ServerCapabilities, tried, impu, firstTried(stored, tried))
			continue
		}
		host := order[0]
		order = order[1:]
		if tried[host] {
			continue
		}
		tried[host] = true
		// No DNS failover for REGISTER, even with replication: the challenge and the answer must reach the same
		// S-CSCF, which the UAR UAT 2 re-selection (rendezvous-ranked) guarantees and a random SRV walk does not.
		last = n.toSCSCF(ctx, stx, out, host, nil, false)
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

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
