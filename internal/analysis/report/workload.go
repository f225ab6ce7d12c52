package report

import (
	"fmt"
	"math"
	"sort"
)

// workload fills the KPIs of the workload after the first fault: the post-dial delay of calls to or from
// affected users, the calls the fault cut, and the probes' share of the signalling. Runs without a fault get
// none of them.
func (a *analysis) workload(r *run, msgs []msg) {
	if a.firstT0 == 0 {
		return
	}
	a.s.PostDialDelay = a.postDialDelay(r)
	a.s.CallsCut = a.callsCut(r)
	a.s.ProbeLoad = a.probeLoad(r, msgs)
	if pl := a.s.ProbeLoad; pl != nil && pl.Share > ProbeShareLimit {
		a.s.Warnings = append(a.s.Warnings, fmt.Sprintf("the reachability probes were %.1f %% of the phones' "+
			"signalling after the fault (%d of %d %s), above %.0f %%: the probes load the network they measure; "+
			"probe a sample (traffic.reachability.sample) or less often", 100*pl.Share, pl.Probe, pl.Total,
			pl.CountedIn, 100*ProbeShareLimit))
	}
}

// MaxDistValues caps the values a Distribution keeps (evenly thinned beyond it).
const MaxDistValues = 5000

// Distribution is a sample summarised by its quantiles (nearest rank), with the values themselves, sorted, for
// an ECDF: all of them up to MaxDistValues, beyond that MaxDistValues evenly spaced ranks from the first to the
// last (Thinned), which keep every quantile to within 1/MaxDistValues.
type Distribution struct {
	Count   int       `json:"count"`
	Mean    float64   `json:"mean"`
	Min     float64   `json:"min"`
	P50     float64   `json:"p50"`
	P90     float64   `json:"p90"`
	P95     float64   `json:"p95"`
	P99     float64   `json:"p99"`
	Max     float64   `json:"max"`
	Values  []float64 `json:"values"`
	Thinned bool      `json:"thinned,omitempty"`
}

// distribution summarises xs (nil when empty).
func distribution(xs []float64) *Distribution {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	d := &Distribution{Count: len(s), Mean: round(sum / float64(len(s))), Min: round(s[0]),
		P50: round(percentile(s, 50)), P90: round(percentile(s, 90)), P95: round(percentile(s, 95)),
		P99: round(percentile(s, 99)), Max: round(s[len(s)-1])}
	d.Values = thin(s, MaxDistValues)
	d.Thinned = len(d.Values) < len(s)
	for i := range d.Values {
		d.Values[i] = round(d.Values[i])
	}
	return d
}

// thin returns at most k of sorted s: all of them, or k ranks evenly spaced from the first to the last.
func thin(s []float64, k int) []float64 {
	if len(s) <= k {
		return append([]float64(nil), s...)
	}
	out := make([]float64, k)
	for i := range k {
		out[i] = s[int(math.Round(float64(i)*float64(len(s)-1)/float64(k-1)))]
	}
	return out
}

// workloadRows are the report's rows for post_dial_delay, calls_cut and probe_load.
func workloadRows(s *Summary) []kpiRow {
	var rows []kpiRow
	if p := s.PostDialDelay; p != nil {
		d := func(x *Distribution) string {
			if x == nil {
				return "–"
			}
			return fmt.Sprintf("p50 %.1f ms, p95 %.1f ms, max %.1f ms (n=%d)", x.P50, x.P95, x.Max, x.Count)
		}
		rows = append(rows,
			kpiRow{"post-dial delay after the fault, INVITE → 180", d(p.Ringing) + fmt.Sprintf(" of %d calls to or from affected users", p.Calls)},
			kpiRow{"post-dial delay after the fault, INVITE → 200", d(p.Answer)})
	}
	if c := s.CallsCut; c != nil {
		v := fmt.Sprintf("%d cut, %d survived, %d unknown of %d calls up at the fault", c.Cut, c.Survived, c.Unknown, c.InProgress)
		if c.Share != nil {
			v += fmt.Sprintf(" (%s of those whose fate is known)", fmtRatio(c.Share))
		}
		if c.NoticedS != nil {
			v += fmt.Sprintf("; noticed %s", fmtPct(c.NoticedS))
		}
		if !c.SessionTimers {
			v += "; no session timers (traffic.session_expires), so a cut shows only at the BYE"
		}
		rows = append(rows, kpiRow{"calls cut in progress", v})
	}
	if pl := s.ProbeLoad; pl != nil {
		rows = append(rows, kpiRow{"probe share of the signalling after the fault", fmt.Sprintf("%.1f %% (%d of %d %s)",
			100*pl.Share, pl.Probe, pl.Total, pl.CountedIn)})
	}
	return rows
}
