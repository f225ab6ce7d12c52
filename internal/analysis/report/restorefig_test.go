package report_test

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/report"
)

// survivalOf is a run's survival as summary.json holds it: 8 probed users, answered between 2.2 and 3.6 s after
// the fault, 2 of them never (censored at 40 s), bound 2.67 s; old adds the probes' start (a tenth of the answer)
// as an older summary wrote it, before restoration was timed at the answer.
func survivalOf(old bool) *report.Survival {
	t := []float64{2.2, 2.4, 2.5, 2.9, 3.1, 3.6, 40, 40}
	ev := []bool{true, true, true, true, true, true, false, false}
	start := make([]float64, len(t))
	for i := range t {
		start[i] = t[i] / 10
	}
	answered, started := report.KaplanMeier(t, ev), report.KaplanMeier(start, ev)
	sv := map[string]any{"timed_at": "answer", "interval_s": 0.5, "users": 8, "observed_s": 40, "bound_s": 2.67,
		"service": answered, "mt": answered, "mo": answered}
	if old {
		sv = map[string]any{"interval_s": 0.5, "users": 8, "observed_s": 40, "bound_s": 2.67, "detected_s": 2.17,
			"service": started, "service_answered": answered}
	}
	b, err := json.Marshal(map[string]any{"survival": sv})
	Expect(err).NotTo(HaveOccurred())
	var s report.Summary
	Expect(json.Unmarshal(b, &s)).To(Succeed())
	return s.Survival
}

var _ = Describe("the run's restoration figure", Label("unit"), func() {
	write := func(sv *report.Survival) (string, []string) {
		dir := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(dir, report.DirPlots), 0o755)).To(Succeed())
		files, svg, err := report.WriteRestoreFigure(dir, sv, true)
		Expect(err).NotTo(HaveOccurred())
		Expect(svg).NotTo(BeEmpty())
		return dir, files
	}

	It("comes as the screen SVG and PNG and, at 3.5 in and 7 in, as PDF, SVG and PNG with fonts of at least 8 pt", func() {
		dir, files := write(survivalOf(false))
		Expect(files).To(ConsistOf("plots/restore.svg", "plots/restore.png",
			"plots/restore.col.pdf", "plots/restore.col.svg", "plots/restore.col.png",
			"plots/restore.full.pdf", "plots/restore.full.svg", "plots/restore.full.png"))
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dir, f))
			Expect(err).NotTo(HaveOccurred())
			width := map[string]float64{"col": 3.5, "full": 7, "svg": 7, "png": 7}[strings.Split(filepath.Base(f), ".")[1]]
			switch filepath.Ext(f) {
			case ".pdf":
				Expect(b).To(HavePrefix("%PDF-"), f)
			case ".svg":
				in, err := figure.Inspect(b)
				Expect(err).NotTo(HaveOccurred(), f)
				Expect(in.W).To(BeNumerically("~", width*72, 0.01), f)
				Expect(in.MinFontSize()).To(BeNumerically(">=", 8), f)
			case ".png":
				img, err := png.Decode(bytes.NewReader(b))
				Expect(err).NotTo(HaveOccurred(), f)
				dpi := 300.0
				if f == "plots/restore.png" {
					dpi = 150
				}
				Expect(img.Bounds().Dx()).To(Equal(int(width*dpi)), f)
			}
		}
	})

	It("draws time on a log axis, the band filled with its edges drawn, the bound in the curve's colour, the legend below", func() {
		dir, _ := write(survivalOf(false))
		for _, f := range []string{"plots/restore.svg", "plots/restore.col.svg", "plots/restore.full.svg"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			Expect(err).NotTo(HaveOccurred())
			in, err := figure.Inspect(b)
			Expect(err).NotTo(HaveOccurred())
			Expect(in.Texts).To(ContainElements("0.01", "0.1", "1", "10", "30"), f)
			red := figure.Hex(figure.Red)
			Expect(in.VerticalLines(red, "1.5,2")).To(HaveLen(1), f+": the bound")
			fill, edges := 0, 0
			for _, p := range in.Paths {
				st := strings.ToLower(p.Style)
				switch {
				case strings.Contains(st, "fill-opacity"): // the band is the figure's only translucent fill
					fill++
				case strings.Contains(st, "stroke-opacity") && strings.Contains(st, "stroke-width:0.5"):
					edges++
				}
			}
			Expect(fill).To(BeNumerically(">=", 1), f+": the band, filled")
			Expect(edges).To(Equal(2), f+": the band's edges")
			lowestTick, legendTop := 1e9, 0.0
			for i, t := range in.Texts {
				switch {
				case t == "0.01" || t == "30":
					lowestTick = min(lowestTick, in.TextYs[i])
				case strings.HasPrefix(t, "MT and MO answered") || strings.HasPrefix(t, "bound"):
					legendTop = max(legendTop, in.TextYs[i]+in.FontSizes[i])
				}
			}
			Expect(legendTop).To(BeNumerically(">", 0))
			Expect(legendTop).To(BeNumerically("<", lowestTick), f+": the legend below the axis")
			Expect(in.Text()).To(ContainSubstring("MT and MO answered, n = 8 (2 censored), 95 % band"))
			Expect(in.Text()).NotTo(ContainSubstring("setup started"), "no setup-started curve in this summary")
		}
	})

	It("is the screen SVG and PNG alone without the print forms (a study's runs)", func() {
		dir := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(dir, report.DirPlots), 0o755)).To(Succeed())
		files, _, err := report.WriteRestoreFigure(dir, survivalOf(false), false)
		Expect(err).NotTo(HaveOccurred())
		Expect(files).To(ConsistOf("plots/restore.svg", "plots/restore.png"))
		Expect(filepath.Join(dir, "plots/restore.col.pdf")).NotTo(BeAnExistingFile())
	})

	It("draws an empty survival (no probed user, no bound) without a curve and without an error", func() {
		dir, files := write(&report.Survival{})
		Expect(files).To(HaveLen(8))
		b, err := os.ReadFile(filepath.Join(dir, "plots/restore.col.svg"))
		Expect(err).NotTo(HaveOccurred())
		in, err := figure.Inspect(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(in.Text()).NotTo(ContainSubstring("answered"))
		Expect(in.Texts).To(ContainElements("0.01", "30"))
	})

	It("draws an older summary's answered curve, and its probe-start curve dashed as setup started", func() {
		dir, _ := write(survivalOf(true))
		b, err := os.ReadFile(filepath.Join(dir, "plots/restore.col.svg"))
		Expect(err).NotTo(HaveOccurred())
		in, err := figure.Inspect(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(in.Text()).To(ContainSubstring("setup started (probe placed)"))
		Expect(in.Text()).To(ContainSubstring("MT and MO answered, n = 8 (2 censored)"))
	})
})
