package icscf

import (
	"context"
	"slices"
	"time"

	"github.com/imslab/quasipool/internal/nf/cxsip"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/restore"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// cxTimeout bounds one UAR or LIR.
const cxTimeout = 3 * time.Second

// selection is one S-CSCF selection: the procedure is the same for REGISTER (UAR, SPEC §3.1, §4.4) and for the
// other requests (LIR, SPEC §3.2, §4.5, §4.6); the fields say where the two differ. When to ask with UAT 2 and how
// to reach the chosen S-CSCF is the takeover policy's (restore.Policy.LIRSelection, UARSelection).
type selection struct {
	restore.Selection

	cmd  string // "UAR" or "LIR": the reselect event, the logs and the Cx failure mapping
	impu string // the served identity: rendezvous ranking and the reselect event
	// query asks the HSS where impu is served; uat2 asks with User-Authorization-Type
	// REGISTRATION_AND_CAPABILITIES (the stored S-CSCF's name, if any, and the capabilities to choose another).
	query func(ctx context.Context, uat2 bool) (serverName string, caps *cx.ServerCapabilities, err error)
	// capsWithoutName: an answer that names no S-CSCF carries the capabilities (the UAA of an unassigned user), so
	// walking them is the re-selection; no UAT 2 query follows.
	capsWithoutName bool
	// route puts a Route entry for the chosen S-CSCF with flags in front of the request (LIR); REGISTER goes by its
	// Request-URI to the pinned S-CSCF without one.
	route bool
	flags []string
}

// selectAndForward is the S-CSCF selection of the I-CSCF, written once: ask the HSS, try the stored S-CSCF (and,
// for a takeover, the candidates from the capabilities after it), and when every one tried cannot be reached ask
// again with UAT 2 (a "reselect" event) and walk the candidates not yet tried. A final answer other than
// 408/503/504 ends the walk and is relayed; no S-CSCF left: the last answer when it is final and not retryable
// or a restoration answer, else 504. A failed Cx query is answered by cxFail.
func (n *Node) selectAndForward(r *sipx.Request, s selection) {
	name, caps, err := n.ask(r, s, s.UAT2AtOnce)
	if err != nil {
		n.cxFail(r, s.cmd, err)
		return
	}
	tried := map[string]bool{}
	stored := ""
	var order []string
	if name != "" {
		stored = hostOf(name)
		order = append(order, stored)
	}
	if name == "" || s.WalkAtOnce {
		order = append(order, n.candidates(r.Ctx, caps, tried, s.impu, stored)...)
	}
	askedCaps := s.UAT2AtOnce || (name == "" && s.capsWithoutName)
	flags := slices.Clone(s.flags)
	var last sipx.Outcome
	for {
		if len(order) == 0 {
			if askedCaps || !s.Reselect {
				break
			}
			askedCaps = true
			_, caps, err := n.ask(r, s, true)
			if err != nil {
				n.cxFail(r, s.cmd, err)
				return
			}
			n.rec.Emit(obs.Reselect{IMPU: s.impu, Cmd: s.cmd, UAT: 2, Tried: keys(tried),
				CallID: sipx.CallID(r.Req)})
			order = n.candidates(r.Ctx, caps, tried, s.impu, firstTried(stored, tried))
			if s.MarkRestore && !slices.Contains(flags, restore.Marker) {
				flags = append(flags, restore.Marker)
			}
			continue
		}
		host := order[0]
		order = order[1:]
		if tried[host] {
			continue
		}
		tried[host] = true
		var route []string
		if s.route {
			route = append([]string{}, flags...)
		}
		last = n.toSCSCF(r.Ctx, r.Tx, r.Out, host, route, s.Failover)
		if !last.Retryable() {
			n.px.Finish(r.Tx, r.Req, last)
			return
		}
	}
	if last.Final != nil && (!sipx.Retryable(last.Final.StatusCode) || vocab.IsRestoration(last.Final)) {
		n.px.Finish(r.Tx, r.Req, last)
		return
	}
	n.px.Respond(r.Tx, r.Req, 504, "Server Time-out (no S-CSCF reachable)")
}

// ask runs one query of a selection under cxTimeout.
func (n *Node) ask(r *sipx.Request, s selection, uat2 bool) (string, *cx.ServerCapabilities, error) {
	ctx, cancel := context.WithTimeout(r.Ctx, cxTimeout)
	defer cancel()
	return s.query(ctx, uat2)
}

// cxFail answers a request whose UAR or LIR failed, through the one Cx → SIP mapping (cxsip.Status): the HSS
// unreachable 504, user unknown 404; except that a REGISTER for an unknown user is answered 403 (TS 24.229
// §5.3.1.2).
func (n *Node) cxFail(r *sipx.Request, cmd string, err error) {
	code, reason := cxsip.Status(err)
	if res, ok := cx.ResultOf(err); ok && res == cx.ErrorUserUnknown && cmd == "UAR" {
		code, reason = 403, "Forbidden (unknown user)"
	}
	if code >= 500 {
		n.log.Warn("cx request failed", "cmd", cmd, "call_id", sipx.CallID(r.Req), "status", code, "err", err)
	}
	n.px.Respond(r.Tx, r.Req, code, reason)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
