package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// UDPDrops is one node's udp_drops events: datagrams the kernel dropped on arrival at its SIP socket because the
// socket's receive buffer was full (nfrun.ReportDrops; the phones' socket under node "ue"), at most one event a
// second.
type UDPDrops struct {
	Drops  int     `json:"drops"`
	FirstS float64 `json:"first_s"`
	LastS  float64 `json:"last_s"`
}

// udpDrops fills Summary.UDPDrops and, when the host dropped datagrams, a warning: each was a SIP message lost
// before the node read it, recovered by a retransmission 0.5 s or more later, so the timings around it include
// the host's loss, not the design's.
func (a *analysis) udpDrops(r *run) {
	m := map[string]*UDPDrops{}
	for _, e := range r.events {
		x, ok := e.Data.(obs.UDPDrops)
		if !ok || x.Drops == 0 {
			continue
		}
		at := a.offset(e.TNs)
		n := m[e.Node]
		if n == nil {
			n = &UDPDrops{FirstS: at, LastS: at}
			m[e.Node] = n
		}
		n.Drops += int(x.Drops)
		n.FirstS, n.LastS = math.Min(n.FirstS, at), math.Max(n.LastS, at)
	}
	if len(m) == 0 {
		return
	}
	a.s.UDPDrops = m
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		d := m[n]
		parts = append(parts, fmt.Sprintf("%s %d (%.1f–%.1f s)", n, d.Drops, d.FirstS, d.LastS))
	}
	a.s.Warnings = append(a.s.Warnings, "the host dropped datagrams at full socket receive buffers (udp_drops "+
		"events): "+strings.Join(parts, "; ")+". Each was a SIP message lost on this machine and recovered, if at "+
		"all, by a retransmission 0.5 s or more later: the timings around them include that loss. The nodes ask "+
		"for a 4 MiB buffer, beyond net.core.rmem_max only as root (docs/sip-core.md, \"Socket buffers\")")
}
