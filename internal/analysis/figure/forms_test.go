package figure_test

import (
	"bytes"
	"compress/zlib"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

// restoreLike is a figure as the restoration curves draw it: a step curve on the log time axis, its band, a bound
// and a legend of several entries, one of them long.
func restoreLike(f figure.Form) (*figure.Fig, error) {
	g := figure.NewFig(f, "p: affected users restored", "time since the fault (s, log scale)", "share restored")
	p := g.Plot
	figure.LogTime(p, 0)
	p.Y.Min, p.Y.Max = 0, 1.02
	p.Y.Tick.Marker = figure.ShareTicks
	line := figure.ClampX(plotter.XYs{{X: 0, Y: 0}, {X: 2, Y: 0}, {X: 2, Y: 0.6}, {X: 4, Y: 0.6}, {X: 4, Y: 1}, {X: 30, Y: 1}},
		p.X.Min, p.X.Max)
	lo := figure.ClampX(plotter.XYs{{X: 0, Y: 0}, {X: 2, Y: 0}, {X: 2, Y: 0.4}, {X: 4, Y: 0.4}, {X: 4, Y: 0.9}, {X: 30, Y: 0.9}},
		p.X.Min, p.X.Max)
	hi := figure.ClampX(plotter.XYs{{X: 0, Y: 0}, {X: 2, Y: 0}, {X: 2, Y: 0.8}, {X: 4, Y: 0.8}, {X: 4, Y: 1}, {X: 30, Y: 1}},
		p.X.Min, p.X.Max)
	band, err := figure.Band(p, lo, hi, figure.SchemeColour(0))
	if err != nil {
		return nil, err
	}
	l, err := plotter.NewLine(line)
	if err != nil {
		return nil, err
	}
	l.Color = figure.SchemeColour(0)
	p.Add(l)
	if _, err := figure.VLine(p, 1.85, 0, 1.02, figure.SchemeColour(0), vg.Points(1.3), figure.BoundDash); err != nil {
		return nil, err
	}
	g.Add("quasi-pool: n = 3 runs, 12 users (0 censored), 95 % band", band, l)
	g.Add("load-sharing+ignore-504: n = 3 runs, 12 users (9 censored)", l)
	g.Add("each scheme's bound: last detection + one probe interval (mean of its runs), drawn in the scheme's colour",
		figure.VLineThumb(figure.Dark, vg.Points(1.3), figure.BoundDash))
	return g, nil
}

var _ = Describe("a figure in its forms", Label("unit"), func() {
	It("is written as the screen SVG and, at 3.5 in and 7 in, as PDF, SVG and PNG with fonts of at least 8 pt", func() {
		dir := GinkgoT().TempDir()
		w, err := figure.Write(dir, "p-restore", restoreLike, true)
		Expect(err).NotTo(HaveOccurred())
		Expect(w.Screen).To(Equal("p-restore.svg"))
		Expect(w.Print).To(Equal([]string{"p-restore.col.pdf", "p-restore.col.svg", "p-restore.col.png",
			"p-restore.full.pdf", "p-restore.full.svg", "p-restore.full.png"}))
		widths := map[string]float64{"col": 3.5, "full": 7}
		for _, name := range w.Print {
			b, err := os.ReadFile(filepath.Join(dir, name))
			Expect(err).NotTo(HaveOccurred())
			form := strings.Split(name, ".")[1]
			switch filepath.Ext(name) {
			case ".pdf":
				Expect(b).To(HavePrefix("%PDF-"), name)
				Expect(string(b)).To(ContainSubstring("/FontFile2"), "fonts embedded: "+name)
			case ".svg":
				in, err := figure.Inspect(b)
				Expect(err).NotTo(HaveOccurred(), name)
				Expect(in.W).To(BeNumerically("~", widths[form]*72, 0.01), name)
				Expect(in.MinFontSize()).To(BeNumerically(">=", figure.MinPrintFont), name)
				Expect(in.Text()).To(ContainSubstring("quasi-pool"))
				Expect(in.Text()).NotTo(ContainSubstring("affected users restored"), "a print form leaves the title to the caption")
			case ".png":
				img, err := png.Decode(bytes.NewReader(b))
				Expect(err).NotTo(HaveOccurred(), name)
				Expect(img.Bounds().Dx()).To(Equal(int(widths[form]*300)), name+": 300 dpi")
			}
		}
		screen, err := os.ReadFile(filepath.Join(dir, w.Screen))
		Expect(err).NotTo(HaveOccurred())
		in, err := figure.Inspect(screen)
		Expect(err).NotTo(HaveOccurred())
		Expect(in.Text()).To(ContainSubstring("p: affected users restored"), "the screen form has its title")
		Expect(in.Text()).To(ContainSubstring("load-sharing+ignore-504: n = 3 runs, 12 users (9 censored)"))
	})

	It("puts the legend below the data and the axis, breaking a label wider than a column", func() {
		for _, f := range figure.PrintForms {
			g, err := restoreLike(f)
			Expect(err).NotTo(HaveOccurred())
			b, err := figure.Render(g, "svg")
			Expect(err).NotTo(HaveOccurred())
			in, err := figure.Inspect(b)
			Expect(err).NotTo(HaveOccurred())
			lowestTick, legendTop := 1e9, 0.0
			legend := 0
			for i, t := range in.Texts {
				switch {
				case t == "0.01" || t == "30":
					lowestTick = min(lowestTick, in.TextYs[i])
				case strings.Contains(t, "n = 3 runs") || strings.Contains(t, "bound"):
					legend++
					legendTop = max(legendTop, in.TextYs[i]+in.FontSizes[i])
				}
			}
			Expect(legend).To(BeNumerically(">=", 3), f.Name)
			Expect(legendTop).To(BeNumerically("<", lowestTick), f.Name+": every legend entry below the x axis' labels")
			Expect(g.Size().H).To(BeNumerically(">", f.H), "the legend adds to the plot's height")
			if f.Narrow() {
				Expect(len(in.Texts)).To(BeNumerically(">", len(g.Labels())+12), "the long label broken onto lines")
			}
		}
	})

	It("draws time on a log axis from 10 ms to 30 s, labelled at 1 and 3 of each decade", func() {
		var labels []string
		for _, t := range figure.LogTicks(figure.LogTimeMin, figure.LogTimeMax) {
			if t.Label != "" {
				labels = append(labels, t.Label)
			}
		}
		Expect(labels).To(Equal([]string{"0.01", "0.03", "0.1", "0.3", "1", "3", "10", "30"}))
		Expect(figure.LogTicks(0.08, 0.15)).To(HaveEach(HaveField("Label", Not(BeEmpty()))),
			"an axis without two labels at 1 and 3 labels every tick")
	})

	It("marks a bound as a vertical line in its colour, and keeps only the points that shape a step curve", func() {
		g, err := restoreLike(figure.ColumnForm)
		Expect(err).NotTo(HaveOccurred())
		b, err := figure.Render(g, "svg")
		Expect(err).NotTo(HaveOccurred())
		in, err := figure.Inspect(b)
		Expect(err).NotTo(HaveOccurred())
		xs := in.VerticalLines(figure.Hex(figure.SchemeColour(0)), "1.5,2")
		Expect(xs).To(HaveLen(1))
		one, ok1 := figure.TextX(b, "1")
		three, ok3 := figure.TextX(b, "3")
		Expect(ok1 && ok3).To(BeTrue())
		Expect(xs[0]).To(BeNumerically(">", one), "1.85 s lies between the ticks at 1 and 3 s")
		Expect(xs[0]).To(BeNumerically("<", three))

		steps := plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 0}, {X: 2, Y: 0}, {X: 2, Y: 0.5}, {X: 2, Y: 1},
			{X: 3, Y: 1}, {X: 50, Y: 1}}
		Expect(figure.ClampX(steps, 0.01, 30)).To(Equal(plotter.XYs{{X: 0.01, Y: 0}, {X: 2, Y: 0}, {X: 2, Y: 1},
			{X: 30, Y: 1}}))
	})
})

