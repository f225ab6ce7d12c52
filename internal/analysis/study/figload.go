package study

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/report"
)

// survivorLoad is what the survivor-load figure draws of one scheme: each survivor's load after the takeover
// relative to its own load before the fault (SIP requests/s; summary.json member_load), per survivor and run.
type survivorLoad struct {
	ratios []float64
	// runs with a member load; spares: survivors that had no load of their own before the fault (a standby or an
	// N+1 spare: less than a tenth of the busiest member's, or under report.MinReqPerSForRatio), whose ratio
	// would divide by about 0.
	runs, spares int
	pools        map[string]bool
}

// add reads one run's member load: the survivors of the pools a faulted member was in.
func (l *survivorLoad) add(s *report.Summary) {
	ml := s.MemberLoad
	if ml == nil {
		return
	}
	hit := map[string]bool{}
	for _, r := range ml.Members {
		if r.Faulted {
			hit[r.Pool] = true
		}
	}
	if len(hit) == 0 {
		return
	}
	l.runs++
	if l.pools == nil {
		l.pools = map[string]bool{}
	}
	for pool := range hit {
		l.pools[pool] = true
		busiest := 0.0
		for _, r := range ml.Members {
			if r.Pool == pool {
				busiest = max(busiest, r.ReqPerSBefore)
			}
		}
		for _, r := range ml.Members {
			if r.Pool != pool || r.Faulted {
				continue
			}
			if r.ReqPerSBefore < busiest/10 || r.ReqPerSBefore < report.MinReqPerSForRatio {
				l.spares++
				continue
			}
			l.ratios = append(l.ratios, r.ReqPerSAfter/r.ReqPerSBefore)
		}
	}
}

// jitter spreads the k-th point of a category across ±0.2 of its slot, the same way every time.
func jitter(k int) float64 {
	_, frac := math.Modf(float64(k) * 0.6180339887)
	return (frac - 0.5) * 0.4
}

// schemeTicks label a category axis with the schemes; at a column's width, names that would collide are set at
// an angle.
func schemeTicks(p *plot.Plot, f figure.Form, names []string) {
	var ticks plot.ConstantTicks
	width := vg.Length(0)
	for i, n := range names {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: n})
		width += p.X.Tick.Label.Width(n) + f.TickSize
	}
	p.X.Tick.Marker = ticks
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	if width > 0.8*f.W {
		p.X.Tick.Label.Rotation = math.Pi / 7
		p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = text.XRight, text.YTop
	}
}

// survivorLoadFigure: per scheme, every survivor's post-fault load relative to its own pre-fault load (a dot per
// survivor and run, its mean a bar), against 1 (no more than before). Absent when no run has a member load.
func survivorLoadFigure(er *ExperimentResult, data []*schemeData, _ uint64) (figure.Builder, Figure, error) {
	hi, any := 1.0, false
	pools := map[string]bool{}
	spares := 0
	for _, d := range data {
		for _, r := range d.load.ratios {
			hi, any = max(hi, r), true
		}
		for p := range d.load.pools {
			pools[p] = true
		}
		spares += d.load.spares
	}
	if !any {
		return nil, Figure{}, nil
	}
	names := make([]string, len(data))
	for i, d := range data {
		names[i] = d.name
	}
	title := fmt.Sprintf("%s: each survivor's load after the takeover against its own before the fault", er.Name)
	build := func(f figure.Form) (*figure.Fig, error) {
		ylabel := "survivor's load after / its own before"
		if f.Narrow() {
			ylabel = "load after / own load before"
		}
		g := figure.NewFig(f, title, "", ylabel)
		p := g.Plot
		schemeTicks(p, f, names)
		p.Y.Min, p.Y.Max = 0, hi*1.08
		ref, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: 1}, {X: p.X.Max, Y: 1}})
		if err != nil {
			return nil, fmt.Errorf("study: figure: %w", err)
		}
		ref.Color, ref.Width, ref.Dashes = figure.Fault, vg.Points(1), figure.FaultDash
		p.Add(ref)
		for i, d := range data {
			if len(d.load.ratios) == 0 {
				continue
			}
			var pts plotter.XYs
			sum, top := 0.0, 0.0
			for k, r := range d.load.ratios {
				pts = append(pts, plotter.XY{X: float64(i) + jitter(k), Y: r})
				sum, top = sum+r, max(top, r)
			}
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			sc.Color, sc.Radius, sc.Shape = d.colour, f.TickSize/4, draw.RingGlyph{}
			mean := sum / float64(len(d.load.ratios))
			bar, err := plotter.NewLine(plotter.XYs{{X: float64(i) - 0.3, Y: mean}, {X: float64(i) + 0.3, Y: mean}})
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			bar.Color, bar.Width = d.colour, vg.Points(2.2)
			p.Add(sc, bar)
			label := fmt.Sprintf("%s: n = %d runs, %d survivors, mean %s, max %s", d.name, d.load.runs,
				len(d.load.ratios), num(mean), num(top))
			if f.Narrow() {
				label = fmt.Sprintf("%s: mean %s, max %s (n = %d)", d.name, num(mean), num(top), len(d.load.ratios))
			}
			g.Add(label, sc, bar)
		}
		g.Add("1: as loaded as before the fault", figure.LineThumb(figure.Fault, vg.Points(1), figure.FaultDash))
		return g, nil
	}
	caption := fmt.Sprintf("Each survivor of the faulted pool (%s) after the takeover, relative to its own load "+
		"before the fault: SIP requests/s received in the window after the last detection (+2 s) over those in the "+
		"20 s before the fault (summary.json member_load; keepalives and the reachability probes are not counted). "+
		"One ring per survivor and run (set apart sideways within its scheme), the bar their mean; the dashed line "+
		"is 1, no more than before. Where the members' pre-fault load is uneven this differs from the pool's peak "+
		"ratio (the busiest survivor against the mean member).", strings.Join(slices.Sorted(maps.Keys(pools)), ", "))
	if spares > 0 {
		caption += fmt.Sprintf(" %d survivors (over all runs) had no load of their own before the fault (a standby "+
			"or spare: under a tenth of the busiest member's or under %g request/s) and have no ratio.", spares,
			report.MinReqPerSForRatio)
	}
	return build, Figure{Kind: "survivor_load", SVG: er.Name + "-survivor-load", Title: "Survivor load",
		Caption: caption}, nil
}
