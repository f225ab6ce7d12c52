package study

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
)

// DirFigures holds the study's figures, in <out>/.
const DirFigures = "figures"

// Figure is one figure of an experiment, as an SVG and a PNG of the same drawing.
type Figure struct {
	// Kind is "restore" (restoration curves), "interruption_ecdf" or "kpi" (one KPI across the schemes).
	Kind string `json:"kind"`
	KPI  string `json:"kpi,omitempty"`
	// SVG and PNG are relative to the study's out directory.
	SVG     string `json:"svg"`
	PNG     string `json:"png"`
	Title   string `json:"title"`
	Caption string `json:"caption"`
}

// kpiFigures are the KPIs drawn as dot plots with their CIs across the schemes.
var kpiFigures = []string{"affected_users", "time_to_detect_s", "restored_at_bound", "pool_cpu_ms_per_sub_hour",
	"repl_bytes_per_sub_hour"}

// colourOf is scheme i's colour (in file order; figure.SchemeColour).
func colourOf(i int) color.RGBA { return figure.SchemeColour(i) }

// bandGrid is the number of instants the bootstrap band of a restoration curve is evaluated at.
const bandGrid = 400

// userTimes are the probed affected users of one run: the time from the fault to the restoration of their
// service (MT and MO), or to the end of the observation for a user not restored (censored).
type userTimes struct {
	t        []float64
	restored []bool
}

// Sources of a run's restoration times.
const (
	srcUsers = "users"  // summary.json users[].restore_s / censored (the values users.csv holds)
	srcCurve = "curve"  // reconstructed from summary.json survival.service (no per-user times in the summary)
	srcNone  = "absent" // no reachability probes in the run
)

// restoreTimes returns a run's per-user restoration times and where they came from. summary.json's users carry
// each probed user's restore_s (absent and censored when not restored), the same values as the run's users.csv;
// a censored user is censored at its own fault → end of the run. A summary without per-user times (written by an
// older imslab, or trimmed) still has the Kaplan–Meier curve, whose points (restorations and users at risk at each
// restoration time) give back every restoration time and, between them, the censored users: the pooled curve is
// then the same as from the users.
func restoreTimes(s *report.Summary) (userTimes, string) {
	sv := s.Survival
	if sv == nil || sv.Service.N == 0 {
		return userTimes{}, srcNone
	}
	var u userTimes
	minT0 := math.Inf(1)
	for _, k := range s.Users {
		if k.Probed {
			minT0 = min(minT0, k.T0S)
		}
	}
	for _, k := range s.Users {
		if !k.Probed {
			continue
		}
		if k.RestoreS != nil && !k.Censored {
			u.t, u.restored = append(u.t, *k.RestoreS), append(u.restored, true)
			continue
		}
		// observed_s runs from the earliest fault among the probed users to the end of the run.
		u.t, u.restored = append(u.t, sv.ObservedS-(k.T0S-minT0)), append(u.restored, false)
	}
	if len(u.t) == sv.Service.N {
		return u, srcUsers
	}
	u = userTimes{}
	pts := sv.Service.Points
	for i, p := range pts {
		for range p.Events {
			u.t, u.restored = append(u.t, p.TS), append(u.restored, true)
		}
		left := p.AtRisk - p.Events // still at risk after this time
		next := 0
		if i+1 < len(pts) {
			next = pts[i+1].AtRisk
		}
		at := p.TS // censored between this restoration time and the next: at risk here, gone by the next
		if i+1 == len(pts) {
			at = sv.ObservedS
		}
		for range left - next {
			u.t, u.restored = append(u.t, at), append(u.restored, false)
		}
	}
	if len(u.t) != sv.Service.N {
		return userTimes{}, srcNone // a curve without its points
	}
	return u, srcCurve
}

// schemeData is what the figures of one scheme of an experiment draw.
type schemeData struct {
	name    string
	runs    []userTimes // runs with probes
	sources map[string]int
	nRuns   int // runs with a report
	mo, mt  []float64
	// moRestore, mtRestore: the probed users' restoration times per direction (runs with per-user times);
	// moProbed, mtProbed the users probed in that direction in those runs (survival.mo.n, survival.mt.n).
	moRestore, mtRestore []float64
	moProbed, mtProbed   int
	probeRuns            int
	boundS               []float64
	colour               color.RGBA
	affected             int
}

