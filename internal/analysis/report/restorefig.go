package report

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

// restoreCurves are the curves the run's restoration figure draws: restoration at the answer (service, MT and MO
// alone) and, where the summary has it, the setup's start. A summary written before restoration was timed at the
// answer was converted when read (Summary.UnmarshalJSON): its MT and MO are empty and not drawn.
type restoreCurves struct {
	service, setup *KMCurve
	mt, mo         *KMCurve
}

func restoreCurvesOf(sv *Survival) restoreCurves {
	rc := restoreCurves{service: &sv.Service, mt: &sv.MT, mo: &sv.MO}
	if sv.SetupStarted.N > 0 {
		rc.setup = &sv.SetupStarted
	}
	return rc
}

// restoreFigure draws the share of the affected users restored vs the time since the fault (Kaplan–Meier) on a
// log axis (10 ms to 30 s, so that the first seconds show): service (MT and MO answered) with its 95 % band, MT and
// MO alone, the setup-started curve dashed, and the run's bound (last detection + one probe interval) as a vertical
// line in the service curve's colour. Its legend is below the data.
func restoreFigure(sv *Survival) figure.Builder {
	rc := restoreCurvesOf(sv)
	return func(f figure.Form) (*figure.Fig, error) {
		g := figure.NewFig(f, fmt.Sprintf("Affected users restored vs time since the fault (Kaplan–Meier, "+
			"probes every %g s)", sv.IntervalS), "time since the fault (s, log scale)", "share of users restored")
		p := g.Plot
		end := sv.ObservedS
		hi := 0.0
		for _, c := range []*KMCurve{rc.service, rc.setup, rc.mt, rc.mo} {
			if c != nil && len(c.Points) > 0 {
				hi = max(hi, 1.25*c.Points[len(c.Points)-1].TS)
			}
		}
		figure.LogTime(p, min(max(hi, 1.25*sv.BoundS), max(end, figure.LogTimeMax)))
		end = min(end, p.X.Max)
		p.Y.Min, p.Y.Max = 0, 1.02
		p.Y.Tick.Marker = figure.ShareTicks
		clamp := func(xys plotter.XYs) plotter.XYs { return figure.ClampX(xys, p.X.Min, p.X.Max) }
		if c := rc.service; c.N > 0 {
			line, _ := c.steps(end)
			var lo, hi plotter.XYs
			for i := 0; i+1 < len(line); i += 2 {
				k := i / 2
				lo = append(lo, plotter.XY{X: line[i].X, Y: c.Points[k].Lo}, plotter.XY{X: line[i+1].X, Y: c.Points[k].Lo})
				hi = append(hi, plotter.XY{X: line[i].X, Y: c.Points[k].Hi}, plotter.XY{X: line[i+1].X, Y: c.Points[k].Hi})
			}
			band, err := figure.Band(p, clamp(lo), clamp(hi), colAffected)
			if err != nil {
				return nil, fmt.Errorf("report: plot: %w", err)
			}
			l, err := addSteps(p, clamp(line), colAffected, vg.Points(1.6), nil)
			if err != nil {
				return nil, err
			}
			g.Add(fmt.Sprintf("MT and MO answered, n = %d (%d censored), 95 %% band", c.N, c.Censored), band, l)
		}
		for _, cv := range []struct {
			name string
			c    *KMCurve
			col  color.RGBA
		}{{"MT alone", rc.mt, figure.Blue}, {"MO alone", rc.mo, figure.Green}} {
			if cv.c == nil || cv.c.N == 0 {
				continue
			}
			line, _ := cv.c.steps(end)
			l, err := addSteps(p, clamp(line), cv.col, vg.Points(1), figure.AltDash)
			if err != nil {
				return nil, err
			}
			g.Add(fmt.Sprintf("%s, n = %d", cv.name, cv.c.N), l)
		}
		if c := rc.setup; c != nil && c.N > 0 {
			line, _ := c.steps(end)
			l, err := addSteps(p, clamp(line), figure.Purple, vg.Points(1), figure.CurveDash)
			if err != nil {
				return nil, err
			}
			g.Add("setup started (probe placed)", l)
		}
		if sv.BoundS > 0 {
			if _, err := figure.VLine(p, sv.BoundS, 0, 1.02, colAffected, vg.Points(1.3), figure.BoundDash); err != nil {
				return nil, err
			}
			g.Add(fmt.Sprintf("bound: last detection + one probe interval (%.2f s)", sv.BoundS),
				figure.VLineThumb(colAffected, vg.Points(1.3), figure.BoundDash))
		}
		return g, nil
	}
}

func addSteps(p *plot.Plot, xys plotter.XYs, c color.Color, w vg.Length, dashes []vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return nil, fmt.Errorf("report: plot: %w", err)
	}
	l.Color, l.Width, l.Dashes = c, w, dashes
	p.Add(l)
	return l, nil
}

// writeRestoreFigure writes the run's restoration figure into runDir/plots: restore.svg and restore.png (screen)
// and, with printForms, the print forms restore.{col,full}.{pdf,svg,png}. It returns the files written (relative
// to runDir) and the screen SVG.
func writeRestoreFigure(runDir string, sv *Survival, printForms bool) (files []string, svg []byte, err error) {
	build := restoreFigure(sv)
	w, err := figure.Write(runDir, filepath.Join(DirPlots, "restore"), build, printForms)
	if err != nil {
		return nil, nil, fmt.Errorf("report: plot: %w", err)
	}
	g, err := build(figure.Screen)
	if err != nil {
		return nil, nil, err
	}
	png, err := figure.Render(g, "png")
	if err != nil {
		return nil, nil, fmt.Errorf("report: plot: %w", err)
	}
	pngFile := filepath.Join(DirPlots, "restore.png")
	if err := os.WriteFile(filepath.Join(runDir, pngFile), png, 0o644); err != nil {
		return nil, nil, fmt.Errorf("report: %w", err)
	}
	if svg, err = os.ReadFile(filepath.Join(runDir, w.Screen)); err != nil {
		return nil, nil, fmt.Errorf("report: %w", err)
	}
	return append([]string{w.Screen, pngFile}, w.Print...), svg, nil
}
