package compare

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/report"
)

var colFault = figure.Fault

func colorOf(i int) color.RGBA { return figure.PaletteColour(i) }

// series is one named line of a comparison plot.
type series struct {
	name string
	xys  plotter.XYs
}

// binWidth of the runs' success bins (report: 2 s).
func binWidth(s *report.Summary) float64 {
	if len(s.Bins) > 1 {
		return s.Bins[1].StartS - s.Bins[0].StartS
	}
	return 2
}

// plotSuccess: call success ratio of the affected users per bin, one line per variant, the fault marked.
func plotSuccess(rows []Row, sums map[string]*report.Summary) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Call success of the affected users over time (MO+MT, per bin)"
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = "success ratio"
	p.Y.Min, p.Y.Max = 0, 1.05
	p.Legend.Top, p.Legend.Left = false, true
	var ss []series
	faultAt, xmax := -1.0, 0.0
	for _, r := range rows {
		s := sums[r.Variant]
		if s == nil {
			continue
		}
		w := binWidth(s)
		var xys plotter.XYs
		for _, b := range s.Bins {
			if b.AffectedAttempts > 0 {
				xys = append(xys, plotter.XY{X: b.StartS + w/2, Y: float64(b.AffectedSucceeded) / float64(b.AffectedAttempts)})
			}
		}
		ss = append(ss, series{r.Variant, xys})
		if len(s.Faults) > 0 && faultAt < 0 {
			faultAt = s.Faults[0].T0S
		}
		xmax = max(xmax, s.DurationS)
	}
	if err := addLines(p, ss, true); err != nil {
		return nil, err
	}
	if faultAt >= 0 {
		if err := vline(p, faultAt, 1.05, "fault"); err != nil {
			return nil, err
		}
	}
	p.X.Min = 0
	if xmax > 0 {
		p.X.Max = xmax
	}
	return svg(p)
}

// plotInterruptionCDF: per variant, the share of the affected users whose service in that direction was back
// (first successful call answered) at most x seconds after the fault. Users never served keep the line below 1.
func plotInterruptionCDF(dir string, rows []Row, sums map[string]*report.Summary) ([]byte, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s interruption: affected users served again within x s of the fault", upper(dir))
	p.X.Label.Text = "seconds since the fault"
	p.Y.Label.Text = "share of affected users"
	p.Y.Min, p.Y.Max = 0, 1.05
	p.X.Min = 0
	p.Legend.Top, p.Legend.Left = false, false
	var ss []series
	for _, r := range rows {
		s := sums[r.Variant]
		if s == nil || s.AffectedUsers == 0 {
			continue
		}
		var xs []float64
		for _, u := range s.Users {
			if i := interruptionOf(u, dir); i != nil {
				xs = append(xs, *i)
			}
		}
		sort.Float64s(xs)
		n := float64(s.AffectedUsers)
		xys := plotter.XYs{{X: 0, Y: 0}}
		for k, x := range xs {
			xys = append(xys, plotter.XY{X: x, Y: float64(k) / n}, plotter.XY{X: x, Y: float64(k+1) / n})
		}
		end := s.DurationS
		if len(s.Faults) > 0 {
			end -= s.Faults[0].T0S
		}
		if last := xys[len(xys)-1]; end > last.X {
			xys = append(xys, plotter.XY{X: end, Y: last.Y})
		}
		ss = append(ss, series{r.Variant, xys})
	}
	if err := addLines(p, ss, false); err != nil {
		return nil, err
	}
	return svg(p)
}

// plotReregScatter: per affected user, its MT interruption against its time to the next re-registration after
// the fault, one colour per variant, with the diagonal y = x. A scheme that serves terminating calls only after
// re-registration puts its users on the diagonal; a real-time takeover puts them near the x axis.
func plotReregScatter(rows []Row, sums map[string]*report.Summary) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "MT interruption vs. next re-registration, per affected user"
	p.X.Label.Text = "fault → next re-registration (s)"
	p.Y.Label.Text = "fault → first answered MT call (s)"
	p.X.Min, p.Y.Min = 0, 0
	p.Legend.Top, p.Legend.Left = true, true
	top := 1.0
	for i, r := range rows {
		s := sums[r.Variant]
		if s == nil {
			continue
		}
		var xys plotter.XYs
		for _, u := range s.Users {
			if u.ReregS != nil && u.MTInterruptionS != nil {
				xys = append(xys, plotter.XY{X: *u.ReregS, Y: *u.MTInterruptionS})
				top = max(top, *u.ReregS, *u.MTInterruptionS)
			}
		}
		if len(xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, fmt.Errorf("compare: plot: %w", err)
		}
		sc.Color = colorOf(i)
		sc.Shape = shapes[i%len(shapes)]
		sc.Radius = vg.Points(3)
		p.Add(sc)
		p.Legend.Add(r.Variant, sc)
	}
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: top * 1.05, Y: top * 1.05}})
	if err != nil {
		return nil, fmt.Errorf("compare: plot: %w", err)
	}
	diag.Color = colFault
	diag.Dashes = figure.FaultDash
	p.Add(diag)
	p.Legend.Add("y = x", diag)
	p.X.Max, p.Y.Max = top*1.05, top*1.05
	return svg(p)
}

var shapes = figure.Glyphs

func interruptionOf(u report.UserKPI, dir string) *float64 {
	if dir == "mo" {
		return u.MOInterruptionS
	}
	return u.MTInterruptionS
}

func upper(dir string) string {
	if dir == "mo" {
		return "MO"
	}
	return "MT"
}

func addLines(p *plot.Plot, ss []series, points bool) error {
	for i, s := range ss {
		if len(s.xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.xys)
		if err != nil {
			return fmt.Errorf("compare: plot: %w", err)
		}
		l.Color = colorOf(i)
		l.Width = vg.Points(1.5)
		if i%2 == 1 {
			l.Dashes = figure.AltDash
		}
		p.Add(l)
		if points {
			pts, err := plotter.NewScatter(s.xys)
			if err != nil {
				return fmt.Errorf("compare: plot: %w", err)
			}
			pts.Color, pts.Radius, pts.Shape = colorOf(i), vg.Points(2), shapes[i%len(shapes)]
			p.Add(pts)
			p.Legend.Add(s.name, l, pts)
		} else {
			p.Legend.Add(s.name, l)
		}
	}
	return nil
}

func vline(p *plot.Plot, x, top float64, name string) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
	if err != nil {
		return fmt.Errorf("compare: plot: %w", err)
	}
	l.Color = colFault
	l.Dashes = figure.FaultDash
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

func svg(p *plot.Plot) ([]byte, error) {
	b, err := figure.SVG(p, figure.Wide)
	if err != nil {
		return nil, fmt.Errorf("compare: plot: %w", err)
	}
	return b, nil
}

var dashes = figure.LongDash
