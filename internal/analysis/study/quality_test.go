package study_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/provenance"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/study"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// oneExperiment is a study of one experiment, two schemes, repeat runs.
func oneExperiment(repeat string, extra string) string {
	return `
name: t
out: unused
experiments:
  - name: p
    scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `
    schemes: [quasi-pool, load-sharing+ignore-504]
    seed: 100
    repeat: ` + repeat + `
` + extra
}

func valid() *report.Health {
	return &report.Health{Valid: true, Samples: 60, CPUs: 2, Load1Median: 1.4}
}
func overload() *report.Health {
	return &report.Health{Valid: false, Samples: 60, CPUs: 2, Load1Median: 2.6,
		Reasons: []string{"the machine's runnable load exceeded its CPUs (1-minute load average median 2.60 on 2 CPUs)"}}
}

// writeBinaries records a run's binaries as the lab does, all of one revision.
func writeBinaries(dir, rev string, dirty bool) {
	b := lab.Binaries{Dir: "/cache", Built: true, Binaries: []provenance.Binary{
		{Name: "pcscf", Revision: rev, Modified: dirty}, {Name: "scscf", Revision: rev, Modified: dirty}}}
	raw, err := json.Marshal(b)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, lab.BinariesFile), raw, 0o644)).To(Succeed())
}

var _ = Describe("run health in a study", Label("unit"), func() {
	var (
		out string
		f   *fakeRunner
		log *bytes.Buffer
	)
	BeforeEach(func() {
		out, f, log = GinkgoT().TempDir(), &fakeRunner{}, &bytes.Buffer{}
	})
	execute := func(p *study.Plan) (*study.Result, error) {
		return study.Execute(context.Background(), study.Config{Plan: p, File: "s.yaml", OutDir: out, Run: f.run,
			Out: log, NoFigures: true, Provenance: study.Collect("", nil)})
	}

	It("sets an invalid run aside as <dir>.invalid-k and runs its seed again, at most max_reruns times", func() {
		var mu sync.Mutex
		attempts := map[string]int{}
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			s := fakeSummary(sc, seed)
			mu.Lock()
			defer mu.Unlock()
			attempts[dir]++
			s.Health = valid()
			switch {
			case strings.HasSuffix(dir, "quasi-pool/rep1") && attempts[dir] == 1:
				s.Health = overload() // invalid once, then valid
			case strings.HasSuffix(dir, "load-sharing+ignore-504/rep2"):
				s.Health = overload() // invalid every time
			}
			return s
		}
		res, err := execute(planOf(oneExperiment("3", ""), false))
		Expect(err).NotTo(HaveOccurred())
		Expect(attempts[filepath.Join(out, "p", "quasi-pool", "rep1")]).To(Equal(2))
		Expect(attempts[filepath.Join(out, "p", "load-sharing+ignore-504", "rep2")]).To(Equal(1 + study.DefaultMaxReruns))
		Expect(filepath.Join(out, "p", "quasi-pool", "rep1.invalid-1", report.FileSummary)).To(BeAnExistingFile())
		Expect(filepath.Join(out, "p", "load-sharing+ignore-504", "rep2.invalid-2")).To(BeADirectory())
		Expect(filepath.Join(out, "p", "load-sharing+ignore-504", "rep2.invalid-3")).NotTo(BeAnExistingFile())

		qp, ls := res.Experiments[0].Variants[0], res.Experiments[0].Variants[1]
		Expect(qp.Runs).To(Equal(3), "its seed ran again and was valid")
		Expect(qp.Invalid).To(BeZero())
		Expect(qp.SetAside).To(Equal([]string{"p/quasi-pool/rep1.invalid-1"}))
		Expect(ls.Runs).To(Equal(2), "the last invalid run is left out")
		Expect(ls.Invalid).To(Equal(1))
		Expect(ls.InvalidRuns).To(ConsistOf(ContainSubstring("p/load-sharing+ignore-504/rep2: the machine's runnable load")))
		Expect(ls.Seeds).To(Equal([]int64{100, 102}))
		Expect(ls.Metric("time_to_detect_s").Stat.Runs).To(Equal(2))
		Expect(res.RunsInvalid).To(Equal(1))
		Expect(log.String()).To(ContainSubstring("INVALID"))
		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("**1 invalid runs left out**"))
		Expect(string(md)).To(ContainSubstring("3 invalid runs set aside and their seeds run again"))

		By("a resumed study runs nothing again: the seed used its reruns")
		n := len(f.calls)
		_, err = execute(planOf(oneExperiment("3", ""), false))
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(HaveLen(n))
	})

	It("runs an invalid run found done again on resume, and never with max_reruns: 0", func() {
		bad := true
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			s := fakeSummary(sc, seed)
			s.Health = valid()
			if bad {
				s.Health = overload()
			}
			return s
		}
		res, err := execute(planOf(oneExperiment("1", `max_reruns: 0
claims:
  - id: c
    text: the pool restores users
    checks: [{experiment: p, scheme: quasi-pool, kpi: restored_at_bound, op: ">=", value: 0.2}]
`), false))
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(HaveLen(2), "no rerun")
		Expect(res.Claims[0].Verdict).To(Equal(study.VerdictInconclusive), "no valid run: no evidence either way")
		Expect(res.Claims[0].Checks[0].Invalid).To(Equal(1))
		st, err := study.States(planOf(oneExperiment("1", "max_reruns: 0\n"), false), out)
		Expect(err).NotTo(HaveOccurred())
		Expect(st).To(Equal([]string{"done, invalid (left out)", "done, invalid (left out)"}))
		st, err = study.States(planOf(oneExperiment("1", ""), false), out)
		Expect(err).NotTo(HaveOccurred())
		Expect(st).To(HaveEach("done, invalid (set aside and run again)"), "what --dry-run prints")
		bad = false
		res, err = execute(planOf(oneExperiment("1", ""), false))
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(HaveLen(4), "the invalid runs found done ran again")
		Expect(res.Experiments[0].Variants[0].Runs).To(Equal(1))
		Expect(res.Experiments[0].Variants[0].SetAside).To(Equal([]string{"p/quasi-pool/rep1.invalid-1"}))
	})

	It("lists the runs without a health record as health unknown and keeps them", func() {
		res, err := execute(planOf(oneExperiment("2", ""), false)) // fakeSummary records no health
		Expect(err).NotTo(HaveOccurred())
		v := res.Experiments[0].Variants[0]
		Expect(v.Runs).To(Equal(2))
		Expect(v.HealthUnknown).To(Equal([]string{"p/quasi-pool/rep1", "p/quasi-pool/rep2"}))
		Expect(res.RunsHealthUnknown).To(Equal(4))
		md, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("Run health unknown for 4 runs"))
	})
})

var _ = Describe("the build of a study's binaries", Label("unit"), func() {
	var (
		out string
		f   *fakeRunner
	)
	BeforeEach(func() { out, f = GinkgoT().TempDir(), &fakeRunner{} })
	execute := func(p *study.Plan) (*study.Result, error) {
		return study.Execute(context.Background(), study.Config{Plan: p, File: "s.yaml", OutDir: out, Run: f.run,
			Out: &bytes.Buffer{}, NoFigures: true, Provenance: study.Collect("", nil)})
	}
	// builds writes binaries.json into each run: rev for all but the runs of seed 101, which get other.
	builds := func(rev, other string, dirty bool) {
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
			r := rev
			if seed == 101 {
				r = other
			}
			writeBinaries(dir, r, dirty)
			return fakeSummary(sc, seed)
		}
	}
	const a, b = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

	It("aggregates runs of one build and says so", func() {
		builds(a, a, true)
		res, err := execute(planOf(oneExperiment("2", ""), false))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Provenance.BuildCheck).To(Equal("one build: aaaaaaaaaaaa+dirty"))
		Expect(res.Provenance.Builds["aaaaaaaaaaaa+dirty"]).To(HaveLen(4))
	})

	It("fails on a mix of builds as soon as the first run of another build is made, naming the builds and their runs", func() {
		builds(a, b, false)
		_, err := execute(planOf(oneExperiment("2", ""), false))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("runs of 2 builds: aaaaaaaaaaaa (p/quasi-pool/rep1, " +
			"p/load-sharing+ignore-504/rep1); bbbbbbbbbbbb (p/quasi-pool/rep2)"))
		Expect(err.Error()).To(ContainSubstring("builds: any"))
		Expect(f.calls).To(HaveLen(3), "the study stopped there")
		Expect(study.ExitCode(err)).To(Equal(study.ExitError))
	})

	It("aggregates a mix the study file allows, with builds: any or a list, and lists the builds", func() {
		builds(a, b, false)
		res, err := execute(planOf(oneExperiment("2", "builds: any\n"), false))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Provenance.Builds).To(HaveLen(2))
		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("| runs of build `bbbbbbbbbbbb` | 2: p/quasi-pool/rep2, p/load-sharing+ignore-504/rep2 |"))

		out = GinkgoT().TempDir()
		_, err = execute(planOf(oneExperiment("2", "builds: [aaaaaaa, bbbbbbb]\n"), false))
		Expect(err).NotTo(HaveOccurred())
		out = GinkgoT().TempDir()
		_, err = execute(planOf(oneExperiment("2", "builds: [aaaaaaa]\n"), false))
		Expect(err).To(MatchError(ContainSubstring("builds bbbbbbbbbbbb are not in the study file's builds (aaaaaaa)")))
		_, err = study.Parse([]byte(oneExperiment("2", "builds: some\n")))
		Expect(err).To(MatchError(ContainSubstring(`builds: "some": want "any" or a list of revisions`)))
	})

	It("skips the check for runs without binaries.json, and says so", func() {
		res, err := execute(planOf(oneExperiment("2", ""), false))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Provenance.BuildCheck).To(HavePrefix(study.BuildCheckSkipped))
		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("| build of the binaries | build check skipped: no run has binaries.json"))
	})
})

var _ = Describe("a study's declared n", Label("unit"), func() {
	var out string
	BeforeEach(func() { out = GinkgoT().TempDir() })
	execute := func(body string) (*study.Result, error) {
		return study.Execute(context.Background(), study.Config{Plan: planOf(body, false), File: "s.yaml",
			OutDir: out, Run: (&fakeRunner{}).run, Out: &bytes.Buffer{}, NoFigures: true,
			Provenance: study.Collect("", nil)})
	}
	claim := `claims:
  - id: takeover
    text: the pool restores users
    checks: [{experiment: p, scheme: quasi-pool, kpi: restored_at_bound, op: ">=", value: 0.2}]
`

	It("refuses to run when repeat rose after the runs, unless the raise is recorded, and shows it with the verdict", func() {
		_, err := execute(oneExperiment("2", claim))
		Expect(err).NotTo(HaveOccurred())
		_, err = execute(oneExperiment("3", claim))
		Expect(err).To(MatchError(ContainSubstring("experiment p: repeat rose from 2 to 3 after its runs were made; " +
			"record the raise in the study file's n_raised")))
		Expect(filepath.Join(out, "p", "quasi-pool", "rep3")).NotTo(BeAnExistingFile(), "nothing ran")

		res, err := execute(oneExperiment("3", claim+`n_raised:
  - {experiment: p, from: 2, to: 3, why: "inconclusive at n = 2"}
`))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Claims[0].NRaised).To(ConsistOf(study.NRaise{Experiment: "p", From: 2, To: 3, Why: "inconclusive at n = 2"}))
		md, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("**supported**<br>n raised from 2 to 3 after runs were made (p): inconclusive at n = 2"))
	})

	It("checks n_raised and versus as it checks every field", func() {
		_, err := study.Parse([]byte(oneExperiment("3", `n_raised:
  - {experiment: nope, from: 2, to: 3, why: x}
  - {experiment: p, from: 3, to: 2, why: x}
  - {experiment: p, from: 2, to: 5, why: ""}
max_reruns: -2
claims:
  - id: a
    text: x
    checks: [{experiment: p, scheme: quasi-pool, versus: n-plus-1, kpi: restored_at_end, op: ">=", value: 1}]
  - id: b
    text: x
    checks: [{experiment: p, scheme: quasi-pool, versus: quasi-pool, kpi: restored_at_end, op: ">=", value: 1}]
`)))
		Expect(err).To(HaveOccurred())
		for _, m := range []string{
			`n_raised[0].experiment: "nope" is not an experiment of the study`,
			`n_raised[1]: from 3 to 2: want 1 ≤ from < to`,
			`n_raised[2].to: 5: more than the experiment's repeat 3`,
			`n_raised[2].why: missing`,
			`max_reruns: must be -1 (never) or more, is -2`,
			`claims[0].checks[0].versus: "n-plus-1" is not a scheme of experiment "p"`,
			`claims[1].checks[0].versus: "quasi-pool": a scheme against itself`,
		} {
			Expect(err.Error()).To(ContainSubstring(m))
		}
	})

	It("calls a check of one run inconclusive: one run has no interval", func() {
		res, err := execute(oneExperiment("1", claim))
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Claims[0].Verdict).To(Equal(study.VerdictInconclusive))
		Expect(res.Claims[0].Checks[0].CILow).To(BeNil())
		md, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("1 [no CI: 1 run] (1 runs) → inconclusive"))
	})
})