func collect(er *ExperimentResult, results []RunResult) []*schemeData {
	var out []*schemeData
	for i, v := range er.Variants {
		d := &schemeData{name: v.Variant, sources: map[string]int{}, colour: colourOf(i)}
		for _, r := range results {
			if r.Experiment != er.Name || r.Variant != v.Variant || r.Summary == nil || r.Err != nil {
				continue
			}
			s := r.Summary
			d.nRuns++
			d.affected += s.AffectedUsers
			for _, u := range s.Users {
				if u.MOInterruptionS != nil {
					d.mo = append(d.mo, *u.MOInterruptionS)
				}
				if u.MTInterruptionS != nil {
					d.mt = append(d.mt, *u.MTInterruptionS)
				}
			}
			ut, src := restoreTimes(s)
			d.sources[src]++
			if src == srcUsers {
				d.probeRuns++
				d.moProbed += s.Survival.MO.N
				d.mtProbed += s.Survival.MT.N
				for _, u := range s.Users {
					if u.MORestoreS != nil {
						d.moRestore = append(d.moRestore, *u.MORestoreS)
					}
					if u.MTRestoreS != nil {
						d.mtRestore = append(d.mtRestore, *u.MTRestoreS)
					}
				}
			}
			if src != srcNone {
				d.runs = append(d.runs, ut)
				d.boundS = append(d.boundS, s.Survival.BoundS)
			}
		}
		out = append(out, d)
	}
	return out
}

// WriteFigures draws every experiment's figures into <dir>/figures/ (replacing what was there) and lists them
// in r's experiments. Experiments or schemes without the data a figure needs leave it out (the figure's caption,
// or its absence from study.md, says so).
func WriteFigures(dir string, r *Result, results []RunResult) error {
	fdir := filepath.Join(dir, DirFigures)
	if err := os.RemoveAll(fdir); err != nil {
		return fmt.Errorf("study: figures: %w", err)
	}
	if err := os.MkdirAll(fdir, 0o755); err != nil {
		return fmt.Errorf("study: figures: %w", err)
	}
	for i := range r.Experiments {
		er := &r.Experiments[i]
		er.Figures = nil
		data := collect(er, results)
		seed := uint64(er.Seed)
		er.FigureNotes = nil
		runs := 0
		for _, d := range data {
			runs += d.nRuns
		}
		for k, f := range []func(*ExperimentResult, []*schemeData, uint64) (*plot.Plot, Figure, error){
			restoreFigure, ecdfFigure, restoreECDFFigure,
		} {
			p, fig, err := f(er, data, seed)
			if err != nil {
				return err
			}
			if p == nil {
				if runs > 0 {
					er.FigureNotes = append(er.FigureNotes, missingFigure[k])
				}
				continue
			}
			if err := save(p, dir, &fig); err != nil {
				return err
			}
			er.Figures = append(er.Figures, fig)
		}
		for _, k := range kpiFigures {
			if k == "affected_users" && !faulted(*er) {
				continue // an experiment without a fault (studies/cost.yaml): a row of zeros says nothing
			}
			p, fig, err := kpiFigure(er, data, k)
			if err != nil {
				return err
			}
			if p == nil {
				continue
			}
			if err := save(p, dir, &fig); err != nil {
				return err
			}
			er.Figures = append(er.Figures, fig)
		}
	}
	return writeSweepFigures(dir, r)
}

// missingFigure says why restoreFigure, ecdfFigure and restoreECDFFigure drew nothing.
var missingFigure = []string{
	"No restoration curves: the runs have no reachability probes (traffic.reachability) or no probed users.",
	"No ECDF of the interruption: no affected user had an answered call of its own traffic after the fault " +
		"(with few calls per user and hour that is usual in a short run; the probes measure the same per direction).",
	"No ECDF of the time to restore: the runs have no per-user probe results.",
}

// save writes the plot as <fig.SVG base>.svg and .png (the names are set here).
func save(p *plot.Plot, dir string, fig *Figure) error {
	base := filepath.Join(DirFigures, fig.SVG)
	fig.SVG, fig.PNG = base+".svg", base+".png"
	svg, png, err := figure.SVGAndPNG(p, figure.Study)
	if err != nil {
		return fmt.Errorf("study: figure %s: %w", fig.SVG, err)
	}
	for _, f := range []struct {
		name string
		b    []byte
	}{{fig.SVG, svg}, {fig.PNG, png}} {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.b, 0o644); err != nil {
			return fmt.Errorf("study: figure: %w", err)
		}
	}
	return nil
}

