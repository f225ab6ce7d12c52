package study_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/study"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// olderSummary is s as a summary.json written before restoration was timed at the answer: no timed_at, its service
// curve at the probes' start (a tenth of the answer's time) and service_answered at the answer.
func olderSummary(s *report.Summary) *report.Summary {
	b, err := json.Marshal(s)
	Expect(err).NotTo(HaveOccurred())
	var m map[string]any
	Expect(json.Unmarshal(b, &m)).To(Succeed())
	sv := m["survival"].(map[string]any)
	answered := sv["service"]
	var t []float64
	var ev []bool
	for _, u := range s.Users {
		if u.RestoreS != nil {
			t, ev = append(t, *u.RestoreS/10), append(ev, true)
		} else {
			t, ev = append(t, 40), append(ev, false)
		}
	}
	sv["service"], sv["service_answered"] = report.KaplanMeier(t, ev), answered
	for _, k := range []string{"timed_at", "setup_started", "legacy", "mt", "mo"} {
		delete(sv, k)
	}
	b, err = json.Marshal(m)
	Expect(err).NotTo(HaveOccurred())
	var old report.Summary
	Expect(json.Unmarshal(b, &old)).To(Succeed())
	for i := range old.Users {
		old.Users[i].RestoreS, old.Users[i].MTRestoreS, old.Users[i].MORestoreS = nil, nil, nil
	}
	return &old
}

// memberLoad is a P-CSCF pool's load around the kill of pcscf1: two survivors at 1.5× and 2× their own load
// before, and a spare with no load of its own before.
func memberLoad() *report.MemberLoad {
	return &report.MemberLoad{BeforeS: [2]float64{0, 20}, AfterS: [2]float64{25, 60}, Members: []report.MemberLoadRow{
		{Node: "pcscf1", Pool: "pcscf", Faulted: true, ReqPerSBefore: 10},
		{Node: "pcscf2", Pool: "pcscf", ReqPerSBefore: 10, ReqPerSAfter: 15},
		{Node: "pcscf3", Pool: "pcscf", ReqPerSBefore: 8, ReqPerSAfter: 16},
		{Node: "pcscf4", Pool: "pcscf", ReqPerSBefore: 0.2, ReqPerSAfter: 12},
		{Node: "scscf1", Pool: "scscf", ReqPerSBefore: 30, ReqPerSAfter: 30},
	}}
}

