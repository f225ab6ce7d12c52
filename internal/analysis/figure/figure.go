// Package figure is the one place of the figures' style: their sizes and resolutions, fonts and font sizes,
// colours and line dashes, and the writing of a gonum/plot drawing as SVG and PNG. The run report
// (internal/analysis/report), the comparisons (compare) and the studies (study) draw their figures with it, so a
// figure of one looks like a figure of the others and a change of style is made here once.
package figure

import (
	"bytes"
	"fmt"
	"image/color"

	stdfnt "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Size is a figure's size and its PNG's resolution.
type Size struct {
	W, H vg.Length
	// DPI is the PNG's dots per inch.
	DPI int
}

// The figures' sizes.
var (
	// Strip is a wide, low figure: the run report's success and attempts per bin.
	Strip = Size{W: 8 * vg.Inch, H: 3.5 * vg.Inch, DPI: vgimg.DefaultDPI}
	// Wide is the run report's restoration curve and the comparisons' and sweeps' plots.
	Wide = Size{W: 8 * vg.Inch, H: 4 * vg.Inch, DPI: vgimg.DefaultDPI}
	// Panels is the run report's timeline: three panels over one time axis.
	Panels = Size{W: 8 * vg.Inch, H: 8 * vg.Inch, DPI: 120}
	// Study is a study's figure: 7 in × 150 dpi = 1050 px wide.
	Study = Size{W: 7 * vg.Inch, H: 4.2 * vg.Inch, DPI: 150}
)

// Font sizes of the titles and legends that are not gonum/plot's default (12 pt titles, 12 pt legends).
var (
	// PanelTitle and PanelLegend are a panel's of a figure of several (the timeline).
	PanelTitle  = vg.Points(10)
	PanelLegend = vg.Points(8)
	// StudyTitle and StudyLegend are a study figure's.
	StudyTitle  = vg.Points(11)
	StudyLegend = vg.Points(9)
)

// Typeface is the family of the fonts gonum/plot ships (Liberation Serif for the plots' text) and the ladder
// diagrams' PNG are drawn in (Liberation Sans); SVGs name it with generic fallbacks (SVGFontFallback).
const Typeface = "Liberation"

// Sans is the Liberation Sans font at size points (bold when asked), as the ladder diagrams' PNG draw their text.
func Sans(size float64, bold bool) font.Font {
	f := font.Font{Typeface: Typeface, Variant: "Sans", Size: vg.Points(size)}
	if bold {
		f.Weight = stdfnt.WeightBold
	}
	return f
}

// Colours.
var (
	// Palette are the colours of the variants of a comparison or sweep, in order (colour i: Palette[i % len]).
	Palette = []color.RGBA{
		{R: 0x1f, G: 0x5f, B: 0xa8, A: 0xff}, // blue
		{R: 0xc0, G: 0x30, B: 0x20, A: 0xff}, // red
		{R: 0x2a, G: 0x8a, B: 0x3a, A: 0xff}, // green
		{R: 0xd0, G: 0x80, B: 0x10, A: 0xff}, // orange
		{R: 0x70, G: 0x40, B: 0xa0, A: 0xff}, // purple
		{R: 0x10, G: 0x90, B: 0x90, A: 0xff}, // teal
		{R: 0x80, G: 0x50, B: 0x30, A: 0xff}, // brown
		{R: 0x50, G: 0x50, B: 0x50, A: 0xff}, // grey
	}
	// OkabeIto are the Okabe–Ito colours (distinguishable with the common colour-vision deficiencies): a
	// study's schemes in file order, and the first six the pool members of a run's timeline (black draws totals).
	OkabeIto = []color.RGBA{
		{0x00, 0x72, 0xb2, 0xff}, {0xd5, 0x5e, 0x00, 0xff}, {0x00, 0x9e, 0x73, 0xff}, {0xcc, 0x79, 0xa7, 0xff},
		{0xe6, 0x9f, 0x00, 0xff}, {0x56, 0xb4, 0xe9, 0xff}, {0x00, 0x00, 0x00, 0xff},
	}
	// Blue, Red, Green and Purple name the run report's series: others and affected users, MT and MO, answered.
	Blue   = Palette[0]
	Red    = Palette[1]
	Green  = Palette[2]
	Purple = color.RGBA{R: 0x8a, G: 0x3a, B: 0xb0, A: 0xff}
	// Fault marks a fault, its heal and the design's bound; Detect a node's detection of the fault.
	Fault  = color.RGBA{R: 0x60, G: 0x60, B: 0x60, A: 0xff}
	Detect = color.RGBA{R: 0x80, G: 0x20, B: 0x90, A: 0xff}
	// Cx is Diameter's colour in the ladder diagrams (SIP's is Blue); Lane, Dark and Ink their lanes, notes and
	// arrow heads.
	Cx   = color.RGBA{R: 0xb3, G: 0x59, B: 0x00, A: 0xff}
	Lane = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
	Dark = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	Ink  = color.RGBA{R: 0x33, G: 0x33, B: 0x33, A: 0xff}
)

// Hex is a colour as SVG and HTML write it (#rrggbb).
func Hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// PaletteColour is variant i's colour in a comparison or sweep.
func PaletteColour(i int) color.RGBA { return Palette[i%len(Palette)] }

// SchemeColour is scheme i's colour in a study's figures.
func SchemeColour(i int) color.RGBA { return OkabeIto[i%len(OkabeIto)] }

// MemberColour is pool member i's colour in a run's timeline.
func MemberColour(i int) color.RGBA { return OkabeIto[i%6] }

// Dashes of the lines that mark an instant (on, off, in points).
var (
	// FaultDash marks a fault; HealDash its heal and the design's bound (detection + one probe interval).
	FaultDash = []vg.Length{vg.Points(4), vg.Points(3)}
	HealDash  = []vg.Length{vg.Points(1), vg.Points(3)}
	// LongDash marks a fault in the timeline's panels and draws a comparison's MO lines; AltDash tells every
	// other variant's line apart in a comparison.
	LongDash = []vg.Length{vg.Points(6), vg.Points(3)}
	// CurveDash draws a curve beside the main one: MT or MO alone beside both, MO beside MT.
	CurveDash = []vg.Length{vg.Points(5), vg.Points(3)}
	AltDash   = []vg.Length{vg.Points(6), vg.Points(2)}
)

// Glyphs are the variants' point shapes in a comparison or sweep, in order.
var Glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.BoxGlyph{}, draw.CrossGlyph{},
	draw.PlusGlyph{}, draw.RingGlyph{}, draw.SquareGlyph{}, draw.PyramidGlyph{}}