var _ = Describe("a figure's PDF", Label("unit"), func() {
	It("writes its text in the fonts' encoding: an en dash as such, an arrow spelled out", func() {
		g := figure.NewFig(figure.ColumnForm, "", "x", "y")
		g.Add("INVITE→200 n = 3–5 runs ≥ 1 µs", figure.LineThumb(figure.Dark, vg.Points(1), nil))
		b, err := figure.Render(g, "pdf")
		Expect(err).NotTo(HaveOccurred())
		text := pdfStreams(b)
		Expect(text).To(ContainSubstring("INVITE->200 n = 3\x965 runs >= 1 \xb5s"), "Windows-1252, as the PDF declares")
		Expect(text).NotTo(ContainSubstring("→"))
	})
})

// pdfStreams is every stream of a PDF, inflated where it is compressed.
func pdfStreams(pdf []byte) string {
	var out strings.Builder
	re := regexp.MustCompile(`(?s)stream\r?\n(.*?)\r?\nendstream`)
	for _, m := range re.FindAllSubmatch(pdf, -1) {
		if z, err := zlib.NewReader(bytes.NewReader(m[1])); err == nil {
			b, _ := io.ReadAll(z)
			out.Write(b)
			continue
		}
		out.Write(m[1])
	}
	return out.String()
}

var _ = Describe("a figure's ticks", Label("unit"), func() {
	It("are told apart by their labels, where gonum/plot's default labels some alike", func() {
		alike := func(ticks []plot.Tick) bool {
			labels := map[string]bool{}
			for _, t := range ticks {
				if t.Label != "" && labels[t.Label] {
					return true
				}
				labels[t.Label] = true
			}
			return false
		}
		defaults := 0
		for lo := 1.50; lo < 1.62; lo += 0.002 {
			for hi := 1.74; hi < 1.86; hi += 0.002 {
				if alike(plot.DefaultTicks{}.Ticks(lo, hi)) {
					defaults++
				}
				Expect(alike(figure.UniqueTicks{}.Ticks(lo, hi))).To(BeFalse(), "[%g, %g]", lo, hi)
			}
		}
		Expect(defaults).To(BeNumerically(">", 0), "the default labels some ticks alike in this range (1.65 and 1.7 as 1.7)")
	})
})
