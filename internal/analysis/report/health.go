package report

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Run health thresholds: a run is valid for timing only when no node stalled longer than MaxStallMs (its own
// timers ran that late, lag_stats), the machine's runnable load (the median of its 1-minute load average over
// the run) stayed within its CPUs, and no other lab ran beside it (docs/report.md, "Run health").
const MaxStallMs = 100

// Health is the run's own record of the machine it ran on: whether its timings measure the design or the
// machine.
type Health struct {
	// Valid is false when any of Reasons holds; a run without samples (an older run, or a backend without
	// them) is not valid either: nothing proves it was quiet.
	Valid   bool     `json:"valid"`
	Reasons []string `json:"reasons,omitempty"`
	// NodeStallMs is each node's worst scheduling stall (the worst lateness of its own timers, lag_stats) over
	// the run; nodes a fault starved on purpose (pause, slow) are left out and listed in Excused.
	NodeStallMs map[string]float64 `json:"node_stall_ms,omitempty"`
	Excused     []string           `json:"excused,omitempty"`
	// MaxStallMs and MaxStallNode: the worst of NodeStallMs.
	MaxStallMs   float64 `json:"max_stall_ms"`
	MaxStallNode string  `json:"max_stall_node,omitempty"`
	// The machine (obs.Machine samples, once a second): CPUs, the 1-minute load average's median and maximum,
	// the median and maximum of the runnable threads, the largest share of CPU time stolen by a hypervisor, and
	// the median of other labs' node processes.
	Samples             int     `json:"samples"`
	CPUs                int     `json:"cpus,omitempty"`
	Load1Median         float64 `json:"load1_median"`
	Load1Max            float64 `json:"load1_max"`
	ProcsRunningMedian  float64 `json:"procs_running_median"`
	ProcsRunningMax     int     `json:"procs_running_max"`
	StealMax            float64 `json:"steal_max"`
	OtherLabProcsMedian float64 `json:"other_lab_procs_median"`
	// Overcommitted: the median of the runnable threads (one instant each second) exceeded the CPUs. Recorded,
	// not a reason: the reason is the load average's median above the CPUs, which smooths the phones' bursts
	// the once-a-second samples fall on (docs/report.md, "Run health").
	Overcommitted bool `json:"overcommitted,omitempty"`
}

// health fills Summary.Health from the nodes' lag_stats and the lab's machine samples.
func (a *analysis) health(r *run) {
	h := &Health{NodeStallMs: map[string]float64{}}
	excused := map[string]bool{}
	for _, e := range r.events {
		if f, ok := e.Data.(obs.Fault); ok && (f.Fault == "pause" || f.Fault == "stop" || f.Fault == "slow" || f.Mode == "pause") {
			excused[f.Target] = true
			for _, n := range f.Nodes {
				excused[n] = true
			}
		}
	}
	var load, running, others []float64
	for _, e := range r.events {
		switch ev := e.Data.(type) {
		case obs.LagStats:
			if excused[e.Node] {
				continue
			}
			h.NodeStallMs[e.Node] = max(h.NodeStallMs[e.Node], ev.MaxMs)
		case obs.Machine:
			h.Samples++
			h.CPUs = ev.CPUs
			load = append(load, ev.Load1)
			running = append(running, float64(ev.ProcsRunning))
			others = append(others, float64(ev.OtherLabs))
			h.Load1Max = max(h.Load1Max, ev.Load1)
			h.ProcsRunningMax = max(h.ProcsRunningMax, ev.ProcsRunning)
			h.StealMax = max(h.StealMax, ev.StealRatio)
		}
	}
	for n := range excused {
		h.Excused = append(h.Excused, n)
	}
	sort.Strings(h.Excused)
	h.Load1Median, h.ProcsRunningMedian, h.OtherLabProcsMedian = median(load), median(running), median(others)
	for _, n := range slices.Sorted(maps.Keys(h.NodeStallMs)) {
		if v := h.NodeStallMs[n]; v > h.MaxStallMs {
			h.MaxStallMs, h.MaxStallNode = v, n
		}
	}
	switch {
	case h.Samples == 0:
		h.Reasons = append(h.Reasons, "no machine samples: nothing shows the machine was quiet")
	default:
		// The machine's runnable load over the run, the 1-minute load average's median, above its CPUs: the
		// nodes queued for CPU, whether or not their own timers caught it in a 50 ms wake-up. The instant
		// count of runnable threads is recorded only: its once-a-second samples fall on the phones' bursts.
		h.Overcommitted = h.ProcsRunningMedian > float64(h.CPUs)
		if h.CPUs > 0 && h.Load1Median > float64(h.CPUs) {
			h.Reasons = append(h.Reasons, fmt.Sprintf("the machine's runnable load exceeded its CPUs (1-minute "+
				"load average median %.2f on %d CPUs)", h.Load1Median, h.CPUs))
		}
		if h.OtherLabProcsMedian > 0 {
			h.Reasons = append(h.Reasons, fmt.Sprintf("another lab ran beside this one (median %g node processes not this lab's)",
				h.OtherLabProcsMedian))
		}
	}
	if len(h.NodeStallMs) == 0 {
		h.Reasons = append(h.Reasons, "no node recorded its scheduling stalls (lag_stats)")
	} else if h.MaxStallMs > MaxStallMs {
		h.Reasons = append(h.Reasons, fmt.Sprintf("%s stalled %.0f ms (more than %d ms): starved of CPU",
			h.MaxStallNode, h.MaxStallMs, MaxStallMs))
	}
	h.Valid = len(h.Reasons) == 0
	a.s.Health = h
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Describe is the health in one line: valid or INVALID with the reasons, and the figures behind it.
func (h *Health) Describe() string {
	v := "valid for timing"
	if !h.Valid {
		v = "INVALID for timing: " + strings.Join(h.Reasons, "; ")
	}
	stall := "no stall recorded"
	if h.MaxStallNode != "" {
		stall = fmt.Sprintf("worst node stall %.0f ms (%s)", h.MaxStallMs, h.MaxStallNode)
	}
	over := ""
	if h.Overcommitted {
		over = ", more than the CPUs"
	}
	return fmt.Sprintf("%s (%s; load1 median %.2f, max %.2f on %d CPUs; runnable median %g%s; steal max %.1f %%; "+
		"%d machine samples)", v, stall, h.Load1Median, h.Load1Max, h.CPUs, h.ProcsRunningMedian, over, 100*h.StealMax, h.Samples)
}
