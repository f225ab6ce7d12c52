package study

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
)

// isShare tells whether a KPI is a proportion, whose interval is Clopper–Pearson (stats.Share) rather than a t:
// every KPI in the unit "share" but pool_cpu_extra_share, a relative difference that can be negative.
func isShare(name, unit string) bool { return unit == "share" && name != "pool_cpu_extra_share" }

// shareUsers returns the users behind a run's value of a restoration share (the probed users of the curve it is
// read from), which are then the trials of its interval over Korn–Graubard's effective n; false for a share
// whose trials are the runs (the per-fault shares, the takeover and call shares).
func shareUsers(name string, s *report.Summary) (float64, bool) {
	if s.Survival == nil || strings.HasPrefix(name, "restored_at_end_fault") {
		return 0, false
	}
	switch {
	case name == "mt_restored_at_bound":
		return float64(s.Survival.MT.N), true
	case name == "mo_restored_at_bound":
		return float64(s.Survival.MO.N), true
	case strings.HasPrefix(name, "restored_at_"):
		return float64(s.Survival.Service.N), true
	}
	return 0, false
}

// summarise is the interval of one per-run KPI over the runs: a share's Clopper–Pearson on its users' effective n
// (or on the runs), any other mean's Student t.
func summarise(name, unit string, vals []float64, sums []*report.Summary, seed uint64) (stats.Summary, error) {
	if !isShare(name, unit) {
		return stats.PerRun(vals, seed)
	}
	var users []float64
	for i, s := range sums {
		u, ok := shareUsers(name, s)
		if !ok {
			users = nil
			break
		}
		if math.IsNaN(vals[i]) {
			u = math.NaN()
		}
		users = append(users, u)
	}
	return stats.Share(vals, users, seed)
}

// ciText says in study.md and results.md how each interval is made.
const ciText = "The interval of a mean is Student's t over the runs, of a per-user mean the cluster-robust t with the runs as clusters (the users of one run are not independent), of a share Clopper–Pearson on an effective n (a restoration share's probed users over the design effect between runs, other shares' runs), of a median a percentile bootstrap over runs (docs/compare.md, \"Repetitions\"); with one run there is none."

// healthMarkdown says which runs were left out as invalid by their health record, set aside and run again, or
// aggregated without one.
func healthMarkdown(b *bytes.Buffer, r *Result) {
	var invalid, aside, unknown []string
	for _, e := range r.Experiments {
		for _, v := range e.Variants {
			invalid = append(invalid, v.InvalidRuns...)
			aside = append(aside, v.SetAside...)
			unknown = append(unknown, v.HealthUnknown...)
		}
	}
	if len(invalid)+len(aside)+len(unknown) == 0 {
		if r.RunsDone > 0 {
			b.WriteString("Run health: every run is valid by its own health record (docs/report.md, \"Run health\").\n\n")
		}
		return
	}
	if len(invalid) > 0 {
		fmt.Fprintf(b, "Run health: **%d invalid runs left out** of the aggregate (docs/report.md, \"Run health\"): %s.\n\n",
			len(invalid), strings.Join(invalid, "; "))
	}
	if len(aside) > 0 {
		fmt.Fprintf(b, "Run health: %d invalid runs set aside and their seeds run again: %s.\n\n", len(aside),
			listRuns(aside))
	}
	if len(unknown) > 0 {
		fmt.Fprintf(b, "Run health unknown for %d runs (made before runs recorded their health; nothing shows the "+
			"machine was quiet): %s.\n\n", len(unknown), listRuns(unknown))
	}
}
