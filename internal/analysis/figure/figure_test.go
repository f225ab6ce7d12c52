package figure_test

import (
	"bytes"
	"image/png"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gonum.org/v1/plot/plotter"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

var _ = Describe("a figure", Label("unit"), func() {
	It("is written as an SVG whose fonts have fallbacks and a PNG at its size's resolution", func() {
		p := figure.NewStudy("restored", "time (s)", "share")
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
		Expect(err).NotTo(HaveOccurred())
		l.Color, l.Dashes = figure.SchemeColour(0), figure.CurveDash
		p.Add(l)
		p.Legend.Add("quasi-pool", l)
		svg, pngb, err := figure.SVGAndPNG(p, figure.Study)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(svg)).To(ContainSubstring("font-family:Liberation Serif,Times New Roman,Times,serif;"))
		Expect(string(svg)).NotTo(ContainSubstring("font-family:Liberation Serif;"))
		Expect(string(svg)).To(ContainSubstring("restored"))
		img, err := png.Decode(bytes.NewReader(pngb))
		Expect(err).NotTo(HaveOccurred())
		Expect(img.Bounds().Dx()).To(Equal(1050), "7 in at 150 dpi")
		Expect(img.Bounds().Dy()).To(Equal(630), "4.2 in at 150 dpi")
	})

	It("takes the study's font sizes for its title and legend", func() {
		p := figure.NewStudy("t", "x", "y")
		Expect(p.Title.TextStyle.Font.Size).To(Equal(figure.StudyTitle))
		Expect(p.Legend.TextStyle.Font.Size).To(Equal(figure.StudyLegend))
	})

	It("cycles through its colours: variants through the palette, schemes through Okabe–Ito, members through six", func() {
		Expect(figure.PaletteColour(len(figure.Palette))).To(Equal(figure.Palette[0]))
		Expect(figure.SchemeColour(7)).To(Equal(figure.OkabeIto[0]))
		Expect(figure.SchemeColour(6)).To(Equal(figure.OkabeIto[6]))
		Expect(figure.MemberColour(6)).To(Equal(figure.OkabeIto[0]), "black is kept for totals")
		Expect(figure.Hex(figure.Blue)).To(Equal("#1f5fa8"))
		Expect(figure.Hex(figure.Cx)).To(Equal("#b35900"))
	})
})
