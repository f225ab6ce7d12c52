package figure

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Form is one of the forms a figure is drawn in: the screen form a document embeds, or a print form at a paper's
// column or full width. A figure is built once per form (Builder), so that its legend, labels and fonts suit the
// width: the fonts are in points and the canvas is the printed size, so a print form's text is at its font size on
// paper, never scaled down.
type Form struct {
	// Name is "" for the screen form, else the part of the files' names before the extension ("col", "full").
	Name string
	// W is the width; H the height of the plot without its legend, which is drawn below the plot and adds to it.
	W, H vg.Length
	// DPI is the PNG's dots per inch.
	DPI int
	// Title draws the plot's title (the screen form; a print figure's caption carries it).
	Title bool
	// Fonts are the sizes of the title, the axis labels, the tick labels and the legend.
	TitleSize, LabelSize, TickSize, LegendSize vg.Length
	// ThumbWidth is the width of a legend entry's sample of its line.
	ThumbWidth vg.Length
}

// MinPrintFont is the smallest font size of a print form (points at print size).
const MinPrintFont = 8

// The forms. Screen is a study figure as study.md embeds it; ColumnForm and FullForm are the print forms at a
// two-column paper's column width (3.5 in) and full width (7 in).
var (
	Screen = Form{W: 7 * vg.Inch, H: 3.6 * vg.Inch, DPI: 150, Title: true, TitleSize: vg.Points(11),
		LabelSize: vg.Points(11), TickSize: vg.Points(10), LegendSize: vg.Points(9), ThumbWidth: vg.Points(22)}
	ColumnForm = Form{Name: "col", W: 3.5 * vg.Inch, H: 2.3 * vg.Inch, DPI: 300, LabelSize: vg.Points(9),
		TickSize: vg.Points(8), LegendSize: vg.Points(8), ThumbWidth: vg.Points(16)}
	FullForm = Form{Name: "full", W: 7 * vg.Inch, H: 3.2 * vg.Inch, DPI: 300, LabelSize: vg.Points(10),
		TickSize: vg.Points(9), LegendSize: vg.Points(9), ThumbWidth: vg.Points(20)}
	// PrintForms are the print forms, each written as PDF, SVG and PNG.
	PrintForms = []Form{ColumnForm, FullForm}
	// PrintFormats are the print forms' file formats.
	PrintFormats = []string{"pdf", "svg", "png"}
)

// Narrow reports whether the form is a column's width (a builder shortens its labels there).
func (f Form) Narrow() bool { return f.W < 5*vg.Inch }

// Fig is a plot with its legend drawn below the data area, in rows across the figure's width, never over the data.
type Fig struct {
	Plot    *plot.Plot
	Form    Form
	entries []legendEntry
}

type legendEntry struct {
	label  string
	thumbs []plot.Thumbnailer
}

// NewFig is a figure of form f: a plot with its title (screen form only), axis labels and the form's font sizes.
func NewFig(f Form, title, x, y string) *Fig {
	p := New("", x, y)
	if f.Title {
		p.Title.Text = title
	}
	p.Title.TextStyle.Font.Size = f.TitleSize
	p.X.Label.TextStyle.Font.Size, p.Y.Label.TextStyle.Font.Size = f.LabelSize, f.LabelSize
	p.X.Tick.Label.Font.Size, p.Y.Tick.Label.Font.Size = f.TickSize, f.TickSize
	p.Legend.TextStyle.Font.Size = f.LegendSize
	p.X.Tick.Marker, p.Y.Tick.Marker = UniqueTicks{}, UniqueTicks{}
	return &Fig{Plot: p, Form: f}
}

// Add adds a legend entry: the label and the samples of what it names (drawn over each other).
func (g *Fig) Add(label string, thumbs ...plot.Thumbnailer) {
	g.entries = append(g.entries, legendEntry{label: label, thumbs: thumbs})
}

// Labels are the legend's labels, in order.
func (g *Fig) Labels() []string {
	out := make([]string, len(g.entries))
	for i, e := range g.entries {
		out[i] = e.label
	}
	return out
}