func newPlot(title, x, y string) *plot.Plot { return figure.NewStudy(title, x, y) }

// restoreFigure: the share of affected users whose service (MT and MO) is restored vs time since the fault, one
// pooled Kaplan–Meier curve per scheme (every user of every run) with a 95 % band from a bootstrap over runs (the
// users of one run share its fault instant and load, so runs, not users, are resampled; pointwise percentile
// band on a grid of instants).
func restoreFigure(er *ExperimentResult, data []*schemeData, seed uint64) (*plot.Plot, Figure, error) {
	type curve struct {
		d      *schemeData
		km     report.KMCurve
		lastEv float64
		maxT   float64
	}
	var cs []curve
	end := 0.0
	var bounds []float64
	for _, d := range data {
		if len(d.runs) == 0 {
			continue
		}
		var t []float64
		var ev []bool
		for _, u := range d.runs {
			t, ev = append(t, u.t...), append(ev, u.restored...)
		}
		c := curve{d: d, km: report.KaplanMeier(t, ev)}
		for i, x := range t {
			c.maxT = max(c.maxT, x)
			if ev[i] {
				c.lastEv = max(c.lastEv, x)
			}
		}
		if c.km.Censored > 0 {
			end = max(end, c.maxT)
		} else {
			end = max(end, 1.25*c.lastEv)
		}
		bounds = append(bounds, d.boundS...)
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return nil, Figure{}, nil
	}
	meanBound := 0.0
	for _, b := range bounds {
		meanBound += b / float64(len(bounds))
	}
	end = max(end, 1.25*meanBound, 1)
	p := newPlot(fmt.Sprintf("%s: affected users restored vs time since the fault (pooled Kaplan–Meier)", er.Name),
		"time since the fault (s)", "share of affected users restored (MT and MO)")
	p.X.Min, p.X.Max = 0, end
	p.Y.Min, p.Y.Max = 0, legendRoom(len(cs)+1)
	p.Y.Tick.Marker = shareTicks
	p.Legend.Top, p.Legend.Left = true, false
	grid := make([]float64, bandGrid)
	for i := range grid {
		grid[i] = end * float64(i) / float64(bandGrid-1)
	}
	var notes []string
	for _, c := range cs {
		col := c.d.colour
		band := ""
		if len(c.d.runs) >= 2 {
			lo, hi := curveBand(c.d.runs, grid, seed)
			var poly plotter.XYs
			for i := range grid {
				poly = append(poly, plotter.XY{X: grid[i], Y: lo[i]})
				if i+1 < len(grid) {
					poly = append(poly, plotter.XY{X: grid[i+1], Y: lo[i]})
				}
			}
			for i := len(grid) - 1; i >= 0; i-- {
				if i+1 < len(grid) {
					poly = append(poly, plotter.XY{X: grid[i+1], Y: hi[i]})
				}
				poly = append(poly, plotter.XY{X: grid[i], Y: hi[i]})
			}
			pg, err := plotter.NewPolygon(poly)
			if err != nil {
				return nil, Figure{}, fmt.Errorf("study: figure: %w", err)
			}
			pg.Color = color.NRGBA{R: col.R, G: col.G, B: col.B, A: 0x38}
			pg.LineStyle.Width = 0
			p.Add(pg)
			band = ", 95 % band"
		} else {
			band = ", no band (1 run)"
		}
		var line plotter.XYs
		for i, pt := range c.km.Points {
			next := end
			if i+1 < len(c.km.Points) {
				next = c.km.Points[i+1].TS
			}
			line = append(line, plotter.XY{X: pt.TS, Y: pt.Restored}, plotter.XY{X: min(next, end), Y: pt.Restored})
		}
		l, err := plotter.NewLine(line)
		if err != nil {
			return nil, Figure{}, fmt.Errorf("study: figure: %w", err)
		}
		l.Color, l.Width = col, vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s: n = %d runs, %d users (%d censored)%s", c.d.name, len(c.d.runs), c.km.N,
			c.km.Censored, band), l)
		if c.d.sources[srcCurve] > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d of %d runs", c.d.name, c.d.sources[srcCurve], len(c.d.runs)))
		}
	}
	if meanBound > 0 {
		b, err := plotter.NewLine(plotter.XYs{{X: meanBound, Y: 0}, {X: meanBound, Y: 1}})
		if err != nil {
			return nil, Figure{}, fmt.Errorf("study: figure: %w", err)
		}
		b.Color = figure.Fault
		b.Dashes = figure.HealDash
		p.Add(b)
		p.Legend.Add(fmt.Sprintf("detection + one probe interval, mean of n = %d runs (%.2f s)", len(bounds), meanBound), b)
	}
	caption := "Share of the affected users whose MT and MO service is restored (reachability probes; MT alone " +
		"for users that place no calls) against the time since the fault. One Kaplan–Meier curve per scheme " +
		"over the users of all its runs pooled; users not restored by the end of their run are censored there. " +
		"The band is a pointwise 95 % percentile bootstrap over runs (whole runs resampled, " +
		fmt.Sprint(stats.Resamples) + " resamples): the users of one run are not independent. "
	if len(notes) > 0 {
		caption += "Per-user times were not in the summary.json of some runs (" + strings.Join(notes, "; ") +
			"): their users were reconstructed from the run's own Kaplan–Meier curve (survival.service points), " +
			"which gives the same restoration times and the censored users between them (censored at the " +
			"preceding restoration time)."
	} else {
		caption += "Per-user restoration times from each run's summary.json (users[].restore_s, as in users.csv)."
	}
	return p, Figure{Kind: "restore", SVG: er.Name + "-restore", Title: "Restoration curves", Caption: caption}, nil
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

