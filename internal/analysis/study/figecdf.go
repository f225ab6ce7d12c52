package study

import (
	"fmt"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/report"
)

// ecdfSeries is one line of an ECDF figure: its values, the denominator (n ≥ len(vals): the rest never happened
// within the observation and keep the curve below 1), its legend labels (screen, column) and style.
type ecdfSeries struct {
	label, short string
	vals         []float64
	n            int
	colour       color.RGBA
	dashed       bool
}

// ecdfBuilder draws the series as step ECDFs against a log time axis spanning their positive values. Values of 0
// cannot be drawn on it: dropped counts them.
func ecdfBuilder(title, xlabel, ylabel, yshort string, series []ecdfSeries) (b figure.Builder, dropped int) {
	var all [][]float64
	for _, s := range series {
		all = append(all, s.vals)
	}
	lo, hi, found := positiveRange(all...)
	if !found {
		return nil, 0
	}
	type line struct {
		s ecdfSeries
		v []float64
	}
	var lines []line
	for _, s := range series {
		var v []float64
		for _, x := range s.vals {
			if x > 0 {
				v = append(v, x)
			} else {
				dropped++
			}
		}
		if s.n == 0 {
			continue
		}
		slices.Sort(v)
		lines = append(lines, line{s, v})
	}
	xmin, xmax := lo/1.25, hi*1.25
	return func(f figure.Form) (*figure.Fig, error) {
		y := ylabel
		if f.Narrow() {
			y = yshort
		}
		g := figure.NewFig(f, title, xlabel, y)
		p := g.Plot
		figure.LogAxis(p, xmin, xmax)
		p.Y.Min, p.Y.Max = 0, 1.02
		p.Y.Tick.Marker = figure.ShareTicks
		for _, ln := range lines {
			xy := plotter.XYs{{X: xmin, Y: 0}}
			for i, x := range ln.v {
				xy = append(xy, plotter.XY{X: x, Y: float64(i) / float64(ln.s.n)},
					plotter.XY{X: x, Y: float64(i+1) / float64(ln.s.n)})
			}
			xy = append(xy, plotter.XY{X: xmax, Y: float64(len(ln.v)) / float64(ln.s.n)})
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			l.Color, l.Width = ln.s.colour, vg.Points(1.4)
			if ln.s.dashed {
				l.Dashes = figure.CurveDash
			}
			p.Add(l)
			label := ln.s.label
			if f.Narrow() && ln.s.short != "" {
				label = ln.s.short
			}
			g.Add(label, l)
		}
		return g, nil
	}, dropped
}

// ecdfFigure: the empirical CDF of each affected user's MO and MT interruption (fault → its first successful
// call in that direction answered), per scheme, on a log time axis.
func ecdfFigure(er *ExperimentResult, data []*schemeData, _ uint64) (figure.Builder, Figure, error) {
	var series []ecdfSeries
	for _, d := range data {
		for _, dir := range []struct {
			name string
			vals []float64
			dash bool
		}{{"MO", d.mo, false}, {"MT", d.mt, true}} {
			if len(dir.vals) == 0 {
				continue
			}
			series = append(series, ecdfSeries{
				label: fmt.Sprintf("%s %s: n = %d runs, %d of %d affected users", d.name, dir.name, d.nRuns,
					len(dir.vals), d.affected),
				short: fmt.Sprintf("%s %s (%d users)", d.name, dir.name, len(dir.vals)),
				vals:  dir.vals, n: len(dir.vals), colour: d.colour, dashed: dir.dash})
		}
	}
	b, dropped := ecdfBuilder(fmt.Sprintf("%s: interruption of the affected users (ECDF)", er.Name),
		"fault to first answered call (s, log scale)", "share of users with an answered call", "share of users", series)
	if b == nil {
		return nil, Figure{}, nil
	}
	caption := "Per affected user, the time from the fault until its first successful call in that direction was " +
		"answered (MO solid, MT dashed; summary.json users[].mo_interruption_s / mt_interruption_s), all runs of a " +
		"scheme pooled. Users without an answered call in that direction after the fault (idle users, users not " +
		"restored by the end) are not in the sample: compare n with the affected users. It includes the wait " +
		"until the user's own traffic next placed a call."
	if dropped > 0 {
		caption += fmt.Sprintf(" %d values of 0 s cannot be drawn on the log axis and are left out.", dropped)
	}
	return b, Figure{Kind: "interruption_ecdf", SVG: er.Name + "-interruption-ecdf", Title: "Interruption (ECDF)",
		Caption: caption}, nil
}