// legendRow is one row of the legend below the plot: its entries, laid out in the legend's columns.
type legendRow struct {
	items  []legendItem
	height vg.Length
}

type legendItem struct {
	e     legendEntry
	text  string // the label, wrapped onto lines that fit the width
	width vg.Length
}

// legendGap is the space between legend entries in a row, and between a sample and its label.
func (g *Fig) legendGap() vg.Length { return g.Form.LegendSize }

// layout arranges the legend into aligned columns across width w, as many as its entries allow, in their order;
// an entry wider than half the width takes a row of its own, its label broken at spaces where it is wider than
// the row. It returns the rows and the columns' width.
func (g *Fig) layout(w vg.Length) ([]legendRow, vg.Length) {
	sty := g.Plot.Legend.TextStyle
	gap := g.legendGap()
	items := make([]legendItem, len(g.entries))
	colW := vg.Length(0)
	for i, e := range g.entries {
		txt := wrap(sty, e.label, w-g.Form.ThumbWidth-gap/2)
		items[i] = legendItem{e: e, text: txt, width: g.Form.ThumbWidth + gap/2 + sty.Width(txt)}
		if !g.wide(items[i], w) {
			colW = max(colW, items[i].width)
		}
	}
	cols := 1
	if colW > 0 {
		cols = max(1, int((w+gap)/(colW+gap)))
	} else {
		colW = w
	}
	var rows []legendRow
	var cur legendRow
	flush := func() {
		if len(cur.items) > 0 {
			rows = append(rows, cur)
		}
		cur = legendRow{}
	}
	for _, it := range items {
		if g.wide(it, w) {
			flush()
			cur.items = []legendItem{it}
			flush()
			continue
		}
		cur.items = append(cur.items, it)
		if len(cur.items) == cols {
			flush()
		}
	}
	flush()
	for i := range rows {
		for _, it := range rows[i].items {
			rows[i].height = max(rows[i].height, sty.Height(it.text))
		}
	}
	return rows, colW
}

// wide reports whether a legend item takes a row of its own (wider than half the legend's width w).
func (g *Fig) wide(it legendItem, w vg.Length) bool { return it.width > (w-g.legendGap())/2 }

// wrap breaks txt at spaces onto lines no wider than w.
func wrap(sty text.Style, txt string, w vg.Length) string {
	if sty.Width(txt) <= w {
		return txt
	}
	words := strings.Fields(txt)
	var lines []string
	line := ""
	for _, word := range words {
		if line != "" && sty.Width(line+" "+word) > w {
			lines = append(lines, line)
			line = word
			continue
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}

// legendHeight is the height the legend takes below the plot at the figure's width.
func (g *Fig) legendHeight() vg.Length {
	rows, _ := g.layout(g.Form.W - 2*g.legendGap())
	if len(rows) == 0 {
		return 0
	}
	h := g.legendGap() / 2 // above the first row, below the x axis label
	for _, r := range rows {
		h += r.height + g.Form.LegendSize/3
	}
	return h + g.Form.LegendSize/2
}

// Size is the figure's whole size: its form's width, and the plot's height plus the legend's.
func (g *Fig) Size() Size {
	return Size{W: g.Form.W, H: g.Form.H + g.legendHeight(), DPI: g.Form.DPI}
}

// Draw draws the plot and, below it, the legend.
func (g *Fig) Draw(c draw.Canvas) {
	lh := g.legendHeight()
	pc := c
	pc.Min.Y += lh
	g.Plot.Draw(pc)
	if lh == 0 {
		return
	}
	sty := g.Plot.Legend.TextStyle
	sty.XAlign, sty.YAlign = text.XLeft, text.YTop
	gap := g.legendGap()
	w := c.Max.X - c.Min.X - 2*gap
	rows, colW := g.layout(w)
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r.items))
	}
	gridW := vg.Length(cols)*colW + vg.Length(cols-1)*gap
	wideW := vg.Length(0)
	for _, r := range rows {
		if len(r.items) == 1 && g.wide(r.items[0], w) {
			wideW = max(wideW, r.items[0].width)
		}
	}
	y := c.Min.Y + lh - gap/2
	lineH := sty.Height("M")
	// Every row starts at one left edge: the legend's widest part (its columns, or an entry on a row of its own)
	// is centred.
	left := c.Min.X + (c.Max.X-c.Min.X-max(gridW, wideW))/2
	for _, r := range rows {
		x := left
		for _, it := range r.items {
			icon := &draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: x, Y: y - lineH}, Max: vg.Point{X: x + g.Form.ThumbWidth, Y: y}}}
			for _, t := range it.e.thumbs {
				t.Thumbnail(icon)
			}
			c.FillText(sty, vg.Point{X: x + g.Form.ThumbWidth + gap/2, Y: y}, it.text)
			x += colW + gap
		}
		y -= r.height + g.Form.LegendSize/3
	}
}

