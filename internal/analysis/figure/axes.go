package figure

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The log time axis of the restoration curves: from 10 ms, so that the first second is as wide as a decade, to 30 s,
// the last of the fixed instants every scheme is read at (1, 3, 5, 10, 30 s).
const (
	LogTimeMin = 0.01
	LogTimeMax = 30.0
)

// LogTime puts p's x axis on a log scale from LogTimeMin to max(LogTimeMax, hi), with labels at 1 and 3 of every
// decade and unlabelled ticks between.
func LogTime(p *plot.Plot, hi float64) {
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max = LogTimeMin, max(LogTimeMax, hi)
	p.X.Tick.Marker = LogTicks(p.X.Min, p.X.Max)
}

// LogAxis puts p's x axis on a log scale from lo to hi (both > 0) with LogTicks.
func LogAxis(p *plot.Plot, lo, hi float64) {
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max = lo, hi
	p.X.Tick.Marker = LogTicks(lo, hi)
}

// LogTicks are ticks on a log axis from lo to hi (both > 0): labels at 1 and 3 of every decade, unlabelled ticks at
// 2, 4 … 9; on an axis that would have fewer than two labels, every tick is labelled.
func LogTicks(lo, hi float64) plot.ConstantTicks {
	var ticks plot.ConstantTicks
	labelled := 0
	for e := math.Floor(math.Log10(lo)); math.Pow(10, e) <= hi; e++ {
		dec := math.Pow(10, e)
		for m := 1; m <= 9; m++ {
			v := float64(m) * dec
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			label := ""
			if m == 1 || m == 3 {
				label = strconv.FormatFloat(v, 'g', 3, 64)
			}
			if label != "" {
				labelled++
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	if labelled < 2 {
		for i := range ticks {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 3, 64)
		}
	}
	return ticks
}

// ClampX keeps every point's x inside [lo, hi] (a curve's start at t = 0 on a log axis starts at its left edge)
// and leaves out the points that add nothing to the line: repeats, and the inner points of a horizontal or
// vertical run (a step curve on a fine grid is mostly those; the SVG and PDF stay small).
func ClampX(xys plotter.XYs, lo, hi float64) plotter.XYs {
	out := make(plotter.XYs, 0, len(xys))
	for _, p := range xys {
		q := plotter.XY{X: min(max(p.X, lo), hi), Y: p.Y}
		if n := len(out); n > 0 && out[n-1] == q {
			continue
		}
		if n := len(out); n >= 2 {
			a, b := out[n-2], out[n-1]
			if a.Y == b.Y && b.Y == q.Y && (b.X-a.X)*(q.X-b.X) >= 0 ||
				a.X == b.X && b.X == q.X && (b.Y-a.Y)*(q.Y-b.Y) >= 0 {
				out[n-1] = q // b lies on the segment a–q
				continue
			}
		}
		out = append(out, q)
	}
	return out
}

// BandAlpha is the opacity of a confidence band's fill; its edges are drawn at EdgeAlpha, so that a band shows on
// paper and where bands overlap.
const (
	BandAlpha = 0x48
	EdgeAlpha = 0xc0
)

// Band adds a confidence band between the step lines lo and hi (same x values) to p: a translucent fill in c and
// both edges drawn as thin lines. It returns the fill, the legend's sample of the band.
func Band(p *plot.Plot, lo, hi plotter.XYs, c color.RGBA) (*plotter.Polygon, error) {
	if len(lo) == 0 || len(hi) == 0 {
		return nil, fmt.Errorf("figure: band of %d and %d points", len(lo), len(hi))
	}
	poly := append(plotter.XYs{}, lo...)
	for i := len(hi) - 1; i >= 0; i-- {
		poly = append(poly, hi[i])
	}
	pg, err := plotter.NewPolygon(poly)
	if err != nil {
		return nil, fmt.Errorf("figure: band: %w", err)
	}
	pg.Color = color.NRGBA{R: c.R, G: c.G, B: c.B, A: BandAlpha}
	pg.LineStyle.Width = 0
	p.Add(pg)
	for _, edge := range []plotter.XYs{lo, hi} {
		l, err := plotter.NewLine(edge)
		if err != nil {
			return nil, fmt.Errorf("figure: band: %w", err)
		}
		l.Color, l.Width = color.NRGBA{R: c.R, G: c.G, B: c.B, A: EdgeAlpha}, vg.Points(0.5)
		p.Add(l)
	}
	return pg, nil
}

// BoundDash marks a scheme's bound (last detection + one probe interval) as a vertical line in its colour.
var BoundDash = []vg.Length{vg.Points(1.5), vg.Points(2)}

// VLine adds a vertical line at x from y0 to y1 in colour c with dashes, and returns it (the legend's sample).
func VLine(p *plot.Plot, x, y0, y1 float64, c color.Color, width vg.Length, dashes []vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: y0}, {X: x, Y: y1}})
	if err != nil {
		return nil, fmt.Errorf("figure: line: %w", err)
	}
	l.Color, l.Width, l.Dashes = c, width, dashes
	p.Add(l)
	return l, nil
}

// ShareTicks label a share axis from 0 to 1.
var ShareTicks = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"}, {Value: 0.5, Label: "0.5"},
	{Value: 0.75, Label: "0.75"}, {Value: 1, Label: "1"}}

// LineThumb is a legend sample of a line of colour c, width and dashes.
func LineThumb(c color.Color, width vg.Length, dashes []vg.Length) plot.Thumbnailer {
	return lineThumb{sty: draw.LineStyle{Color: c, Width: width, Dashes: dashes}}
}

// VLineThumb is LineThumb drawn upright, as a vertical mark it names is drawn.
func VLineThumb(c color.Color, width vg.Length, dashes []vg.Length) plot.Thumbnailer {
	return lineThumb{sty: draw.LineStyle{Color: c, Width: width, Dashes: dashes}, upright: true}
}

type lineThumb struct {
	sty     draw.LineStyle
	upright bool
}

func (t lineThumb) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	pts := []vg.Point{{X: c.Min.X, Y: y}, {X: c.Max.X, Y: y}}
	if t.upright {
		x := (c.Min.X + c.Max.X) / 2
		pts = []vg.Point{{X: x, Y: c.Min.Y}, {X: x, Y: c.Max.Y}}
	}
	c.StrokeLines(t.sty, pts)
}

// UniqueTicks are gonum/plot's default ticks with labels that tell them apart: where two labels read the same
// (1.65 and 1.7 both as "1.7"), every label gets one more digit until none does.
type UniqueTicks struct{}

// Ticks returns the ticks between lo and hi.
func (UniqueTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for prec := 1; prec <= 10 && duplicated(ticks); prec++ {
		for i := range ticks {
			if ticks[i].Label != "" {
				ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', prec, 64)
			}
		}
	}
	return ticks
}

func duplicated(ticks []plot.Tick) bool {
	seen := map[string]bool{}
	for _, t := range ticks {
		if t.Label == "" {
			continue
		}
		if seen[t.Label] {
			return true
		}
		seen[t.Label] = true
	}
	return false
}