// restoreECDFFigure: per scheme, the share of the probed users whose MT (MO) service was back by t, against t on a
// log axis: each user's mt_restore_s / mo_restore_s from the reachability probes, the denominator every user probed
// in that direction (users never restored keep the curve below 1). The interruption of service measured by the
// probes, which every affected user has, where the ECDF of the users' own calls needs them to call.
func restoreECDFFigure(er *ExperimentResult, data []*schemeData, _ uint64) (figure.Builder, Figure, error) {
	var series []ecdfSeries
	var notes []string
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
			series = append(series, ecdfSeries{
				label: fmt.Sprintf("%s %s: n = %d runs, %d of %d probed users restored", d.name, dir.name,
					d.probeRuns, len(dir.vals), dir.n),
				short: fmt.Sprintf("%s %s (%d of %d)", d.name, dir.name, len(dir.vals), dir.n),
				vals:  dir.vals, n: dir.n, colour: d.colour, dashed: dir.dash})
		}
		if k := d.sources[srcCurve]; k > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d runs", d.name, k))
		}
	}
	b, dropped := ecdfBuilder(fmt.Sprintf("%s: time to restore MT and MO per probed user (ECDF)", er.Name),
		"fault to first successful probe (s, log scale)", "share of probed users restored", "share restored", series)
	if b == nil {
		return nil, Figure{}, nil
	}
	caption := "Per probed affected user, the time from the fault to its first successful MT probe (dashed) and MO " +
		"probe (solid; users that place calls), all runs of a scheme pooled (summary.json users[].mt_restore_s / " +
		"mo_restore_s). The denominator is every user probed in that direction (survival.mt.n / mo.n): a user not " +
		"restored by the end of its run never counts as restored, so the curve stays below 1 (a plain ECDF: the " +
		"restoration curves above treat those users as censored)."
	if len(notes) > 0 {
		caption += " Runs without per-user times in their summary are left out (" + strings.Join(notes, "; ") + ")."
	}
	if dropped > 0 {
		caption += fmt.Sprintf(" %d values of 0 s cannot be drawn on the log axis and are left out.", dropped)
	}
	return b, Figure{Kind: "restore_ecdf", SVG: er.Name + "-restore-ecdf", Title: "Time to restore MT and MO (ECDF)",
		Caption: caption}, nil
}

// postDialDelay is what the post-dial-delay figure draws of one scheme: per call placed after the fault to or from
// an affected user, INVITE → 180 (ringing) and INVITE → 200 (answered), in seconds, all runs pooled.
type postDialDelay struct {
	Ringing, Answered []float64
	// Runs counts the runs whose summary has the post-dial delay; Thinned: some run's values were thinned.
	Runs    int
	Thinned bool
}

// add reads the post-dial delay of one run's summary (summary.json post_dial_delay, in milliseconds), if it has it
// (a summary of an older imslab does not).
func (p *postDialDelay) add(s *report.Summary) {
	pdd := s.PostDialDelay
	if pdd == nil {
		return
	}
	p.Runs++
	for _, v := range []struct {
		src *report.Distribution
		dst *[]float64
	}{{pdd.Ringing, &p.Ringing}, {pdd.Answer, &p.Answered}} {
		if v.src == nil {
			continue
		}
		p.Thinned = p.Thinned || v.src.Thinned
		for _, ms := range v.src.Values {
			*v.dst = append(*v.dst, ms/1000)
		}
	}
}

// postDialDelayFigure: per scheme, the ECDF of the post-dial delay of the calls placed after the fault to or from
// affected users: INVITE → 200 solid, INVITE → 180 dashed, on a log axis. Absent when no run's summary has it.
func postDialDelayFigure(er *ExperimentResult, data []*schemeData, _ uint64) (figure.Builder, Figure, error) {
	var series []ecdfSeries
	for _, d := range data {
		for _, dir := range []struct {
			name string
			vals []float64
			dash bool
		}{{"INVITE→200", d.pdd.Answered, false}, {"INVITE→180", d.pdd.Ringing, true}} {
			if len(dir.vals) == 0 {
				continue
			}
			series = append(series, ecdfSeries{
				label: fmt.Sprintf("%s %s: n = %d runs, %d calls", d.name, dir.name, d.pdd.Runs, len(dir.vals)),
				short: fmt.Sprintf("%s %s (%d calls)", d.name, dir.name, len(dir.vals)),
				vals:  dir.vals, n: len(dir.vals), colour: d.colour, dashed: dir.dash})
		}
	}
	b, dropped := ecdfBuilder(fmt.Sprintf("%s: post-dial delay after the fault (ECDF)", er.Name),
		"post-dial delay (s, log scale)", "share of calls", "share of calls", series)
	if b == nil {
		return nil, Figure{}, nil
	}
	caption := "Post-dial delay of the calls placed after the fault to or from an affected user: per call, the " +
		"time from its INVITE to the 200 (solid) and to the 180 (dashed), every run of a scheme pooled " +
		"(summary.json post_dial_delay). A call that failed has no delay and is not in the sample."
	for _, d := range data {
		if d.pdd.Thinned {
			caption += " Runs with very many calls keep an evenly thinned sample of their values."
			break
		}
	}
	if dropped > 0 {
		caption += fmt.Sprintf(" %d values of 0 s cannot be drawn on the log axis and are left out.", dropped)
	}
	return b, Figure{Kind: "post_dial_delay", SVG: er.Name + "-post-dial-delay", Title: "Post-dial delay (ECDF)",
		Caption: caption}, nil
}
