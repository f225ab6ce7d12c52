package study_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/stats"
	"github.com/imslab/quasipool/internal/analysis/study"
)

var _ = Describe("the study's claims", Label("unit"), func() {
	claims := `
claims:
  - id: takeover
    text: the pool takes over in real time
    checks:
      - {experiment: p, scheme: quasi-pool, kpi: restored_at_bound, op: ">=", value: 0.99}
      - {experiment: s, scheme: as-is, kpi: restored_at_end, op: ">=", value: 0.99}
  - id: no-takeover
    text: load sharing restores nobody in real time
    checks:
      - {experiment: p, scheme: load-sharing+ignore-504, kpi: restored_at_bound, op: ">=", value: 0.99}
  - id: detect
    text: detection within 1.6 s
    checks:
      - {experiment: p, scheme: quasi-pool, kpi: time_to_detect_s, op: "<=", value: 1.6}
  - id: headroom
    text: every member needs a third more
    checks:
      - {experiment: p, scheme: quasi-pool, kpi: peak_load_ratio, op: "<=", value: 1.5}
  - id: perceived
    text: users barely notice
    not_measurable: no call of their own in the window
  - id: takeover-some
    text: the pool restores some users in real time
    checks:
      - {experiment: p, scheme: quasi-pool, kpi: restored_at_bound, op: ">=", value: 0.2}
  - id: faster
    text: the pool serves users 10 s sooner than load sharing
    checks:
      - {experiment: p, scheme: quasi-pool, versus: load-sharing+ignore-504, kpi: mo_interruption_s, op: "<=", value: -10}
  - id: restores-more
    text: the pool restores half the users more than load sharing
    checks:
      - {experiment: p, scheme: quasi-pool, versus: load-sharing+ignore-504, kpi: restored_at_bound, op: ">=", value: 0.5}
`

	It("refuses claims that name no experiment, scheme, KPI or operator of the study, and says which field", func() {
		_, err := study.Load(writeStudy(twoExperiments() + `
claims:
  - id: a
    text: x
    checks:
      - {experiment: nope, scheme: quasi-pool, kpi: restored_at_end, op: ">=", value: 1}
      - {experiment: p, scheme: n-plus-1, kpi: "", op: "=>", value: 1}
  - id: a
    text: ""
    not_measurable: why
    checks: [{experiment: p, scheme: quasi-pool, kpi: restored_at_end, op: ">", value: 0}]
`))
		Expect(err).To(HaveOccurred())
		for _, m := range []string{
			`claims[0].checks[0].experiment: "nope" is not an experiment of the study`,
			`claims[0].checks[1].scheme: "n-plus-1" is not a scheme of experiment "p"`,
			`claims[0].checks[1].kpi: missing`,
			`claims[0].checks[1].op: "=>": one of >=, <=, >, <`,
			`claims[1].id: "a" given twice`,
			`claims[1].text: missing`,
			`claims[1]: give either checks or not_measurable`,
		} {
			Expect(err.Error()).To(ContainSubstring(m))
		}
	})

	It("reads a claim on a sweep at every value, or at one point named <experiment>@<param>=<value>", func() {
		sweep := `
name: t
out: unused
experiments:
  - name: n
    scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `
    schemes: [quasi-pool, load-sharing+ignore-504]
    seed: 100
    repeat: 3
    sweep: {param: pool_size, values: [2, 3]}
`
		_, err := study.Load(writeStudy(sweep + `
claims:
  - id: a
    text: x
    checks: [{experiment: "n@pool_size=4", scheme: quasi-pool, kpi: restored_at_end, op: ">=", value: 1}]
`))
		Expect(err).To(MatchError(ContainSubstring(`claims[0].checks[0].experiment: "n@pool_size=4" is not an experiment of the study`)))

		res, err := study.Execute(context.Background(), study.Config{Plan: planOf(sweep+`
claims:
  - id: every-n
    text: the pool takes over at every size
    checks: [{experiment: n, scheme: quasi-pool, kpi: restored_at_bound, op: ">=", value: 0.2}]
  - id: at-three
    text: load sharing takes over at N = 3
    checks: [{experiment: "n@pool_size=3", scheme: load-sharing+ignore-504, kpi: restored_at_bound, op: ">=", value: 0.99}]
`, false), File: "s.yaml", OutDir: GinkgoT().TempDir(), Run: (&fakeRunner{}).run, Out: &bytes.Buffer{},
			NoFigures: true, Provenance: study.Collect("", nil)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Claims).To(HaveLen(2))
		every := res.Claims[0]
		Expect(every.Verdict).To(Equal(study.VerdictSupported))
		Expect(every.Checks).To(HaveLen(2), "one check per value of the sweep")
		Expect(every.Checks[0].Experiment).To(Equal("n@pool_size=2"))
		Expect(every.Checks[1].Experiment).To(Equal("n@pool_size=3"))
		Expect(every.Checks[1].Runs).To(Equal(3))
		Expect(res.Claims[1].Verdict).To(Equal(study.VerdictRefuted))
		Expect(res.Claims[1].Checks).To(HaveLen(1))
	})

	It("gives each claim its verdict from the runs' CIs, the weakest check deciding, provisional while runs are pending", func() {
		f := &fakeRunner{}
		out := GinkgoT().TempDir()
		run := func(out string) (*study.Result, error) {
			return study.Execute(context.Background(), study.Config{Plan: planOf(twoExperiments()+claims, false),
				File: "s.yaml", OutDir: out, Run: f.run, Out: &bytes.Buffer{}, NoFigures: true,
				Provenance: study.Collect("", nil)})
		}
		res, err := run(out)
		Expect(err).NotTo(HaveOccurred())
		verdict := map[string]study.ClaimResult{}
		for _, c := range res.Claims {
			verdict[c.ID] = c
		}
		Expect(verdict).To(HaveLen(8))
		// Restored 1 in every run of 3–5 users: 12 users × (1.96/t(2))² = 2.5 effective trials, never [1, 1].
		Expect(verdict["takeover"].Verdict).To(Equal(study.VerdictInconclusive), "3 runs cannot show ≥ 0.99")
		Expect(verdict["takeover"].Provisional).To(BeFalse())
		Expect(*verdict["takeover"].Checks[0].CILow).To(BeNumerically("~", 0.227, 1e-3))
		Expect(verdict["takeover"].Checks[0].Method).To(Equal(stats.MethodSharesUsers))
		Expect(verdict["takeover-some"].Verdict).To(Equal(study.VerdictSupported), "the interval excludes 0.2")
		Expect(verdict["no-takeover"].Verdict).To(Equal(study.VerdictRefuted), "restored 0 in every run: [0, 0.773]")
		Expect(verdict["faster"].Verdict).To(Equal(study.VerdictSupported), "30 s less in every pair of seeds")
		Expect(verdict["faster"].Checks[0].Method).To(Equal(stats.MethodPairedT))
		Expect(*verdict["faster"].Checks[0].Mean).To(BeNumerically("~", -30, 1e-9))
		Expect(verdict["restores-more"].Verdict).To(Equal(study.VerdictInconclusive), "3 pairs that all differ by 1")
		Expect(*verdict["restores-more"].Checks[0].CILow).To(BeNumerically("~", -0.415, 1e-3))
		Expect(verdict["restores-more"].Checks[0].Method).To(Equal(stats.MethodPairedShares))
		// time to detect 1.5, 1.6, 1.7 s in the three runs: the CI of the mean straddles 1.6
		Expect(verdict["detect"].Verdict).To(Equal(study.VerdictInconclusive))
		Expect(verdict["detect"].Checks[0].Runs).To(Equal(3))
		Expect(verdict["headroom"].Verdict).To(Equal(study.VerdictNotMeasurable), "no run has the KPI")
		Expect(verdict["perceived"].Verdict).To(Equal(study.VerdictNotMeasurable))
		Expect(verdict["perceived"].Reason).To(Equal("no call of their own in the window"))

		md, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("### The study's claims against these runs"))
		Expect(string(md)).To(ContainSubstring("| `no-takeover`: load sharing restores nobody in real time | **refuted** | p, " +
			"`load-sharing+ignore-504`: `restored_at_bound` >= 0.99: 0 [0, 0.773] Clopper–Pearson, effective n of " +
			"users (3 runs) → refuted |"))
		Expect(string(md)).To(ContainSubstring("`quasi-pool − load-sharing+ignore-504`: `mo_interruption_s` <= -10: " +
			"-30 [-30, -30] paired t (3 runs) → supported"))
		Expect(string(md)).To(ContainSubstring("| `perceived`: users barely notice | **not measurable** | no call of their own in the window |"))
		sm, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(sm)).To(ContainSubstring("## The study's claims against these runs"))

		By("a study with a failed run: the verdicts that read it say provisional")
		f.fail = func(dir string) bool {
			return filepath.Base(filepath.Dir(dir)) == "quasi-pool" && filepath.Base(dir) == "rep3"
		}
		res, err = run(GinkgoT().TempDir())
		Expect(err).To(MatchError(study.ErrRunsFailed))
		Expect(res.Claims[0].Verdict).To(Equal(study.VerdictInconclusive))
		Expect(res.Claims[0].Provisional).To(BeTrue())
		Expect(res.Claims[0].Checks[0].Runs).To(Equal(2))
		Expect(res.Claims[1].Provisional).To(BeFalse(), "load sharing's runs all have a report")
	})
})
