package study_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
	"github.com/imslab/quasipool/internal/analysis/study"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// richSummary is a fake run with reachability probes: n = 4 + seed%3 probed affected users; under a scheme whose
// phones ignore the 504 only the first user is restored (after 30 s), the others are censored at the end (40 s).
func richSummary(sc *scenario.Scenario, seed int64, _ string) *report.Summary {
	n := 4 + int(seed%3)
	ignore := sc.Traffic.OnRestoration504 == "ignore"
	s := &report.Summary{Scenario: sc.Name, Seed: seed, AffectedUsers: n,
		TimeToDetectS: map[string]float64{"bac": 1.5 + float64(seed%5)/10}}
	var t []float64
	var ev []bool
	for i := range n {
		u := report.UserKPI{IMPU: fmt.Sprintf("sip:user%04d@ims.test", i+1), Fault: "pcscf1", T0S: 20, Probed: true}
		mo := 0.3 + float64(i)/10 + float64(seed%7)/100
		mt := mo + 0.05
		if ignore {
			mo, mt = mo+30, mt+30
		}
		u.MOInterruptionS, u.MTInterruptionS = &mo, &mt
		if ignore && i > 0 {
			u.Censored = true
			t, ev = append(t, 40), append(ev, false)
		} else {
			r, m, o := mt, mt, mo
			u.RestoreS, u.MTRestoreS, u.MORestoreS = &r, &m, &o
			t, ev = append(t, r), append(ev, true)
		}
		s.Users = append(s.Users, u)
	}
	km := report.KaplanMeier(t, ev)
	s.Survival = &report.Survival{TimedAt: report.TimedAtAnswer, IntervalS: 0.25, Users: n, ObservedS: 40,
		DetectedFirstS: 1.2, DetectedLastS: 1.6, BoundS: 1.85,
		RestoredAtBound: km.At(1.85), MT: km, MO: km, Service: km, SetupStarted: km}
	return s
}

// withoutUserTimes is the summary as a trimmed or older summary.json has it: the curve, no per-user times.
func withoutUserTimes(s *report.Summary) *report.Summary {
	c := *s
	c.Users = nil
	for _, u := range s.Users {
		u.Probed, u.Censored, u.RestoreS, u.MTRestoreS, u.MORestoreS = false, false, nil, nil, nil
		c.Users = append(c.Users, u)
	}
	return &c
}

// svgText is every text node of an SVG document; it fails on a document that does not parse.
func svgText(path string) string {
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	d := xml.NewDecoder(bytes.NewReader(b))
	var text strings.Builder
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred(), path)
		switch x := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = x.Name.Local
			}
		case xml.CharData:
			text.Write(x)
			text.WriteByte('\n')
		}
	}
	Expect(root).To(Equal("svg"), path)
	return text.String()
}

