package study

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
)

// bandGrid is the number of instants the bootstrap band of a restoration curve is evaluated at (log-spaced over
// the time axis).
const bandGrid = 400

// restoreCurve is one scheme's pooled restoration curve, as the restoration figure draws it.
type restoreCurve struct {
	d  *schemeData
	km report.KMCurve
	// maxT is the end of the scheme's longest observation: its curve stops there.
	maxT, lastEv float64
	// lo, hi: the band on the grid (nil with one run).
	lo, hi []float64
	// setup is the pooled curve of the setup's start (nil without it).
	setup *report.KMCurve
	// bound is the mean of the runs' own bounds (0 without any).
	bound float64
}

func pooled(runs []userTimes) (report.KMCurve, float64, float64) {
	var t []float64
	var ev []bool
	maxT, lastEv := 0.0, 0.0
	for _, u := range runs {
		t, ev = append(t, u.t...), append(ev, u.restored...)
	}
	for i, x := range t {
		maxT = max(maxT, x)
		if ev[i] {
			lastEv = max(lastEv, x)
		}
	}
	return report.KaplanMeier(t, ev), maxT, lastEv
}

// logGrid is n instants evenly spaced on a log scale from lo to hi.
func logGrid(lo, hi float64, n int) []float64 {
	g := make([]float64, n)
	for i := range g {
		g[i] = lo * math.Pow(hi/lo, float64(i)/float64(n-1))
	}
	return g
}

// kmLine is a Kaplan–Meier curve's steps from its first point to end.
func kmLine(c *report.KMCurve, end float64) plotter.XYs {
	var line plotter.XYs
	for i, pt := range c.Points {
		if pt.TS > end {
			break
		}
		next := end
		if i+1 < len(c.Points) {
			next = min(c.Points[i+1].TS, end)
		}
		line = append(line, plotter.XY{X: pt.TS, Y: pt.Restored}, plotter.XY{X: next, Y: pt.Restored})
	}
	return line
}

// gridSteps are the steps of values v on grid g, up to end.
func gridSteps(g, v []float64, end float64) plotter.XYs {
	var out plotter.XYs
	for i := range g {
		if g[i] > end {
			break
		}
		next := end
		if i+1 < len(g) {
			next = min(g[i+1], end)
		}
		out = append(out, plotter.XY{X: g[i], Y: v[i]}, plotter.XY{X: next, Y: v[i]})
	}
	return out
}

