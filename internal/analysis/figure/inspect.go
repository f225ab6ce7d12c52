package figure

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Inspection is what an SVG figure holds, as a reader checks it: its size, every text with its font size, and
// every path with its style.
type Inspection struct {
	// W and H are the figure's size in points (the svg element's width and height).
	W, H float64
	// Texts are the text nodes in document order; FontSizes their font sizes (points: the canvas is in points) and
	// TextYs the height of their baseline above the figure's bottom edge (unrotated texts; 0 for a rotated one).
	Texts     []string
	FontSizes []float64
	TextYs    []float64
	Paths     []Path
}

// Path is one path of an SVG: its data and its style attribute.
type Path struct {
	D, Style string
}

var (
	fontSizeRE = regexp.MustCompile(`font-size:([0-9.]+)px`)
	ptRE       = regexp.MustCompile(`^([0-9.]+)pt$`)
	lineRE     = regexp.MustCompile(`^M([-0-9.e]+),([-0-9.e]+)L([-0-9.e]+),([-0-9.e]+)$`)
)

// Inspect parses an SVG figure (an error when it does not parse or is not an SVG).
func Inspect(svg []byte) (Inspection, error) {
	var in Inspection
	d := xml.NewDecoder(bytes.NewReader(svg))
	root := ""
	size, y := 0.0, 0.0
	depth := 0 // inside a rotated group
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Inspection{}, fmt.Errorf("figure: svg: %w", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range x.Attr {
				attr[a.Name.Local] = a.Value
			}
			if root == "" {
				root = x.Name.Local
				in.W, in.H = points(attr["width"]), points(attr["height"])
			}
			switch x.Name.Local {
			case "text":
				size, y = 0, 0
				if m := fontSizeRE.FindStringSubmatch(attr["style"]); m != nil {
					size, _ = strconv.ParseFloat(m[1], 64)
				}
				if v, err := strconv.ParseFloat(attr["y"], 64); err == nil && depth == 0 {
					y = -v // gonum/plot's canvas is flipped: text is drawn at scale(1, -1)
				}
			case "g":
				if strings.Contains(attr["transform"], "rotate") {
					depth++
				}
			case "path":
				in.Paths = append(in.Paths, Path{D: attr["d"], Style: attr["style"]})
			}
		case xml.CharData:
			if t := strings.TrimSpace(string(x)); t != "" {
				in.Texts = append(in.Texts, t)
				in.FontSizes = append(in.FontSizes, size)
				in.TextYs = append(in.TextYs, y)
			}
		case xml.EndElement:
			if x.Name.Local == "g" && depth > 0 {
				depth--
			}
		}
	}
	if root != "svg" {
		return Inspection{}, fmt.Errorf("figure: not an svg document (root %q)", root)
	}
	return in, nil
}

func points(v string) float64 {
	if m := ptRE.FindStringSubmatch(v); m != nil {
		f, _ := strconv.ParseFloat(m[1], 64)
		return f
	}
	return 0
}

// MinFontSize is the smallest font size of the figure's texts (0 without text).
func (in Inspection) MinFontSize() float64 {
	m := 0.0
	for i, s := range in.FontSizes {
		if i == 0 || s < m {
			m = s
		}
	}
	return m
}

// Text is every text of the figure, one per line.
func (in Inspection) Text() string { return strings.Join(in.Texts, "\n") }

// minMark is the least height of a vertical line VerticalLines counts: a legend's sample of it is a line's height.
const minMark = 24

func parse(v string) float64 {
	f, _ := strconv.ParseFloat(v, 64)
	return f
}

// VerticalLines are the x positions of the figure's vertical straight lines (taller than a legend's sample) drawn
// in colour c (SVG's #rrggbb)
// with dashes (as SVG's stroke-dasharray writes them, e.g. "1.5,2"; "" for a solid line).
func (in Inspection) VerticalLines(c, dashes string) []float64 {
	var xs []float64
	for _, p := range in.Paths {
		if !strings.Contains(strings.ToLower(p.Style), "stroke:"+strings.ToLower(c)) {
			continue
		}
		has := strings.Contains(p.Style, "stroke-dasharray:")
		if dashes == "" && has || dashes != "" && !strings.Contains(p.Style, "stroke-dasharray:"+dashes) {
			continue
		}
		m := lineRE.FindStringSubmatch(p.D)
		if m == nil || m[1] != m[3] {
			continue
		}
		if y0, y1 := parse(m[2]), parse(m[4]); math.Abs(y1-y0) < minMark {
			continue // a legend's sample of the line, not the mark
		}
		x, _ := strconv.ParseFloat(m[1], 64)
		xs = append(xs, x)
	}
	return xs
}

// TextX is the x position of the first text that reads t (false when there is none), e.g. a tick's label.
func TextX(svg []byte, t string) (float64, bool) {
	re := regexp.MustCompile(`<text x="([-0-9.e]+)"[^>]*>` + regexp.QuoteMeta(t) + `</text>`)
	m := re.FindSubmatch(bytes.ReplaceAll(svg, []byte("\n\t"), []byte(" ")))
	if m == nil {
		return 0, false
	}
	x, err := strconv.ParseFloat(string(m[1]), 64)
	return x, err == nil
}