// ecdfFigure: the empirical CDF of each affected user's MO and MT interruption (fault → its first successful
// call in that direction answered), per scheme, on a log time axis.
func ecdfFigure(er *ExperimentResult, data []*schemeData, _ uint64) (*plot.Plot, Figure, error) {
	var series [][]float64
	for _, d := range data {
		series = append(series, d.mo, d.mt)
	}
	lo, hi, found := positiveRange(series...)
	if !found {
		return nil, Figure{}, nil
	}
	p := newPlot(fmt.Sprintf("%s: interruption of the affected users (ECDF)", er.Name),
		"time from the fault to the first answered call (s, log scale)", "share of the users with an answered call")
	logTimeAxis(p, lo, hi)
	entries := 0
	for _, d := range data {
		entries += min(len(d.mo), 1) + min(len(d.mt), 1)
	}
	p.Y.Min, p.Y.Max = 0, legendRoom(entries)
	p.Y.Tick.Marker = shareTicks
	p.Legend.Top, p.Legend.Left = true, true
	dropped := 0
	for _, d := range data {
		for _, dir := range []struct {
			name string
			vals []float64
			dash bool
		}{{"MO", d.mo, false}, {"MT", d.mt, true}} {
			var v []float64
			for _, x := range dir.vals {
				if x > 0 {
					v = append(v, x)
				} else {
					dropped++
				}
			}
			if len(v) == 0 {
				continue
			}
			slices.Sort(v)
			line := plotter.XYs{{X: p.X.Min, Y: 0}}
			for i, x := range v {
				line = append(line, plotter.XY{X: x, Y: float64(i) / float64(len(v))},
					plotter.XY{X: x, Y: float64(i+1) / float64(len(v))})
			}
			line = append(line, plotter.XY{X: p.X.Max, Y: 1})
			l, err := plotter.NewLine(line)
			if err != nil {
				return nil, Figure{}, fmt.Errorf("study: figure: %w", err)
			}
			l.Color, l.Width = d.colour, vg.Points(1.3)
			if dir.dash {
				l.Dashes = figure.CurveDash
			}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s %s: n = %d runs, %d of %d affected users", d.name, dir.name, d.nRuns, len(v),
				d.affected), l)
		}
	}
	caption := "Per affected user, the time from the fault until its first successful call in that direction was " +
		"answered (MO solid, MT dashed; summary.json users[].mo_interruption_s / mt_interruption_s), all runs of a " +
		"scheme pooled. Users without an answered call in that direction after the fault (idle users, users not " +
		"restored by the end) are not in the sample: compare n with the affected users. It includes the wait " +
		"until the user's own traffic next placed a call."
	if dropped > 0 {
		caption += fmt.Sprintf(" %d values of 0 s cannot be drawn on the log axis and are left out.", dropped)
	}
	return p, Figure{Kind: "interruption_ecdf", SVG: er.Name + "-interruption-ecdf", Title: "Interruption (ECDF)",
		Caption: caption}, nil
}