// restoreFigure: the share of affected users whose service (MT and MO) is restored, timed at the answer, vs the
// time since the fault on a log axis (10 ms to 30 s, so the first seconds show), one pooled Kaplan–Meier curve per
// scheme (every user of every run) with a 95 % band from a bootstrap over runs (the users of one run share its fault
// instant and load, so runs, not users, are resampled; pointwise percentile band on a grid of instants). Each
// scheme's own bound (the mean over its runs of the last node's detection plus one probe interval) is a vertical
// line in its colour; where the summaries have it, the setup-started curve (the probe's start) is dashed.
func restoreFigure(er *ExperimentResult, data []*schemeData, seed uint64) (figure.Builder, Figure, error) {
	var cs []restoreCurve
	end := figure.LogTimeMax
	for _, d := range data {
		if len(d.runs) == 0 {
			continue
		}
		c := restoreCurve{d: d}
		c.km, c.maxT, c.lastEv = pooled(d.runs)
		if len(d.setup) > 0 {
			s, _, _ := pooled(d.setup)
			c.setup = &s
		}
		for _, b := range d.boundS {
			c.bound += b / float64(len(d.boundS))
		}
		end = max(end, min(c.maxT, 1.25*c.lastEv), 1.25*c.bound)
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return nil, Figure{}, nil
	}
	grid := logGrid(figure.LogTimeMin, end, bandGrid)
	for i := range cs {
		if len(cs[i].d.runs) >= 2 {
			cs[i].lo, cs[i].hi = curveBand(cs[i].d.runs, grid, seed)
		}
	}
	title := fmt.Sprintf("%s: affected users restored vs time since the fault (pooled Kaplan–Meier)", er.Name)
	build := func(f figure.Form) (*figure.Fig, error) {
		g := figure.NewFig(f, title, "time since the fault (s, log scale)", "share restored (MT and MO answered)")
		p := g.Plot
		figure.LogTime(p, end)
		p.Y.Min, p.Y.Max = 0, 1.02
		p.Y.Tick.Marker = figure.ShareTicks
		hasSetup, hasBound := false, false
		for _, c := range cs {
			col := c.d.colour
			stop := min(c.maxT, p.X.Max) // no data after the longest observation: the curve stops there
			var thumbs []plot.Thumbnailer
			band := ", 95 % band"
			if c.lo != nil {
				pg, err := figure.Band(p, figure.ClampX(gridSteps(grid, c.lo, stop), p.X.Min, p.X.Max),
					figure.ClampX(gridSteps(grid, c.hi, stop), p.X.Min, p.X.Max), col)
				if err != nil {
					return nil, fmt.Errorf("study: figure: %w", err)
				}
				thumbs = append(thumbs, pg)
			} else {
				band = ", no band (1 run)"
			}
			if c.setup != nil {
				l, err := plotter.NewLine(figure.ClampX(kmLine(c.setup, stop), p.X.Min, p.X.Max))
				if err != nil {
					return nil, fmt.Errorf("study: figure: %w", err)
				}
				l.Color, l.Width, l.Dashes = col, vg.Points(1), figure.CurveDash
				p.Add(l)
				hasSetup = true
			}
			l, err := plotter.NewLine(figure.ClampX(kmLine(&c.km, stop), p.X.Min, p.X.Max))
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			l.Color, l.Width = col, vg.Points(1.6)
			p.Add(l)
			thumbs = append(thumbs, l)
			label := fmt.Sprintf("%s: n = %d runs, %d users (%d censored)%s", c.d.name, len(c.d.runs), c.km.N,
				c.km.Censored, band)
			if f.Narrow() {
				label = fmt.Sprintf("%s (%d runs)", c.d.name, len(c.d.runs))
			}
			g.Add(label, thumbs...)
		}
		// The bounds over every curve, so that none hides one; every other one's dots shifted by half a period,
		// so that two schemes with the same bound show both colours.
		for i, c := range cs {
			if c.bound > 0 {
				l, err := figure.VLine(p, c.bound, 0, 1.02, c.d.colour, vg.Points(1.3), figure.BoundDash)
				if err != nil {
					return nil, err
				}
				l.DashOffs = vg.Length(i%2) * (figure.BoundDash[0] + figure.BoundDash[1]) / 2
				hasBound = true
			}
		}
		if hasSetup {
			g.Add("setup started (probe placed)", figure.LineThumb(figure.Dark, vg.Points(1), figure.CurveDash))
		}
		if hasBound {
			label := "each scheme's bound: last detection + one probe interval (mean of its runs)"
			if f.Narrow() {
				label = "bound (last detection + probe interval)"
			}
			g.Add(label, figure.VLineThumb(figure.Dark, vg.Points(1.3), figure.BoundDash))
		}
		return g, nil
	}
	var notes, legacy, bounds []string
	for _, c := range cs {
		if k := c.d.sources[srcCurve]; k > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d of %d runs", c.d.name, k, len(c.d.runs)))
		}
		if c.d.legacy > 0 {
			legacy = append(legacy, fmt.Sprintf("%s: %d of %d runs", c.d.name, c.d.legacy, len(c.d.runs)))
		}
		if c.bound > 0 {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, b := range c.d.boundS {
				lo, hi = min(lo, b), max(hi, b)
			}
			bounds = append(bounds, fmt.Sprintf("%s %.2f s (runs %.2f–%.2f s)", c.d.name, c.bound, lo, hi))
		}
	}
	caption := "Share of the affected users whose MT and MO service is restored — a call to the user, and for a " +
		"caller a call from it, answered (the 200 of its first successful reachability probes; MT alone for users " +
		"that place no calls) — against the time since the fault, on a log axis so that the first seconds show. " +
		"One Kaplan–Meier curve per scheme over the users of all its runs pooled; a curve stops at the end of its " +
		"longest observation, and users not restored by the end of their run are censored there. The band is a " +
		"pointwise 95 % percentile bootstrap over runs (whole runs resampled, " + fmt.Sprint(stats.Resamples) +
		" resamples): the users of one run are not independent. "
	if len(bounds) > 0 {
		caption += "Dotted vertical lines: each scheme's own bound, the last node's detection plus one probe " +
			"interval, averaged over its runs (" + strings.Join(bounds, "; ") + "). "
	}
	if hasSetupCurve(cs) {
		caption += "Dashed: the same users' setup started (the probe placed), which counts a user as soon as the " +
			"call that will succeed is started; the gap to the solid curve is the setup delay through the failover. "
	}
	if len(legacy) > 0 {
		caption += "Some summaries predate restoration timed at the answer (" + strings.Join(legacy, "; ") +
			"; survival.legacy): converted when read, their answered curve (service_answered) is drawn and their " +
			"probe-start curve is the setup started. "
	}
	if len(notes) > 0 {
		caption += "Per-user times were not in the summary.json of some runs (" + strings.Join(notes, "; ") +
			"): their users were reconstructed from the run's own Kaplan–Meier curve (survival.service points), " +
			"which gives the same restoration times and the censored users between them (censored at the " +
			"preceding restoration time)."
	} else {
		caption += "Per-user restoration times from each run's summary.json (users[].restore_s, as in users.csv)."
	}
	return build, Figure{Kind: "restore", SVG: er.Name + "-restore", Title: "Restoration curves", Caption: caption}, nil
}

func hasSetupCurve(cs []restoreCurve) bool {
	for _, c := range cs {
		if c.setup != nil {
			return true
		}
	}
	return false
}

// curveBand bootstraps the pooled Kaplan–Meier curve over runs and returns its 2.5 and 97.5 percentiles at each
// instant of grid.
func curveBand(runs []userTimes, grid []float64, seed uint64) (lo, hi []float64) {
	vals := make([][]float64, len(grid))
	for i := range vals {
		vals[i] = make([]float64, 0, stats.Resamples)
	}
	var t []float64
	var ev []bool
	stats.Resample(len(runs), seed, stats.Resamples, func(idx []int) {
		t, ev = t[:0], ev[:0]
		for _, i := range idx {
			t, ev = append(t, runs[i].t...), append(ev, runs[i].restored...)
		}
		km := report.KaplanMeier(t, ev)
		k, v := 0, 0.0
		for g, x := range grid {
			for k < len(km.Points) && km.Points[k].TS <= x {
				v = km.Points[k].Restored
				k++
			}
			vals[g] = append(vals[g], v)
		}
	})
	lo, hi = make([]float64, len(grid)), make([]float64, len(grid))
	for g := range grid {
		b := stats.PercentileBand(vals[g])
		lo[g], hi[g] = b.Low, b.High
	}
	return lo, hi
}