var _ = Describe("study figures and results.md", Label("unit"), func() {
	var (
		out string
		f   *fakeRunner
		log *bytes.Buffer
		p   *study.Plan
		// noFigures: invocations that need no figures skip drawing (slow under the race detector).
		noFigures bool
	)
	BeforeEach(func() {
		out = GinkgoT().TempDir()
		log = &bytes.Buffer{}
		noFigures = false
		// p/quasi-pool rep 2 has no per-user restoration times in its summary: the curve's points stand in.
		f = &fakeRunner{sum: func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			s := richSummary(sc, seed, dir)
			if strings.HasSuffix(dir, filepath.Join("p", "quasi-pool", "rep2")) {
				return withoutUserTimes(s)
			}
			return s
		}}
		p = planOf(twoExperiments(), false)
	})
	execute := func(resultsOnly bool) (*study.Result, error) {
		cfg := study.Config{Plan: p, File: "s.yaml", OutDir: out, Run: f.run, Out: log, ResultsOnly: resultsOnly,
			NoFigures: noFigures, Provenance: study.Collect("", []string{"imslab", "study", "s.yaml"})}
		if resultsOnly {
			cfg.Run = nil
		}
		return study.Execute(context.Background(), cfg)
	}

	It("gets each run's restoration times from its users, or back from its Kaplan–Meier curve", func() {
		sc := &scenario.Scenario{}
		sc.Traffic.OnRestoration504 = "ignore"
		for _, s := range []*report.Summary{richSummary(&scenario.Scenario{}, 104, ""), richSummary(sc, 105, "")} {
			t, ev, src := study.RestoreTimes(s)
			Expect(src).To(Equal("users"))
			Expect(t).To(HaveLen(s.Survival.Service.N))
			t2, ev2, src2 := study.RestoreTimes(withoutUserTimes(s))
			Expect(src2).To(Equal("curve"))
			Expect(report.KaplanMeier(t2, ev2)).To(Equal(report.KaplanMeier(t, ev)), "the same curve from the points")
		}
		t, _, src := study.RestoreTimes(&report.Summary{AffectedUsers: 3})
		Expect(src).To(Equal("absent"))
		Expect(t).To(BeEmpty())
	})

	It("bands the pooled restoration curve by resampling whole runs, not users", func() {
		all := func(n int, v bool) []bool {
			b := make([]bool, n)
			for i := range b {
				b[i] = v
			}
			return b
		}
		grid := []float64{0.5, 2, 4}
		// Run A restores its 10 users at 1 s, run B at 3 s: between them the pooled curve is 0.5, and a resample
		// is A+A (1), B+B (0) or A+B (0.5): the band spans [0, 1] there. Resampling users would give a narrow band.
		lo, hi := study.CurveBand([][]float64{{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3}},
			[][]bool{all(10, true), all(10, true)}, grid, 7)
		Expect(lo).To(Equal([]float64{0, 0, 1}))
		Expect(hi).To(Equal([]float64{0, 1, 1}))
		// Identical runs: the band closes on the curve (users at 1 s restored, 2 of 4 censored at 5 s).
		t, ev := []float64{1, 1, 5, 5}, []bool{true, true, false, false}
		lo, hi = study.CurveBand([][]float64{t, t, t}, [][]bool{ev, ev, ev}, grid, 7)
		km := report.KaplanMeier(t, ev)
		for i, g := range grid {
			Expect(lo[i]).To(Equal(km.At(g)))
			Expect(hi[i]).To(Equal(km.At(g)))
		}
		Expect(hi).To(Equal([]float64{0, 0.5, 0.5}))
	})

	It("writes SVG and PNG figures with n in every legend, embeds them in study.md, and results.md holds study.json's numbers", func() {
		_, err := execute(false)
		Expect(err).NotTo(HaveOccurred())
		b, err := os.ReadFile(filepath.Join(out, study.FileJSON))
		Expect(err).NotTo(HaveOccurred())
		var res study.Result
		Expect(json.Unmarshal(b, &res)).To(Succeed())

		for _, e := range res.Experiments {
			kinds := map[string]bool{}
			for _, fig := range e.Figures {
				kinds[fig.Kind+fig.KPI] = true
				Expect(fig.SVG).To(HavePrefix(study.DirFigures + "/"))
				text := svgText(filepath.Join(out, fig.SVG))
				fh, err := os.Open(filepath.Join(out, fig.PNG))
				Expect(err).NotTo(HaveOccurred())
				img, err := png.Decode(fh)
				fh.Close()
				Expect(err).NotTo(HaveOccurred(), fig.PNG)
				Expect(img.Bounds().Dx()).To(Equal(1050), "7 in at 150 dpi")
				for _, v := range e.Variants {
					Expect(text).To(ContainSubstring(v.Variant), fig.SVG)
					n := v.Runs
					if fig.Kind == "restore_ecdf" && e.Name == "p" && v.Variant == "quasi-pool" {
						n-- // the run without per-user times is not in this one
					}
					Expect(text).To(MatchRegexp(`n = %d (runs|users)`, n), "n in the legend of "+fig.SVG)
				}
			}
			Expect(kinds).To(HaveKey("restore"))
			Expect(kinds).To(HaveKey("interruption_ecdf"))
			Expect(kinds).To(HaveKey("restore_ecdf"))
			Expect(e.FigureNotes).To(BeEmpty())
			for _, k := range []string{"affected_users", "time_to_detect_s", "restored_at_bound"} {
				Expect(kinds).To(HaveKey("kpi"+k), e.Name)
			}
		}

		// The pooled restoration curves: every quasi-pool user restored, load sharing's censored; the legend counts them.
		e := res.Experiments[0]
		restore := svgText(filepath.Join(out, e.Figures[0].SVG))
		qpUsers, lsUsers := e.Variants[0].AffectedUsers, e.Variants[1].AffectedUsers
		Expect(restore).To(ContainSubstring(fmt.Sprintf("quasi-pool: n = 3 runs, %d users (0 censored), 95 %% band", qpUsers)))
		Expect(restore).To(ContainSubstring(fmt.Sprintf("load-sharing+ignore-504: n = 3 runs, %d users (%d censored)",
			lsUsers, lsUsers-3)))
		Expect(e.Figures[0].Caption).To(ContainSubstring("quasi-pool: 1 of 3 runs"),
			"the run without per-user times is named in the caption")
		Expect(res.Experiments[1].Figures[0].Caption).To(ContainSubstring("from each run's summary.json"))
		ecdf := svgText(filepath.Join(out, e.Figures[1].SVG))
		Expect(ecdf).To(ContainSubstring(fmt.Sprintf("quasi-pool MT: n = 3 runs, %d of %d affected users", qpUsers, qpUsers)))
		Expect(e.Figures[2].Kind).To(Equal("restore_ecdf"))
		recdf := svgText(filepath.Join(out, e.Figures[2].SVG))
		Expect(recdf).To(ContainSubstring("load-sharing+ignore-504 MT: n = 3 runs, 3 of %d probed users restored", lsUsers),
			"one user restored per run, the others never")

		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("![Restoration curves](figures/p-restore.svg)"))
		rmd, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		for _, doc := range []string{string(md), string(rmd)} {
			links := regexp.MustCompile(`\]\((figures/[^)]+)\)`).FindAllStringSubmatch(doc, -1)
			Expect(links).NotTo(BeEmpty())
			for _, l := range links {
				Expect(filepath.Join(out, l[1])).To(BeAnExistingFile(), "a relative link that resolves")
			}
		}

		// results.md: one row per scheme with study.json's numbers, n runs / n users, and the provenance.
		g := func(x float64) string { return fmt.Sprintf("%.3g", x) }
		for _, e := range res.Experiments {
			Expect(string(rmd)).To(ContainSubstring("#### " + e.Name))
			for _, v := range e.Variants {
				row := ""
				for _, l := range strings.Split(string(rmd), "\n") {
					if strings.HasPrefix(l, "| "+v.Variant+" | ") && strings.Contains(rmd2section(string(rmd), e.Name), l) {
						row = l
					}
				}
				Expect(row).To(HavePrefix(fmt.Sprintf("| %s | %d / %d |", v.Variant, v.Runs, v.AffectedUsers)))
				for _, k := range []string{"affected_users", "detected_first_s", "detected_last_s", "restored_at_bound",
					"restored_at_5s", "mt_interruption_s"} {
					st := v.Metric(k).Stat
					Expect(row).To(ContainSubstring(fmt.Sprintf("%s [%s, %s]; median %s", g(st.Mean), g(st.MeanCI.Low),
						g(st.MeanCI.High), g(st.Median))), e.Name+"/"+v.Variant+" "+k)
				}
				Expect(row).To(ContainSubstring(fmt.Sprintf("(%d users)", v.AffectedUsers)), "a per-user KPI gives its users")
			}
		}
		Expect(string(rmd)).To(ContainSubstring("aggregated at commit `" + res.Provenance.Commit))
		Expect(string(rmd)).To(MatchRegexp("runs by commit: `[0-9a-f]{40}(\\+dirty)?` 8"))
		Expect(string(rmd)).To(ContainSubstring("runs by machine: `Test CPU, 2 cores, kernel 6.1`: 8"),
			"the machine that made the runs, not the one that aggregated them")
	})

	It("--results-only rewrites the outputs from the finished runs, runs nothing and reports the pending ones", func() {
		noFigures = true // drawing under the race detector is slow: only the results-only invocations draw
		_, err := execute(false)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.Remove(filepath.Join(out, "s", "as-is", "rep2", "expectations.json"))).To(Succeed())
		Expect(os.RemoveAll(filepath.Join(out, "p", "load-sharing+ignore-504", "rep3"))).To(Succeed())
		Expect(os.RemoveAll(filepath.Join(out, study.DirFigures))).To(Succeed())
		f.calls = nil
		log.Reset()
		noFigures = false
		res, err := execute(true)
		Expect(err).To(MatchError(study.ErrPending))
		Expect(err).To(MatchError(ContainSubstring("2 of 8 runs")))
		Expect(study.ExitCode(err)).To(Equal(study.ExitRuns))
		Expect(f.calls).To(BeEmpty())
		Expect(log.String()).To(ContainSubstring("s/as-is rep 2 (seed 201): unfinished, pending (results only: nothing is run)"))
		Expect(log.String()).To(ContainSubstring("p/load-sharing+ignore-504 rep 3 (seed 102): not run yet, pending"))
		Expect(filepath.Join(out, "s", "as-is", "rep2", report.FileSummary)).To(BeAnExistingFile(), "left as it is")
		Expect(res.RunsDone).To(Equal(6))
		Expect(res.Experiments[0].Variants[1].Runs).To(Equal(2))
		Expect(res.Experiments[0].Variants[1].Pending).To(Equal(1))
		Expect(res.Experiments[1].Variants[0].Pending).To(Equal(1))
		Expect(res.Experiments[0].Figures).NotTo(BeEmpty())
		Expect(filepath.Join(out, res.Experiments[0].Figures[0].PNG)).To(BeAnExistingFile())
		rmd, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(rmd)).To(ContainSubstring("6 of 8 planned runs with a report, 0 failed, 2 not run yet"))
		Expect(string(rmd)).To(ContainSubstring("| load-sharing+ignore-504 | 2 / "))
		Expect(string(rmd)).To(ContainSubstring("(1 pending, 0 failed)"))

		// Once the missing runs are done, results only succeeds.
		noFigures = true
		_, err = execute(false)
		Expect(err).NotTo(HaveOccurred())
		f.calls = nil
		_, err = execute(true)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(BeEmpty())
	})

	It("draws a band only from two runs, and no restoration curve without probes", func() {
		p = planOf(strings.Replace(twoExperiments(), "repeat: 3", "repeat: 1", 1), false)
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			if strings.Contains(dir, filepath.Join(out, "s")+string(filepath.Separator)) {
				return fakeSummary(sc, seed) // no per-user probe results, a curve without points
			}
			return richSummary(sc, seed, dir)
		}
		res, err := execute(false)
		Expect(err).NotTo(HaveOccurred())
		restore := svgText(filepath.Join(out, res.Experiments[0].Figures[0].SVG))
		Expect(restore).To(ContainSubstring("quasi-pool: n = 1 runs"))
		Expect(restore).To(ContainSubstring("no band (1 run)"))
		kpi := res.Experiments[0].Figures[len(res.Experiments[0].Figures)-1]
		Expect(kpi.KPI).To(Equal("restored_at_bound"))
		Expect(svgText(filepath.Join(out, kpi.SVG))).To(ContainSubstring("no CI: 1 run"))
		for _, fig := range res.Experiments[1].Figures {
			Expect(fig.Kind).NotTo(Equal("restore"), "the s runs have no restoration times")
		}
		Expect(res.Experiments[1].FigureNotes).To(ContainElement(HavePrefix("No restoration curves")))
		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("No restoration curves: the runs have no reachability probes"))
		Expect(stats.Resamples).To(BeNumerically(">=", 1000))
	})
})

// rmd2section is the part of results.md under the experiment's heading.
func rmd2section(md, exp string) string {
	i := strings.Index(md, "#### "+exp+"\n")
	if i < 0 {
		return ""
	}
	rest := md[i+1:]
	if j := strings.Index(rest, "#### "); j >= 0 {
		return rest[:j]
	}
	return rest
}