// shareTicks label a share axis from 0 to 1 (the axis goes higher to leave the legend room above the data).
var shareTicks = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"}, {Value: 0.5, Label: "0.5"},
	{Value: 0.75, Label: "0.75"}, {Value: 1, Label: "1"}}

// legendRoom is the top of a share axis with room above 1 for a legend of n entries.
func legendRoom(n int) float64 { return 1.04 + 0.065*float64(n) }

// errPoints are dots with asymmetric error bars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// kpiFigure: one KPI's mean per scheme with its 95 % CI (bootstrap over runs) as error bars.
func kpiFigure(er *ExperimentResult, data []*schemeData, name string) (*plot.Plot, Figure, error) {
	var unit, per, doc string
	found := false
	for _, v := range er.Variants {
		if m := v.Metric(name); m != nil {
			unit, per, doc, found = m.Unit, m.Per, m.Doc, true
		}
	}
	if !found {
		return nil, Figure{}, nil
	}
	p := newPlot(fmt.Sprintf("%s: %s per scheme (mean, 95 %% CI)", er.Name, name), "", fmt.Sprintf("%s (%s)", name, unit))
	p.Legend.Top, p.Legend.Left = true, false
	var ticks plot.ConstantTicks
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range er.Variants {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: v.Variant})
		m := v.Metric(name)
		if m == nil {
			continue
		}
		st := m.Stat
		pt := errPoints{XYs: plotter.XYs{{X: float64(i), Y: st.Mean}}, YErrors: plotter.YErrors{{}}}
		lo, hi = min(lo, st.Mean), max(hi, st.Mean)
		ci := "no CI: 1 run"
		if st.MeanCI != nil {
			pt.YErrors[0].Low, pt.YErrors[0].High = st.Mean-st.MeanCI.Low, st.MeanCI.High-st.Mean
			lo, hi = min(lo, st.MeanCI.Low), max(hi, st.MeanCI.High)
			ci = fmt.Sprintf("[%s, %s]", num(st.MeanCI.Low), num(st.MeanCI.High))
		}
		eb, err := plotter.NewYErrorBars(pt)
		if err != nil {
			return nil, Figure{}, fmt.Errorf("study: figure: %w", err)
		}
		col := data[i].colour
		eb.Color, eb.Width, eb.CapWidth = col, vg.Points(1.2), vg.Points(8)
		sc, err := plotter.NewScatter(pt.XYs)
		if err != nil {
			return nil, Figure{}, fmt.Errorf("study: figure: %w", err)
		}
		sc.Color, sc.Radius = col, vg.Points(3.5)
		sc.Shape = draw.CircleGlyph{}
		p.Add(eb, sc)
		n := fmt.Sprintf("n = %d runs", st.Runs)
		if st.Values != st.Runs {
			n += fmt.Sprintf(", %d users", st.Values)
		}
		p.Legend.Add(fmt.Sprintf("%s: %s %s (%s)", v.Variant, num(st.Mean), ci, n), sc)
	}
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = -0.5, float64(len(er.Variants))-0.5
	pad := (hi - lo) * 0.15
	if pad == 0 {
		pad = math.Max(math.Abs(hi)*0.1, 0.05)
	}
	p.Y.Min, p.Y.Max = lo-pad, hi+3*pad // room for the legend above the dots
	caption := fmt.Sprintf("%s (%s, per %s): %s. Dot: the mean over the runs (a per-user KPI pools the users of every "+
		"run); bars: its 95 %% percentile-bootstrap CI over runs (study.json mean_ci95).", name, unit, per, doc)
	return p, Figure{Kind: "kpi", KPI: name, SVG: er.Name + "-" + strings.ReplaceAll(name, "_", "-"),
		Title: name + " per scheme", Caption: caption}, nil
}

// readFigures returns the figures study.json lists, by experiment (those of the previous invocation, while a
// study runs).
func readFigures(dir string) (map[string]ExperimentResult, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	out := map[string]ExperimentResult{}
	for _, e := range r.Experiments {
		out[e.Name] = e
	}
	return out, nil
}

