package study_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/study"
	"github.com/imslab/quasipool/internal/topology"
)

// writeStudy writes a study file into a temporary directory; scenario paths in it are relative to the repo's
// scenarios/ through an absolute path.
func writeStudy(body string) string {
	dir := GinkgoT().TempDir()
	p := filepath.Join(dir, "s.yaml")
	Expect(os.WriteFile(p, []byte(body), 0o644)).To(Succeed())
	return p
}

func scenarioPath(name string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "..", "scenarios", name))
	Expect(err).NotTo(HaveOccurred())
	return p
}

var _ = Describe("study files", Label("unit"), func() {
	It("loads the shipped studies and plans them, quick and full", func() {
		files, err := filepath.Glob(filepath.Join("..", "..", "..", "studies", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(files)).To(BeNumerically(">=", 5))
		for _, f := range files {
			sf, err := study.Load(f)
			Expect(err).NotTo(HaveOccurred(), f)
			full, err := sf.Plan(false)
			Expect(err).NotTo(HaveOccurred(), f)
			quick, err := sf.Plan(true)
			Expect(err).NotTo(HaveOccurred(), f)
			Expect(len(quick.Runs)).To(BeNumerically("<", len(full.Runs)), f)
		}
		sf, err := study.Load(filepath.Join("..", "..", "..", "studies", "published.yaml"))
		Expect(err).NotTo(HaveOccurred())
		p, err := sf.Plan(false)
		Expect(err).NotTo(HaveOccurred())
		for _, e := range p.Experiments {
			Expect(e.Repeat).To(BeNumerically(">=", 20), e.Name)
			Expect(e.Base.Traffic.IdleShare).To(BeNumerically(">", 0), e.Name)
			Expect(e.Base.Traffic.MTOnlyShare).To(BeNumerically(">", 0), e.Name)
		}
		Expect(p.Experiments[1].Base.Faults[0].Target).To(Equal("random:scscf"))
	})

	It("runs a part of a study: the named experiments or sweeps, their runs interleaved again, no claims", func() {
		load := func(name string) *study.Plan {
			sf, err := study.Load(filepath.Join("..", "..", "..", "studies", name))
			Expect(err).NotTo(HaveOccurred())
			p, err := sf.Plan(false)
			Expect(err).NotTo(HaveOccurred())
			return p
		}
		p := load("published.yaml")
		Expect(p.Claims).NotTo(BeEmpty())
		Expect(p.Only([]string{"scscf-kill"})).To(Succeed())
		Expect(p.Experiments).To(HaveLen(1))
		Expect(p.Runs).To(HaveLen(80))
		Expect(p.Runs[0].Dir).To(Equal(filepath.Join("scscf-kill", "quasi-pool", "rep1")))
		Expect(p.Runs[4].Rep).To(Equal(2))
		Expect(p.Claims).To(BeEmpty())

		sw := load("sweeps.yaml")
		all := len(sw.Runs)
		Expect(sw.Only([]string{"idle-share", "failures-to-down@probing.failures_to_down=2"})).To(Succeed())
		Expect(len(sw.Runs)).To(BeNumerically("<", all))
		names := map[string]bool{}
		for _, r := range sw.Runs {
			names[r.Experiment] = true
		}
		Expect(names).To(HaveKey("failures-to-down@probing.failures_to_down=2"))
		Expect(names).NotTo(HaveKey("failures-to-down@probing.failures_to_down=1"))
		Expect(names).To(HaveKey("idle-share@traffic.idle_share=0.2"))

		Expect(load("published.yaml").Only([]string{"pcscf-kill", "nope"})).To(MatchError(And(
			ContainSubstring("no experiment nope"), ContainSubstring("pcscf-kill, scscf-kill"))))
	})

	It("applies overrides, the quick block over them and the experiment's quick block over that", func() {
		sf, err := study.Load(writeStudy(`
name: t
out: runs/t
quick: {repeat: 2, duration: 30s, traffic: {phones: 12, register_rate: 20}}
experiments:
  - name: a
    scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `
    schemes: [quasi-pool, load-sharing+ignore-504, mutual]
    seed: 5
    repeat: 20
    pool_size: 4
    duration: 50s
    traffic: {phones: 40, bhca: 6}
    quick: {traffic: {phones: 16}}
`))
		Expect(err).NotTo(HaveOccurred())
		full, err := sf.Plan(false)
		Expect(err).NotTo(HaveOccurred())
		e := full.Experiments[0]
		Expect(e.Repeat).To(Equal(20))
		Expect(e.Base.Duration).To(Equal(50 * time.Second))
		Expect(e.Base.Traffic.Phones).To(Equal(40))
		Expect(e.Base.Traffic.BHCA).To(Equal(6.0))
		Expect(e.Base.Traffic.IdleShare).To(Equal(0.2), "fields not overridden keep the scenario's")
		Expect(e.Variants).To(Equal([]string{"quasi-pool", "load-sharing+ignore-504", "mutual"}))
		Expect(e.Scenarios["mutual"].Topology.Pools.PCSCF.Scheme).To(Equal(topology.SchemeMutual))
		Expect(e.Scenarios["mutual"].Topology.Pools.PCSCF.Size).To(Equal(4))
		Expect(e.Scenarios["load-sharing+ignore-504"].Traffic.OnRestoration504).To(Equal("ignore"))
		Expect(full.Runs).To(HaveLen(60))

		quick, err := sf.Plan(true)
		Expect(err).NotTo(HaveOccurred())
		q := quick.Experiments[0]
		Expect(q.Repeat).To(Equal(2))
		Expect(q.Base.Duration).To(Equal(30 * time.Second))
		Expect(q.Base.Traffic.Phones).To(Equal(16), "the experiment's quick block wins")
		Expect(q.Base.Traffic.RegisterRate).To(Equal(20.0), "the study's quick block applies")
		Expect(q.Base.Traffic.BHCA).To(Equal(6.0), "the experiment's own override stays")
		Expect(quick.Runs).To(HaveLen(6))
	})

	It("runs a scenario as it is when no schemes are given", func() {
		sf, err := study.Load(writeStudy(`
name: t
out: runs/t
experiments:
  - {name: a, scenario: ` + scenarioPath("pcscf-kill.yaml") + `, seed: 3, repeat: 2, pool_size: 4}
`))
		Expect(err).NotTo(HaveOccurred())
		p, err := sf.Plan(false)
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Experiments[0].Variants).To(Equal([]string{study.AsIs}))
		Expect(p.Runs[1].Dir).To(Equal(filepath.Join("a", study.AsIs, "rep2")))
		Expect(p.Runs[1].Seed).To(Equal(int64(4)))
		Expect(p.Experiments[0].Scenarios[study.AsIs].Topology.Pools.SCSCF.Size).To(Equal(4))
	})

	DescribeTable("refuses a bad study file, naming the field",
		func(body, field string) {
			_, err := study.Parse([]byte(body))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(field))
		},
		Entry("empty", "", "empty file"),
		Entry("unknown field", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1, repeats: 3}]", "field repeats not found"),
		Entry("no name", "out: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1}]", "name: missing"),
		Entry("no out", "name: t\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1}]", "out: missing"),
		Entry("no experiments", "name: t\nout: o\n", "experiments: missing"),
		Entry("no seed", "name: t\nout: o\nexperiments: [{name: a, scenario: x, repeat: 1}]", "experiments[0].seed"),
		Entry("no repeat", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1}]", "experiments[0].repeat: must be at least 1"),
		Entry("no scenario", "name: t\nout: o\nexperiments: [{name: a, seed: 1, repeat: 1}]", "experiments[0].scenario: missing"),
		Entry("bad scheme", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1, schemes: [quasi-pool, pool-of-fish]}]",
			`experiments[0].schemes[1]: variant "pool-of-fish"`),
		Entry("scheme twice", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1, schemes: [quasi-pool, quasi-pool]}]",
			"experiments[0].schemes[1]: \"quasi-pool\" given twice"),
		Entry("experiment twice", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1}, {name: a, scenario: x, seed: 1, repeat: 1}]",
			"experiments[1].name: \"a\" given twice"),
		Entry("bad pool size", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1, pool_size: 1}]", "experiments[0].pool_size"),
		Entry("short duration", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1, duration: 10ms}]", "experiments[0].duration"),
		Entry("unknown traffic field", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1, traffic: {phonez: 3}}]",
			"experiments[0].traffic: line 3: unknown traffic field \"phonez\""),
		Entry("bad quick traffic", "name: t\nout: o\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1, quick: {traffic: [1]}}]",
			"experiments[0].quick.traffic: want a mapping"),
		Entry("quick names an unknown experiment", "name: t\nout: o\nquick: {experiments: [b]}\nexperiments: [{name: a, scenario: x, seed: 1, repeat: 1}]",
			`quick.experiments[0]: "b" is not an experiment`),
	)

	It("names the experiment when its scenario is missing or the overrides break it", func() {
		sf, err := study.Load(writeStudy("name: t\nout: o\nexperiments: [{name: a, scenario: nope.yaml, seed: 1, repeat: 1}]"))
		Expect(err).NotTo(HaveOccurred())
		_, err = sf.Plan(false)
		Expect(err).To(MatchError(ContainSubstring("experiments[0] (a).scenario")))

		sf, err = study.Load(writeStudy(`
name: t
out: o
experiments:
  - {name: a, scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `, seed: 1, repeat: 1, duration: 10s}
  - {name: b, scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `, seed: 1, repeat: 1, schemes: [mutual]}
`))
		Expect(err).NotTo(HaveOccurred())
		_, err = sf.Plan(false)
		Expect(err).To(MatchError(ContainSubstring("experiments[0] (a): the scenario with the study's overrides")))
		Expect(err).To(MatchError(ContainSubstring("faults[0]")))
		Expect(err).To(MatchError(ContainSubstring("experiments[1] (b).schemes[0]")))
		Expect(err).To(MatchError(ContainSubstring("even pool size")))
	})
})