// Builder builds a figure in form f. A builder that has nothing to draw returns nil.
type Builder func(f Form) (*Fig, error)

// Render draws g in one format: "svg", "pdf" or "png".
func Render(g *Fig, format string) ([]byte, error) {
	s := g.Size()
	var c vg.CanvasWriterTo
	switch format {
	case "svg":
		c = vgsvg.New(s.W, s.H)
	case "pdf":
		c = pdfCanvas{vgpdf.New(s.W, s.H)}
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(s.W, s.H), vgimg.UseDPI(s.DPI))}
	default:
		return nil, fmt.Errorf("figure: unknown format %q", format)
	}
	dc := draw.New(c)
	// A white page: a PNG is otherwise transparent, which a paper's dark-mode viewer shows as black.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	g.Draw(dc)
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("figure: %s: %w", format, err)
	}
	if format == "svg" {
		return SVGFontFallback(b.Bytes()), nil
	}
	return b.Bytes(), nil
}

// FileName is the file of a figure named base in form f and format: base.svg for the screen form,
// base.<form>.<format> for a print form.
func FileName(base string, f Form, format string) string {
	if f.Name == "" {
		return base + "." + format
	}
	return base + "." + f.Name + "." + format
}

// IsPrintForm reports whether a file name is a figure's print form (<base>.col.<format>, <base>.full.<format>).
func IsPrintForm(name string) bool {
	for _, f := range PrintForms {
		for _, format := range PrintFormats {
			if strings.HasSuffix(name, "."+f.Name+"."+format) {
				return true
			}
		}
	}
	return false
}

// Written are the files of a figure, relative to the directory they were written in.
type Written struct {
	// Screen is the screen form's SVG; Print every print form's files (column then full width; PDF, SVG, PNG).
	Screen string
	Print  []string
	// Fig is the screen form's figure (its legend's labels, for one).
	Fig *Fig
}

// Write builds the figure in every form and writes it under dir as base.svg (the screen form) and
// base.{col,full}.{pdf,svg,png} (base may hold a subdirectory). Without printForms only the screen form is written.
// A builder that draws nothing writes nothing (a nil Fig).
func Write(dir, base string, build Builder, printForms bool) (Written, error) {
	var w Written
	forms := []Form{Screen}
	if printForms {
		forms = append(forms, PrintForms...)
	}
	for _, f := range forms {
		g, err := build(f)
		if err != nil {
			return Written{}, err
		}
		if g == nil {
			return Written{}, nil
		}
		formats := PrintFormats
		if f.Name == "" {
			formats, w.Fig = []string{"svg"}, g
		}
		for _, format := range formats {
			b, err := Render(g, format)
			if err != nil {
				return Written{}, fmt.Errorf("figure %s: %w", base, err)
			}
			name := FileName(base, f, format)
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				return Written{}, fmt.Errorf("figure: %w", err)
			}
			if f.Name == "" {
				w.Screen = name
			} else {
				w.Print = append(w.Print, name)
			}
		}
	}
	return w, nil
}

// DefaultFont is the plots' text font at size points (Liberation Serif, gonum/plot's default).
func DefaultFont(size float64) font.Font {
	return font.Font{Typeface: Typeface, Variant: "Serif", Size: vg.Points(size)}
}
