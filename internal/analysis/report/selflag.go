package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// SelfLag is one node's self_lag events: its own timers ran more than half the probe timeout late (the node was
// starved of CPU; docs/sip-core.md, "Failure detection and retries"), at most one event a second.
type SelfLag struct {
	Events   int     `json:"events"`
	MaxLagMs float64 `json:"max_lag_ms"`
	FirstS   float64 `json:"first_s"`
	LastS    float64 `json:"last_s"`
}

// selfLag fills Summary.SelfLag and, when a node ran late, a warning: the timings of those moments include the
// wait for the CPU, whatever the scenario meant to measure.
func (a *analysis) selfLag(r *run) {
	m := map[string]*SelfLag{}
	for _, e := range r.events {
		x, ok := e.Data.(obs.SelfLag)
		if !ok {
			continue
		}
		at := a.offset(e.TNs)
		n := m[e.Node]
		if n == nil {
			n = &SelfLag{FirstS: at, LastS: at}
			m[e.Node] = n
		}
		n.Events++
		n.MaxLagMs = max(n.MaxLagMs, float64(x.LagMs))
		n.FirstS, n.LastS = math.Min(n.FirstS, at), math.Max(n.LastS, at)
	}
	if len(m) == 0 {
		return
	}
	a.s.SelfLag = m
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		l := m[n]
		parts = append(parts, fmt.Sprintf("%s up to %.0f ms (%d s with late timers, %.1f–%.1f s)", n, l.MaxLagMs,
			l.Events, l.FirstS, l.LastS))
	}
	a.s.Warnings = append(a.s.Warnings, "nodes ran late, starved of CPU (self_lag events): "+strings.Join(parts, "; ")+
		". What the run measured at those moments includes the wait for the CPU: a fault that starves a node on "+
		"purpose (slow) does this; otherwise the machine was too busy for the lab")
}
