package report

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

// ladderDPI is the PNG's resolution: 2 pixels per point of the SVG, sharp on a slide or in a paper.
const ladderDPI = 144

var (
	ladderSIPRGB  = figure.Blue
	ladderCxRGB   = figure.Cx
	ladderGrey    = figure.Lane
	ladderDarkRGB = figure.Dark
)

// png draws the layout as a PNG: the same lanes, arrows, labels and offsets as its SVG, in the Liberation Sans
// font gonum/plot ships (present on every machine, unlike the SVG's sans-serif, which the viewer chooses).
func (l ladderLayout) png() ([]byte, error) {
	w, h := vg.Points(float64(l.width)), vg.Points(float64(l.height))
	b, err := figure.DrawPNG(figure.Size{W: w, H: h, DPI: ladderDPI}, func(ic vg.CanvasSizer) { l.draw(ic, h) })
	if err != nil {
		return nil, fmt.Errorf("report: ladder png: %w", err)
	}
	return b, nil
}

// draw draws the layout on a canvas of height h.
func (l ladderLayout) draw(ic vg.CanvasSizer, h vg.Length) {
	dc := draw.New(ic)
	// pt converts the layout's coordinates (y down from the top) to the canvas's (y up from the bottom).
	pt := func(x, y float64) vg.Point { return vg.Point{X: vg.Points(x), Y: h - vg.Points(y)} }
	text := func(x, y float64, s string, size float64, bold bool, col color.Color, align draw.XAlignment) {
		f := figure.Sans(size, bold)
		dc.FillText(draw.TextStyle{Color: col, Font: f, XAlign: align, YAlign: draw.YBottom,
			Handler: plot.DefaultTextHandler}, pt(x, y), s)
	}
	line := func(col color.Color, width float64, dashes []vg.Length, xy ...float64) {
		ic.SetColor(col)
		ic.SetLineWidth(vg.Points(width))
		ic.SetLineDash(dashes, 0)
		var p vg.Path
		p.Move(pt(xy[0], xy[1]))
		for i := 2; i+1 < len(xy); i += 2 {
			p.Line(pt(xy[i], xy[i+1]))
		}
		ic.Stroke(p)
	}
	// arrowHead fills a triangle pointing along the x axis (dir = +1 right, −1 left) with its tip at (x, y).
	arrowHead := func(x, y, dir float64) {
		ic.SetColor(figure.Ink)
		var p vg.Path
		p.Move(pt(x, y))
		p.Line(pt(x-dir*8, y-4))
		p.Line(pt(x-dir*8, y+4))
		p.Close()
		ic.Fill(p)
	}

	text(10, 20, l.title, 14, true, color.Black, draw.XLeft)
	for i, lane := range l.lanes {
		x := float64(l.laneX[i])
		text(x, 50, lane, 12, true, color.Black, draw.XCenter)
		line(ladderGrey, 1, []vg.Length{vg.Points(4), vg.Points(3)}, x, 58, x, float64(l.height-10))
	}
	for _, r := range l.rows {
		col := ladderSIPRGB
		if r.diameter {
			col = ladderCxRGB
		}
		x1, x2, y := float64(r.x1), float64(r.x2), float64(r.y)
		text(10, y+4, fmt.Sprintf("+%.1f ms", r.offsetMs), 12, false, ladderDarkRGB, draw.XLeft)
		if r.x1 == r.x2 { // a node talking to itself: a small loop
			line(col, 1, nil, x1, y-5, x1+30, y-5, x1+30, y+5, x1, y+5)
			arrowHead(x1, y+5, -1)
		} else {
			dir := 1.0
			if x2 < x1 {
				dir = -1
			}
			line(col, 1.5, nil, x1, y, x2, y)
			arrowHead(x2, y, dir)
		}
		text((x1+x2)/2, y-4, r.label, 12, false, col, draw.XCenter)
	}
}
