package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Security is what the nodes refused during the run: the SIP nodes' "refused" events (a 403 to a sender that may
// not send that request: a phone asserting someone else's identity, a stranger sending orig or restore=1, an
// in-dialog request that is not ours) and the HSS's "cx_refused" events (a Diameter peer not on its allow-list,
// a command or Server-Name the peer may not use). docs/report.md, "Refused requests".
type Security struct {
	// RefusedTotal is the number of refusals, SIP and Cx together.
	RefusedTotal int `json:"refused_total"`
	// Refused counts them by node and reason ("security.refused.bac.not_registered"); a refusal without a reason
	// counts as "unspecified".
	Refused map[string]map[string]int `json:"refused"`
	// Refusals are the same counts with what was refused and from whom, one entry per node, event kind and reason,
	// ordered by node and reason.
	Refusals []RefusalGroup `json:"refusals"`
}

// RefusalGroup is every refusal of one node, event kind and reason.
type RefusalGroup struct {
	Node   string `json:"node"`
	Kind   string `json:"kind"` // "refused" (SIP) or "cx_refused" (Diameter, at the HSS)
	Reason string `json:"reason"`
	Count  int    `json:"count"`
	// Methods counts the SIP methods (or Cx commands; "CER" when the connection itself was refused).
	Methods map[string]int `json:"methods"`
	// Roles counts the senders' roles as the node saw them ("untrusted", "bac", …; absent for Cx).
	Roles map[string]int `json:"roles,omitempty"`
	// Peers are the distinct senders (SIP source address, or Diameter Origin-Host and remote address), sorted.
	Peers  []string `json:"peers"`
	FirstS float64  `json:"first_s"`
	LastS  float64  `json:"last_s"`
}

const unspecified = "unspecified"

// security counts refused and cx_refused events.
func (a *analysis) security(r *run) {
	type key struct{ node, kind, reason string }
	groups := map[key]*RefusalGroup{}
	peers := map[key]map[string]bool{}
	for _, e := range r.events {
		var reason, method, role, peer string
		switch x := e.Data.(type) {
		case obs.Refused:
			reason, method, role, peer = x.Reason, x.Method, x.Role, x.Peer
		case obs.CxRefused:
			reason, method, peer = x.Reason, x.Cmd, x.Peer
			if method == "" {
				method = "CER"
			}
			if x.Remote != "" {
				peer = strings.TrimSpace(peer + " " + x.Remote)
			}
		default:
			continue
		}
		node := e.Node
		if node == "" {
			node = "unknown"
		}
		if reason == "" {
			reason = unspecified
		}
		k := key{node, e.Kind, reason}
		g := groups[k]
		if g == nil {
			g = &RefusalGroup{Node: node, Kind: e.Kind, Reason: reason, Methods: map[string]int{},
				FirstS: a.offset(e.TNs)}
			groups[k] = g
			peers[k] = map[string]bool{}
		}
		g.Count++
		g.LastS = a.offset(e.TNs)
		if method == "" {
			method = unspecified
		}
		g.Methods[method]++
		if role != "" {
			if g.Roles == nil {
				g.Roles = map[string]int{}
			}
			g.Roles[role]++
		}
		if peer != "" {
			peers[k][peer] = true
		}
	}
	if len(groups) == 0 {
		return
	}
	sec := &Security{Refused: map[string]map[string]int{}, Refusals: []RefusalGroup{}}
	for k, g := range groups {
		for p := range peers[k] {
			g.Peers = append(g.Peers, p)
		}
		sort.Strings(g.Peers)
		if sec.Refused[g.Node] == nil {
			sec.Refused[g.Node] = map[string]int{}
		}
		sec.Refused[g.Node][g.Reason] += g.Count
		sec.RefusedTotal += g.Count
		sec.Refusals = append(sec.Refusals, *g)
	}
	sort.Slice(sec.Refusals, func(i, j int) bool {
		x, y := sec.Refusals[i], sec.Refusals[j]
		if x.Node != y.Node {
			return x.Node < y.Node
		}
		if x.Reason != y.Reason {
			return x.Reason < y.Reason
		}
		return x.Kind < y.Kind
	})
	a.s.Security = sec
}

// refusalRows are the lines of the "Refused requests" table: node, reason, what, from whom, how many, when.
func refusalRows(s *Summary) [][]string {
	if s.Security == nil {
		return nil
	}
	var rows [][]string
	for _, g := range s.Security.Refusals {
		from := fmtCounts(g.Roles)
		if g.Kind == "cx_refused" {
			from = "Diameter peer"
		}
		peers := g.Peers
		if len(peers) > 3 {
			peers = append(append([]string(nil), peers[:3]...), fmt.Sprintf("… %d more", len(g.Peers)-3))
		}
		if len(peers) > 0 {
			from += ": " + strings.Join(peers, ", ")
		}
		when := fmt.Sprintf("%.3f s", g.FirstS)
		if g.LastS != g.FirstS {
			when += fmt.Sprintf(" – %.3f s", g.LastS)
		}
		rows = append(rows, []string{g.Node, g.Reason, fmtCounts(g.Methods), from, fmt.Sprint(g.Count), when})
	}
	return rows
}

var refusalColumns = []string{"node", "reason", "requests", "from", "count", "when"}
