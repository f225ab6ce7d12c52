package report

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

var (
	colAffected = figure.Red
	colOthers   = figure.Blue
	colFault    = figure.Fault
)

// plotSuccess draws "call success over time": per bin, the success ratio of affected and other users' call
// records (MO and MT), with the faults marked. Bins without attempts have no point.
func plotSuccess(s *Summary) ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Call success over time (%.0f s bins, MO+MT)", binWidthS)
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = "success ratio"
	p.Y.Min, p.Y.Max = 0, 1.05
	p.Legend.Top = false
	p.Legend.Left = true
	var aff, oth plotter.XYs
	for _, b := range s.Bins {
		mid := b.StartS + binWidthS/2
		if b.AffectedAttempts > 0 {
			aff = append(aff, plotter.XY{X: mid, Y: float64(b.AffectedSucceeded) / float64(b.AffectedAttempts)})
		}
		if b.OthersAttempts > 0 {
			oth = append(oth, plotter.XY{X: mid, Y: float64(b.OthersSucceeded) / float64(b.OthersAttempts)})
		}
	}
	if err := addSeries(p, "affected users", aff, colAffected); err != nil {
		return nil, err
	}
	if err := addSeries(p, "other users", oth, colOthers); err != nil {
		return nil, err
	}
	if err := markFaults(p, s, 1.05); err != nil {
		return nil, err
	}
	return render(p, s)
}

// plotAttempts draws the number of call records per bin for affected and other users.
func plotAttempts(s *Summary) ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Call attempts per %.0f s bin (MO+MT records)", binWidthS)
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = "attempts"
	p.Y.Min = 0
	var aff, oth plotter.XYs
	top := 1.0
	for _, b := range s.Bins {
		mid := b.StartS + binWidthS/2
		aff = append(aff, plotter.XY{X: mid, Y: float64(b.AffectedAttempts)})
		oth = append(oth, plotter.XY{X: mid, Y: float64(b.OthersAttempts)})
		top = max(top, float64(b.AffectedAttempts), float64(b.OthersAttempts))
	}
	p.Y.Max = top * 1.1
	if err := addSeries(p, "affected users", aff, colAffected); err != nil {
		return nil, err
	}
	if err := addSeries(p, "other users", oth, colOthers); err != nil {
		return nil, err
	}
	if err := markFaults(p, s, top*1.1); err != nil {
		return nil, err
	}
	return render(p, s)
}

func addSeries(p *plot.Plot, name string, xys plotter.XYs, c color.Color) error {
	if len(xys) == 0 {
		return nil
	}
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("report: plot: %w", err)
	}
	l.Color, pts.Color = c, c
	pts.Radius = vg.Points(2)
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
	return nil
}

func markFaults(p *plot.Plot, s *Summary, top float64) error {
	for i, f := range s.Faults {
		l, err := plotter.NewLine(plotter.XYs{{X: f.T0S, Y: 0}, {X: f.T0S, Y: top}})
		if err != nil {
			return fmt.Errorf("report: plot: %w", err)
		}
		l.Color = colFault
		l.Dashes = figure.FaultDash
		p.Add(l)
		if i == 0 {
			p.Legend.Add(fmt.Sprintf("fault: %s %s", f.Kind, f.Target), l)
		}
		if f.HealS == nil {
			continue
		}
		h, err := plotter.NewLine(plotter.XYs{{X: *f.HealS, Y: 0}, {X: *f.HealS, Y: top}})
		if err != nil {
			return fmt.Errorf("report: plot: %w", err)
		}
		h.Color = colFault
		h.Dashes = figure.HealDash
		p.Add(h)
		if i == 0 {
			p.Legend.Add("healed", h)
		}
	}
	return nil
}

func render(p *plot.Plot, s *Summary) ([]byte, error) {
	p.X.Min = 0
	if s.DurationS > 0 {
		p.X.Max = max(s.DurationS, float64(len(s.Bins))*binWidthS)
	}
	b, err := figure.SVG(p, figure.Strip)
	if err != nil {
		return nil, fmt.Errorf("report: plot: %w", err)
	}
	return b, nil
}