var _ = Describe("study figures for a paper", Label("unit"), func() {
	var (
		out string
		f   *fakeRunner
	)
	BeforeEach(func() {
		out = GinkgoT().TempDir()
		f = &fakeRunner{sum: func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			s := richSummary(sc, seed, dir)
			if strings.Contains(dir, "load-sharing") {
				s.Survival.BoundS = 12 // a scheme whose last node detects late: its own bound
			}
			return s
		}}
	})
	// execute runs the study's experiment p (two schemes, 3 runs each); printForms draws the print forms too
	// (slow under the race detector: only where a spec reads them).
	execute := func(printForms bool) *study.Result {
		body := strings.SplitN(twoExperiments(), "  - name: s\n", 2)[0]
		res, err := study.Execute(context.Background(), study.Config{Plan: planOf(body, false), File: "s.yaml",
			OutDir: out, Run: f.run, Out: GinkgoWriter, PrintForms: printForms,
			Provenance: study.Collect("", []string{"imslab", "study"})})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Experiments).To(HaveLen(1))
		return res
	}
	figureOf := func(e study.ExperimentResult, kind string) study.Figure {
		for _, fig := range e.Figures {
			if fig.Kind == kind {
				return fig
			}
		}
		Fail("no " + kind + " figure in " + e.Name)
		return study.Figure{}
	}

	It("draws every figure at 3.5 in and 7 in when asked, restoration on a log time axis from 10 ms to 30 s with each scheme's own bound in its colour, no pooled bound", func() {
		e := execute(true).Experiments[0]
		kinds := map[string]bool{}
		for _, fig := range e.Figures {
			checkPrintForms(out, fig)
			kinds[fig.Kind] = true
		}
		Expect(kinds).To(HaveKey("survivor_load"))
		Expect(kinds).To(HaveKey("kpi"))
		fig := figureOf(e, "restore")
		for _, name := range append([]string{fig.SVG}, fig.Print[1], fig.Print[4]) {
			b, err := os.ReadFile(filepath.Join(out, name))
			Expect(err).NotTo(HaveOccurred())
			in, err := figure.Inspect(b)
			Expect(err).NotTo(HaveOccurred())
			Expect(in.Texts).To(ContainElements("0.01", "0.1", "1", "10", "30"), name+": log time axis")
			Expect(in.Text()).NotTo(ContainSubstring("mean of n ="), "no pooled bound")
			x001, ok1 := figure.TextX(b, "0.01")
			x30, ok2 := figure.TextX(b, "30")
			Expect(ok1 && ok2).To(BeTrue())
			// Where a time falls on the log axis, as a share of the way from 0.01 s to 30 s (label edges: ± 0.04).
			at := func(t float64) float64 { return math.Log(t/0.01) / math.Log(30/0.01) }
			for i, want := range []float64{1.85, 12} {
				xs := in.VerticalLines(figure.Hex(figure.SchemeColour(i)), "1.5,2")
				Expect(xs).To(HaveLen(1), "%s: %s's bound in its colour", name, e.Variants[i].Variant)
				Expect((xs[0]-x001)/(x30-x001)).To(BeNumerically("~", at(want), 0.04), name)
			}
		}
		Expect(fig.Caption).To(ContainSubstring("quasi-pool 1.85 s (runs 1.85–1.85 s)"))
		Expect(fig.Caption).To(ContainSubstring("load-sharing+ignore-504 12.00 s"))
		for _, fig := range e.Figures {
			Expect(fig.Kind).NotTo(Equal("post_dial_delay"), "no run has a post-dial delay")
		}
	})

	It("draws the screen forms alone unless asked for the print forms (the committed studies keep those), and says where the print forms come from", func() {
		res := execute(false)
		Expect(res.Experiments[0].Figures).NotTo(BeEmpty())
		for _, fig := range res.Experiments[0].Figures {
			Expect(fig.Print).To(BeEmpty())
			Expect(filepath.Join(out, fig.SVG)).To(BeAnExistingFile())
		}
		files, err := filepath.Glob(filepath.Join(out, study.DirFigures, "*"))
		Expect(err).NotTo(HaveOccurred())
		for _, f := range files {
			Expect(figure.IsPrintForm(filepath.Base(f))).To(BeFalse(), f)
		}
		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("`imslab results <study>` draws the print forms again"))
	})

	It("draws an older summary's answered curve with its probe-start curve dashed as setup started", func() {
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			return olderSummary(richSummary(sc, seed, dir))
		}
		e := execute(false).Experiments[0]
		fig := figureOf(e, "restore")
		Expect(fig.Caption).To(ContainSubstring("Dashed: the same users' setup started (the probe placed)"))
		b, err := os.ReadFile(filepath.Join(out, fig.SVG))
		Expect(err).NotTo(HaveOccurred())
		in, err := figure.Inspect(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(in.Text()).To(ContainSubstring("setup started (probe placed)"))
		Expect(in.Text()).To(MatchRegexp(`quasi-pool: n = 3 runs, \d+ users \(0 censored\)`),
			"its users lost their own restore times when converted: the answered curve's points give them back")
		_, _, src := study.RestoreTimes(olderSummary(richSummary(&scenario.Scenario{}, 104, "")))
		Expect(src).To(Equal("curve"))
		dashed := 0
		for _, p := range in.Paths {
			if strings.Contains(strings.ToLower(p.Style), "stroke:"+figure.Hex(figure.SchemeColour(0))) &&
				strings.Contains(p.Style, "stroke-dasharray:5,3") {
				dashed++
			}
		}
		Expect(dashed).To(Equal(1), "quasi-pool's setup-started curve")
	})

	It("draws each survivor's load after the fault against its own before, per survivor and run", func() {
		e := execute(false).Experiments[0]
		fig := figureOf(e, "survivor_load") // its print forms: the spec of every figure's (figures_test.go)
		text := svgText(filepath.Join(out, fig.SVG))
		Expect(text).To(ContainSubstring("quasi-pool: n = 3 runs, 6 survivors, mean 1.75, max 2"),
			"pcscf2 at 1.5 and pcscf3 at 2 in each of 3 runs; the spare and the other pool are not in it")
		Expect(text).To(ContainSubstring("load-sharing+ignore-504: n = 3 runs, 6 survivors"))
		Expect(fig.Caption).To(ContainSubstring("faulted pool (pcscf)"))
		Expect(fig.Caption).To(ContainSubstring("6 survivors (over all runs) had no load of their own"))
	})

	It("draws the post-dial delay's ECDF from the summaries that have it, and nothing from those that do not", func() {
		Expect(os.MkdirAll(filepath.Join(out, study.DirFigures), 0o755)).To(Succeed())
		pdd := func(ring, answer string) []byte {
			return []byte(`{"post_dial_delay": {"calls": 3, "answered": 2, "invite_to_180_ms": {"count": 2, "values": ` +
				ring + `}, "invite_to_200_ms": {"count": 2, "values": ` + answer + `}}}`)
		}
		fig, ok, err := study.PostDialDelayFigure(out, "p", []string{"quasi-pool", "n-plus-1"}, [][][]byte{
			{pdd("[80, 1500]", "[100, 2100]"), pdd("[90]", "[120, 130]"), []byte(`{"scenario": "older"}`)},
			{pdd("[4000]", "[9000]")}})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(fig.Kind).To(Equal("post_dial_delay"))
		checkPrintForms(out, fig)
		text := svgText(filepath.Join(out, fig.SVG))
		Expect(text).To(ContainSubstring("quasi-pool INVITE→200: n = 2 runs, 4 calls"))
		Expect(text).To(ContainSubstring("quasi-pool INVITE→180: n = 2 runs, 3 calls"))
		Expect(text).To(ContainSubstring("n-plus-1 INVITE→200: n = 1 runs, 1 calls"))
		Expect(text).To(ContainSubstring("post-dial delay (s, log scale)"))
		for _, l := range []string{"0.1", "1"} {
			Expect(strings.Split(text, "\n")).To(ContainElement(l), "seconds on the log axis (80 ms to 9 s)")
		}

		_, ok, err = study.PostDialDelayFigure(out, "q", []string{"quasi-pool"}, [][][]byte{{[]byte(`{}`)}})
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeFalse(), "no summary with post_dial_delay: no figure")
	})
})