// restoreECDFFigure: per scheme, the share of the probed users whose MT (MO) service was back by t, against t on a
// log axis: each user's mt_restore_s / mo_restore_s from the reachability probes, the denominator every user probed
// in that direction (users never restored keep the curve below 1). The interruption of service measured by the
// probes, which every affected user has, where the ECDF of the users' own calls needs them to call.
func restoreECDFFigure(er *ExperimentResult, data []*schemeData, _ uint64) (*plot.Plot, Figure, error) {
	var series [][]float64
	for _, d := range data {
		series = append(series, d.moRestore, d.mtRestore)
	}
	lo, hi, found := positiveRange(series...)
	if !found {
		return nil, Figure{}, nil
	}
	p := newPlot(fmt.Sprintf("%s: time to restore MT and MO per probed user (ECDF)", er.Name),
		"time from the fault to the first answered probe placed (s, log scale)", "share of the probed users restored")
	logTimeAxis(p, lo, hi)
	entries := 0
	for _, d := range data {
		entries += min(d.moProbed, 1) + min(d.mtProbed, 1)
	}
	p.Y.Min, p.Y.Max = 0, legendRoom(entries)
	p.Y.Tick.Marker = shareTicks
	p.Legend.Top, p.Legend.Left = true, true
	dropped, notes := 0, []string{}
	for _, d := range data {
		for _, dir := range []struct {
			name string
			vals []float64
			n    int
			dash bool
		}{{"MO", d.moRestore, d.moProbed, false}, {"MT", d.mtRestore, d.mtProbed, true}} {
			if dir.n == 0 {
				continue
			}
			var v []float64
			for _, x := range dir.vals {
				if x > 0 {
					v = append(v, x)
				} else {
					dropped++
				}
			}
			slices.Sort(v)
			line := plotter.XYs{{X: p.X.Min, Y: 0}}
			for i, x := range v {
				line = append(line, plotter.XY{X: x, Y: float64(i) / float64(dir.n)},
					plotter.XY{X: x, Y: float64(i+1) / float64(dir.n)})
			}
			line = append(line, plotter.XY{X: p.X.Max, Y: float64(len(v)) / float64(dir.n)})
			l, err := plotter.NewLine(line)
			if err != nil {
				return nil, Figure{}, fmt.Errorf("study: figure: %w", err)
			}
			l.Color, l.Width = d.colour, vg.Points(1.3)
			if dir.dash {
				l.Dashes = figure.CurveDash
			}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s %s: n = %d runs, %d of %d probed users restored", d.name, dir.name, d.probeRuns,
				len(dir.vals), dir.n), l)
		}
		if k := d.sources[srcCurve]; k > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d runs", d.name, k))
		}
	}
	caption := "Per probed affected user, the time from the fault to the start of its first answered MT probe " +
		"(dashed) and MO probe (solid; users that place calls), all runs of a scheme pooled (summary.json " +
		"users[].mt_restore_s / mo_restore_s). The denominator is every user probed in that direction " +
		"(survival.mt.n / mo.n): a user not restored by the end of its run never counts as restored, so the curve " +
		"stays below 1 (a plain ECDF: the restoration curves above treat those users as censored)."
	if len(notes) > 0 {
		caption += " Runs without per-user times in their summary are left out (" + strings.Join(notes, "; ") + ")."
	}
	if dropped > 0 {
		caption += fmt.Sprintf(" %d values of 0 s cannot be drawn on the log axis and are left out.", dropped)
	}
	return p, Figure{Kind: "restore_ecdf", SVG: er.Name + "-restore-ecdf", Title: "Time to restore MT and MO (ECDF)",
		Caption: caption}, nil
}

// positiveRange is the smallest and largest positive value of the series (false when there is none).
func positiveRange(series ...[]float64) (lo, hi float64, found bool) {
	lo = math.Inf(1)
	for _, xs := range series {
		for _, x := range xs {
			if x > 0 {
				lo, hi, found = min(lo, x), max(hi, x), true
			}
		}
	}
	return lo, hi, found
}

// logTimeAxis puts p's x axis on a log scale around [lo, hi] with decade ticks.
func logTimeAxis(p *plot.Plot, lo, hi float64) {
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Min, p.X.Max = lo/1.25, hi*1.25
}