// New is a plot with its title and axis labels.
func New(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = x, y
	return p
}

// NewStudy is a study figure's plot: New with the study's font sizes.
func NewStudy(title, x, y string) *plot.Plot {
	p := New(title, x, y)
	p.Title.TextStyle.Font.Size = StudyTitle
	p.Legend.TextStyle.Font.Size = StudyLegend
	return p
}

// SVG draws p at size s as an SVG, its fonts named with fallbacks.
func SVG(p *plot.Plot, s Size) ([]byte, error) {
	return DrawSVG(s, func(c vg.CanvasSizer) { p.Draw(draw.New(c)) })
}

// PNG draws p at size s as a PNG at s.DPI.
func PNG(p *plot.Plot, s Size) ([]byte, error) {
	return DrawPNG(s, func(c vg.CanvasSizer) { p.Draw(draw.New(c)) })
}

// SVGAndPNG draws p at size s twice: as an SVG and as a PNG.
func SVGAndPNG(p *plot.Plot, s Size) (svg, png []byte, err error) {
	if svg, err = SVG(p, s); err != nil {
		return nil, nil, err
	}
	png, err = PNG(p, s)
	return svg, png, err
}

// DrawSVG is an SVG of size s that drawing draws on (several plots aligned on one canvas, for one).
func DrawSVG(s Size, drawing func(vg.CanvasSizer)) ([]byte, error) {
	c := vgsvg.New(s.W, s.H)
	drawing(c)
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure: svg: %w", err)
	}
	return SVGFontFallback(b.Bytes()), nil
}

// DrawPNG is a PNG of size s at s.DPI that drawing draws on.
func DrawPNG(s Size, drawing func(vg.CanvasSizer)) ([]byte, error) {
	c := vgimg.NewWith(vgimg.UseWH(s.W, s.H), vgimg.UseDPI(s.DPI))
	drawing(c)
	var b bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure: png: %w", err)
	}
	return b.Bytes(), nil
}

// SVGFontFallback adds generic fallbacks to the font-family gonum/plot writes in an SVG (the Liberation fonts it
// ships and draws the PNG with): a viewer without them, as most machines, uses a metric-compatible or generic serif
// face instead of its default. The fonts are not embedded (that would add about 0.5 MB to every SVG).
func SVGFontFallback(svg []byte) []byte {
	return bytes.ReplaceAll(svg, []byte("font-family:Liberation Serif;"),
		[]byte("font-family:Liberation Serif,Times New Roman,Times,serif;"))
}
