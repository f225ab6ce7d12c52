package study

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

// errPoints are dots with asymmetric error bars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// kpiFigure: one KPI's mean per scheme with its 95 % CI (study.json mean_ci95) as error bars.
func kpiFigure(er *ExperimentResult, data []*schemeData, name string) (figure.Builder, Figure, error) {
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
	lo, hi := math.Inf(1), math.Inf(-1)
	names := make([]string, len(er.Variants))
	for i, v := range er.Variants {
		names[i] = v.Variant
		if m := v.Metric(name); m != nil {
			lo, hi = min(lo, m.Stat.Mean), max(hi, m.Stat.Mean)
			if ci := m.Stat.MeanCI; ci != nil {
				lo, hi = min(lo, ci.Low), max(hi, ci.High)
			}
		}
	}
	pad := (hi - lo) * 0.12
	if pad == 0 {
		pad = math.Max(math.Abs(hi)*0.1, 0.05)
	}
	title := fmt.Sprintf("%s: %s per scheme (mean, 95 %% CI)", er.Name, name)
	build := func(f figure.Form) (*figure.Fig, error) {
		g := figure.NewFig(f, title, "", fmt.Sprintf("%s (%s)", name, unit))
		p := g.Plot
		schemeTicks(p, f, names)
		p.Y.Min, p.Y.Max = lo-pad, hi+pad
		for i, v := range er.Variants {
			m := v.Metric(name)
			if m == nil {
				continue
			}
			st := m.Stat
			pt := errPoints{XYs: plotter.XYs{{X: float64(i), Y: st.Mean}}, YErrors: plotter.YErrors{{}}}
			ci := "no CI: 1 run"
			if st.MeanCI != nil {
				pt.YErrors[0].Low, pt.YErrors[0].High = st.Mean-st.MeanCI.Low, st.MeanCI.High-st.Mean
				ci = fmt.Sprintf("[%s, %s]", num(st.MeanCI.Low), num(st.MeanCI.High))
			}
			eb, err := plotter.NewYErrorBars(pt)
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			col := data[i].colour
			eb.Color, eb.Width, eb.CapWidth = col, vg.Points(1.2), f.TickSize
			sc, err := plotter.NewScatter(pt.XYs)
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			sc.Color, sc.Radius, sc.Shape = col, f.TickSize*0.4, draw.CircleGlyph{}
			p.Add(eb, sc)
			n := fmt.Sprintf("n = %d runs", st.Runs)
			if st.Values != st.Runs {
				n += fmt.Sprintf(", %d users", st.Values)
			}
			g.Add(fmt.Sprintf("%s: %s %s (%s)", v.Variant, num(st.Mean), ci, n), sc)
		}
		return g, nil
	}
	caption := fmt.Sprintf("%s (%s, per %s): %s. Dot: the mean over the runs (a per-user KPI pools the users of every "+
		"run); bars: its 95 %% CI (study.json mean_ci95, the interval the study's statistics give this KPI).", name,
		unit, per, doc)
	return build, Figure{Kind: "kpi", KPI: name, SVG: er.Name + "-" + strings.ReplaceAll(name, "_", "-"),
		Title: name + " per scheme", Caption: caption}, nil
}
