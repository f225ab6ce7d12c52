package study_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/study"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// sweepStudy sweeps the probing interval over the realistic scenario under two schemes, 2 runs each.
func sweepStudy(values string) string {
	return `
name: t
out: unused
quick: {repeat: 1, duration: 30s, traffic: {phones: 30}}
experiments:
  - name: pi
    scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `
    schemes: [quasi-pool, load-sharing+ignore-504]
    seed: 300
    repeat: 2
    sweep: {param: probing.interval, values: [` + values + `]}
`
}

// sweepSummary is richSummary with a time to detect of two probe intervals (plus a little from the seed), as the
// real lab gives with failures_to_down 2: the sweep's value must reach the runs.
func sweepSummary(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
	s := richSummary(sc, seed, dir)
	s.TimeToDetectS = map[string]float64{"bac": 2*sc.Topology.Probing.Interval.Seconds() + float64(seed%2)/10}
	return s
}

var _ = Describe("sweeps in a study", Label("unit"), func() {
	It("expands a sweep into one experiment per value, named <exp>@<param>=<value>, with the same seeds", func() {
		p := planOf(sweepStudy("0.5s, 1s, 5s"), false)
		Expect(p.Experiments).To(HaveLen(3))
		var names []string
		for _, e := range p.Experiments {
			names = append(names, e.Name)
			Expect(e.Seed).To(Equal(int64(300)))
			Expect(e.Repeat).To(Equal(2))
			Expect(e.Sweep).NotTo(BeNil())
			Expect(e.Sweep.Sweep).To(Equal("pi"))
			for _, v := range e.Variants {
				Expect(e.Scenarios[v].Topology.Probing.Interval).To(Equal(time.Duration(e.Sweep.X * float64(time.Second))))
			}
		}
		Expect(names).To(Equal([]string{"pi@probing.interval=0.5s", "pi@probing.interval=1s", "pi@probing.interval=5s"}))
		// The scenario's probe timeout (500 ms) is not shorter than 0.5 s: it becomes half the interval.
		Expect(p.Experiments[0].Base.Topology.Probing.Timeout).To(Equal(250 * time.Millisecond))
		Expect(p.Experiments[2].Base.Topology.Probing.Timeout).To(Equal(500 * time.Millisecond))
		Expect(p.Runs).To(HaveLen(12))
		Expect(p.Runs[0].Dir).To(Equal(filepath.Join("pi@probing.interval=0.5s", "quasi-pool", "rep1")))
		seeds := map[int][]int64{}
		for _, r := range p.Runs {
			seeds[r.Rep] = append(seeds[r.Rep], r.Seed)
		}
		Expect(seeds[1]).To(HaveEach(int64(300)), "repetition 1 of every value and scheme")
		Expect(seeds[2]).To(HaveEach(int64(301)))

		q := planOf(sweepStudy("0.5s, 1s, 5s"), true)
		Expect(q.Runs).To(HaveLen(6), "--quick: its repeat applies to every value")
		Expect(q.Experiments[1].Base.Duration).To(Equal(30 * time.Second))
		Expect(q.Experiments[1].Base.Traffic.Phones).To(Equal(30))
	})

	DescribeTable("applies each parameter to the scenario",
		func(param, value string, check func(sc *scenario.Scenario)) {
			body := strings.Replace(sweepStudy("1s"), "param: probing.interval, values: [1s]",
				"param: "+param+", values: ["+value+"]", 1)
			body = strings.Replace(body, "load-sharing+ignore-504", "n-plus-1", 1)
			p := planOf(body, false)
			Expect(p.Experiments).To(HaveLen(1))
			Expect(p.Experiments[0].Name).To(Equal("pi@" + param + "=" + value))
			check(p.Experiments[0].Scenarios["n-plus-1"])
		},
		Entry("failures to down", "probing.failures_to_down", "3", func(sc *scenario.Scenario) {
			Expect(sc.Topology.Probing.FailuresToDown).To(Equal(3))
		}),
		Entry("fast failure detection", "failover.provisional_timeout", "200ms", func(sc *scenario.Scenario) {
			Expect(sc.Topology.Failover.ProvisionalTimeout).To(Equal(200 * time.Millisecond))
			Expect(sc.Topology.Validate()).To(Succeed())
		}),
		Entry("fast failure detection off (the reference)", "failover.provisional_timeout", "0", func(sc *scenario.Scenario) {
			Expect(sc.Topology.Failover.Fast()).To(BeFalse())
		}),
		Entry("registration period", "registration.expires", "3600s", func(sc *scenario.Scenario) {
			Expect(sc.Topology.Registration.Expires).To(Equal(time.Hour))
		}),
		Entry("idle share", "traffic.idle_share", "0.5", func(sc *scenario.Scenario) {
			Expect(sc.Traffic.IdleShare).To(Equal(0.5))
			Expect(sc.Traffic.MTOnlyShare).To(Equal(0.2), "the scenario's other traffic fields stay")
		}),
		Entry("MT-only share", "traffic.mt_only_share", "0", func(sc *scenario.Scenario) {
			Expect(sc.Traffic.MTOnlyShare).To(Equal(0.0))
		}),
		Entry("BHCA", "traffic.bhca", "10", func(sc *scenario.Scenario) { Expect(sc.Traffic.BHCA).To(Equal(10.0)) }),
		Entry("pool size: active members, n-plus-1 adds its spare", "pool_size", "4", func(sc *scenario.Scenario) {
			Expect(sc.Topology.Pools.PCSCF.Size).To(Equal(5))
			Expect(sc.Topology.Pools.SCSCF.Size).To(Equal(5))
		}),
	)

	DescribeTable("rejects bad sweeps with an error naming the field",
		func(sweep, extra, want string) {
			body := strings.Replace(sweepStudy("1s"), "sweep: {param: probing.interval, values: [1s]}", sweep+extra, 1)
			sf, err := study.Load(writeStudy(body))
			if err == nil {
				_, err = sf.Plan(false)
			}
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry("unknown parameter", "sweep: {param: probing.intervall, values: [1s]}", "",
			`experiments[0].sweep.param: "probing.intervall": unknown, want one of failover.provisional_timeout, pool_size, probing.failures_to_down`),
		Entry("no parameter", "sweep: {values: [1s]}", "", "experiments[0].sweep.param: missing"),
		Entry("no values", "sweep: {param: probing.interval}", "", "experiments[0].sweep.values: missing"),
		Entry("a duration without its unit", "sweep: {param: probing.interval, values: [1s, 2]}", "",
			`experiments[0].sweep.values[1]: probing.interval: "2": want a duration with its unit`),
		Entry("a value given twice", "sweep: {param: probing.interval, values: [1s, 1000ms]}", "",
			`experiments[0].sweep.values[1]: "1000ms" is the same value as "1s"`),
		Entry("a value that cannot name a directory", "sweep: {param: traffic.bhca, values: [\"1/2\"]}", "",
			`experiments[0].sweep.values[0]: "1/2": want letters, digits`),
		Entry("a share above 1", "sweep: {param: traffic.idle_share, values: [0.2, 1.5]}", "",
			`experiments[0].sweep.values[1]: traffic.idle_share: "1.5": must be from 0 to 1`),
		Entry("a pool size of 1", "sweep: {param: pool_size, values: [1, 2]}", "",
			`experiments[0].sweep.values[0]: pool_size: "1": must be from 2 to 8`),
		Entry("a provisional timeout too short", "sweep: {param: failover.provisional_timeout, values: [0, 10ms]}", "",
			`experiments[0].sweep.values[1]: failover.provisional_timeout: "10ms": must be at least 50ms`),
		Entry("fractional failures", "sweep: {param: probing.failures_to_down, values: [1.5]}", "",
			`experiments[0].sweep.values[0]: probing.failures_to_down: "1.5": want a whole number`),
		Entry("a swept pool size also overridden", "sweep: {param: pool_size, values: [2, 4]}", "\n    pool_size: 4",
			"experiments[0].pool_size: the sweep varies pool_size: do not set it here too"),
		Entry("a swept traffic field also overridden", "sweep: {param: traffic.idle_share, values: [0, 0.5]}",
			"\n    traffic: {idle_share: 0.1}",
			"experiments[0].traffic.idle_share: the sweep varies traffic.idle_share: do not set it here too"),
	)

	It("rejects a swept field the quick block sets, and mutual at an odd N, naming the expanded experiment", func() {
		body := strings.Replace(sweepStudy("1s"), "sweep: {param: probing.interval, values: [1s]}",
			"sweep: {param: traffic.bhca, values: [1, 3]}", 1)
		body = strings.Replace(body, "traffic: {phones: 30}", "traffic: {phones: 30, bhca: 2}", 1)
		_, err := study.Load(writeStudy(body))
		Expect(err).To(MatchError(ContainSubstring("quick.traffic.bhca: the sweep varies traffic.bhca")))

		body = strings.Replace(sweepStudy("1s"), "sweep: {param: probing.interval, values: [1s]}",
			"sweep: {param: pool_size, values: [2, 3]}", 1)
		body = strings.Replace(body, "load-sharing+ignore-504", "mutual", 1)
		sf, err := study.Load(writeStudy(body))
		Expect(err).NotTo(HaveOccurred())
		_, err = sf.Plan(false)
		Expect(err).To(MatchError(ContainSubstring("experiments[0] (pi@pool_size=3).schemes[1]")))
		Expect(err).To(MatchError(ContainSubstring("mutual pairs them")))
		Expect(err.Error()).NotTo(ContainSubstring("pool_size=2"), "N = 2 is fine for mutual")

		_, err = study.Load(writeStudy(strings.Replace(sweepStudy("1s"), "name: pi", "name: p@i", 1)))
		Expect(err).To(MatchError(ContainSubstring(`experiments[0].name: "p@i": must not contain`)))
	})

	DescribeTable("rejects a bad join naming the field",
		func(join, schemes, seed, want string) {
			body := `
name: t
out: unused
experiments:
  - {name: a, scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `, schemes: [quasi-pool], seed: 300, repeat: 1,
     sweep: {param: pool_size, values: [2, 3]}}
  - {name: b, scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `, schemes: [` + schemes + `], seed: ` + seed + `,
     repeat: 1, sweep: {param: pool_size, values: [2, 4], join: ` + join + `}}
  - {name: c, scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `, seed: 300, repeat: 1,
     sweep: {param: traffic.bhca, values: [1]}}
`
			_, err := study.Load(writeStudy(body))
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry("an unknown experiment", "x", "mutual", "300", `experiments[1].sweep.join: "x" is not an experiment of the study`),
		Entry("itself", "b", "mutual", "300", `experiments[1].sweep.join: "b" is this experiment`),
		Entry("another parameter", "c", "mutual", "300", `experiments[1].sweep.join: "c" sweeps traffic.bhca, this experiment pool_size`),
		Entry("another seed", "a", "mutual", "301", `experiments[1].sweep.join: "a" starts from seed 300, this experiment from 301`),
		Entry("a scheme of both", "a", "mutual, quasi-pool", "300",
			`experiments[1].schemes[1]: "quasi-pool" is also a scheme of "a", whose sweep this one joins`),
	)

	It("joins a sweep to another: one table and figure with the schemes of both, empty cells where a value is missing", func() {
		body := `
name: t
out: unused
experiments:
  - {name: ps, scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `, schemes: [quasi-pool], seed: 300, repeat: 2,
     sweep: {param: pool_size, values: [2, 3, 4]}}
  - {name: ps-mutual, scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `, schemes: [mutual], seed: 300,
     repeat: 2, sweep: {param: pool_size, values: [4, 2], join: ps}}
`
		out := GinkgoT().TempDir()
		f := &fakeRunner{sum: sweepSummary}
		res, err := study.Execute(context.Background(), study.Config{Plan: planOf(body, false), File: "s.yaml",
			OutDir: out, Run: f.run, Out: &bytes.Buffer{}, NoFigures: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(ContainElements("ps-mutual@pool_size=4/mutual/rep1 300", "ps@pool_size=4/quasi-pool/rep1 300"))
		Expect(res.Sweeps).To(HaveLen(1))
		s := res.Sweeps[0]
		Expect(s.Name).To(Equal("ps"))
		Expect(s.Values).To(Equal([]string{"2", "3", "4"}))
		Expect(s.Schemes).To(Equal([]string{"quasi-pool", "mutual"}))
		Expect(s.Experiments).To(ConsistOf("ps@pool_size=2", "ps@pool_size=3", "ps@pool_size=4", "ps-mutual@pool_size=4",
			"ps-mutual@pool_size=2"))
		k := s.KPIs[0]
		Expect(k.Cell("4", "mutual").Runs).To(Equal(2))
		Expect(k.Cell("3", "mutual").Est).To(BeNil())
		Expect(k.Cell("3", "quasi-pool").Runs).To(Equal(2))
		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(MatchRegexp(`\| 3 \| 1 \[3\.3e-08, 1\] \(n 2\) \| – \|\n`), "2 runs: a share is all but unknown")
		Expect(strings.Count(string(md), "## Sweep ")).To(Equal(1))
	})

	It("plans the shipped sweeps study: every issue 12 sweep, full and quick", func() {
		sf, err := study.Load(filepath.Join("..", "..", "..", "studies", "sweeps.yaml"))
		Expect(err).NotTo(HaveOccurred())
		full, err := sf.Plan(false)
		Expect(err).NotTo(HaveOccurred())
		Expect(full.Runs).To(HaveLen(380), "the header of studies/sweeps.yaml states 380 runs")
		params := map[string][]string{}
		for _, e := range full.Experiments {
			Expect(e.Sweep).NotTo(BeNil(), e.Name)
			Expect(e.Repeat).To(Equal(5), e.Name)
			params[e.Sweep.Experiment] = append(params[e.Sweep.Experiment], e.Sweep.Value)
			if e.Sweep.Experiment == "pool-size-mutual" {
				Expect(e.Sweep.Sweep).To(Equal("pool-size"), "mutual's points join the pool-size sweep")
			}
		}
		Expect(params).To(Equal(map[string][]string{
			"probe-interval": {"0.5s", "1s", "2s", "5s"}, "failures-to-down": {"1", "2", "3"},
			"registration-period": {"120s", "600s", "3600s"}, "idle-share": {"0", "0.2", "0.5"},
			"call-load": {"1", "3", "10"}, "pool-size": {"2", "3", "4", "5", "6"}, "pool-size-mutual": {"2", "4", "6"},
		}))
		quick, err := sf.Plan(true)
		Expect(err).NotTo(HaveOccurred())
		Expect(quick.Runs).To(HaveLen(12))
	})

	Describe("running one", func() {
		var (
			out string
			f   *fakeRunner
		)
		BeforeEach(func() {
			out = GinkgoT().TempDir()
			f = &fakeRunner{sum: sweepSummary}
		})
		execute := func(p *study.Plan, noFigures bool) (*study.Result, error) {
			return study.Execute(context.Background(), study.Config{Plan: p, File: "s.yaml", OutDir: out, Run: f.run,
				Out: &bytes.Buffer{}, NoFigures: noFigures, Provenance: study.Collect("", []string{"imslab", "study"})})
		}

		It("runs every value on the same seeds, interleaved, and resumes: a new value runs only its own runs", func() {
			_, err := execute(planOf(sweepStudy("1s, 2s"), false), true)
			Expect(err).NotTo(HaveOccurred())
			Expect(f.calls).To(Equal([]string{
				"pi@probing.interval=1s/quasi-pool/rep1 300", "pi@probing.interval=1s/load-sharing+ignore-504/rep1 300",
				"pi@probing.interval=2s/quasi-pool/rep1 300", "pi@probing.interval=2s/load-sharing+ignore-504/rep1 300",
				"pi@probing.interval=1s/quasi-pool/rep2 301", "pi@probing.interval=1s/load-sharing+ignore-504/rep2 301",
				"pi@probing.interval=2s/quasi-pool/rep2 301", "pi@probing.interval=2s/load-sharing+ignore-504/rep2 301",
			}))
			f.calls = nil
			_, err = execute(planOf(sweepStudy("1s, 2s"), false), true)
			Expect(err).NotTo(HaveOccurred())
			Expect(f.calls).To(BeEmpty(), "everything was done")

			f.calls = nil
			res, err := execute(planOf(sweepStudy("1s, 2s, 5s"), false), true)
			Expect(err).NotTo(HaveOccurred())
			Expect(f.calls).To(ConsistOf(
				"pi@probing.interval=5s/quasi-pool/rep1 300", "pi@probing.interval=5s/load-sharing+ignore-504/rep1 300",
				"pi@probing.interval=5s/quasi-pool/rep2 301", "pi@probing.interval=5s/load-sharing+ignore-504/rep2 301"))
			Expect(res.RunsSkipped).To(Equal(8))
			Expect(res.Sweeps).To(HaveLen(1))
			Expect(res.Sweeps[0].Values).To(Equal([]string{"1s", "2s", "5s"}))
			Expect(res.Sweeps[0].X).To(Equal([]float64{1, 2, 5}))
			// The value reached the runs: the fake lab detects in two probe intervals.
			var detect *study.SweepKPI
			for i := range res.Sweeps[0].KPIs {
				if res.Sweeps[0].KPIs[i].Name == "time_to_detect_s" {
					detect = &res.Sweeps[0].KPIs[i]
				}
			}
			Expect(detect).NotTo(BeNil())
			Expect(*detect.Cell("1s", "quasi-pool").Est).To(BeNumerically("~", 2.05, 1e-9))
			Expect(*detect.Cell("5s", "quasi-pool").Est).To(BeNumerically("~", 10.05, 1e-9))
		})

		It("draws a figure per headline KPI against the parameter (SVG and PNG, n in the legend) and tables equal to study.json", func() {
			_, err := execute(planOf(sweepStudy("0.5s, 5s"), false), false)
			Expect(err).NotTo(HaveOccurred())
			b, err := os.ReadFile(filepath.Join(out, study.FileJSON))
			Expect(err).NotTo(HaveOccurred())
			var res study.Result
			Expect(json.Unmarshal(b, &res)).To(Succeed())
			Expect(res.Sweeps).To(HaveLen(1))
			s := res.Sweeps[0]
			Expect(s.Param).To(Equal("probing.interval"))
			Expect(s.Schemes).To(Equal([]string{"quasi-pool", "load-sharing+ignore-504"}))
			Expect(s.Experiments).To(Equal([]string{"pi@probing.interval=0.5s", "pi@probing.interval=5s"}))

			var kpis []string
			for _, k := range s.KPIs {
				kpis = append(kpis, k.Name)
			}
			Expect(kpis).To(Equal([]string{"restored_at_bound", "restored_at_end", "restore_median_s", "setup_started_median_s", "time_to_detect_s",
				"mt_interruption_s", "mo_interruption_s"}))
			var figs []string
			for _, fig := range s.Figures {
				figs = append(figs, fig.SVG)
				Expect(fig.Kind).To(Equal("sweep"))
				text := svgText(filepath.Join(out, fig.SVG))
				for _, sc := range s.Schemes {
					if (strings.HasPrefix(fig.KPI, "restore_") || fig.KPI == "setup_started_median_s") &&
						sc == "load-sharing+ignore-504" {
						Expect(text).NotTo(ContainSubstring(sc), "nobody restored: no median, no line")
						Expect(fig.Caption).To(ContainSubstring("No line for load-sharing+ignore-504: no run had a value"))
						continue
					}
					Expect(text).To(ContainSubstring(sc+": n = 2 runs per value"), fig.SVG)
				}
				if fig.KPI == "mo_interruption_s" {
					Expect(text).To(MatchRegexp(`n = 2 runs per value, \d+(–\d+)? users`))
				}
				Expect(text).To(ContainSubstring("0.5s"), "the values label the axis")
				Expect(fig.Print).To(BeEmpty(), "print forms when asked (imslab study): the same drawing as the other figures'")
			}
			Expect(figs).To(Equal([]string{"figures/pi-sweep-restored-at-bound.svg", "figures/pi-sweep-restored-at-end.svg",
				"figures/pi-sweep-restore-median-s.svg", "figures/pi-sweep-setup-started-median-s.svg",
				"figures/pi-sweep-time-to-detect-s.svg", "figures/pi-sweep-mt-interruption-s.svg",
				"figures/pi-sweep-mo-interruption-s.svg"}))

			md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
			Expect(err).NotTo(HaveOccurred())
			rmd, err := os.ReadFile(filepath.Join(out, study.FileResults))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(md)).To(ContainSubstring("## Sweep pi: probing.interval"))
			Expect(string(rmd)).To(ContainSubstring("#### Sweep pi: probing.interval"))
			Expect(string(md)).To(ContainSubstring("![time_to_detect_s vs probing.interval](figures/pi-sweep-time-to-detect-s.svg)"))
			Expect(string(rmd)).To(ContainSubstring("- time_to_detect_s vs probing.interval: [SVG](figures/pi-sweep-time-to-detect-s.svg)"))
			byName := map[string]study.ExperimentResult{}
			for _, e := range res.Experiments {
				byName[e.Name] = e
			}
			for _, k := range s.KPIs {
				for j, v := range s.Values {
					row := "| " + v + " |"
					for _, sc := range s.Schemes {
						c := k.Cell(v, sc)
						Expect(c).NotTo(BeNil())
						// The cell is the expanded experiment's aggregate.
						var m *study.VariantResult
						e := byName[s.Experiments[j]]
						for i := range e.Variants {
							if e.Variants[i].Variant == sc {
								m = &e.Variants[i]
							}
						}
						if m.Metric(k.Name) == nil { // no run had a value (nobody restored: no median)
							Expect(k.Name).To(Or(HavePrefix("restore_"), Equal("setup_started_median_s")))
							Expect(c.Est).To(BeNil())
							row += " – |"
							continue
						}
						st := m.Metric(k.Name).Stat
						want, wantCI := st.Mean, st.MeanCI
						if k.Estimate == "median" {
							want, wantCI = st.Median, st.MedianCI
						}
						Expect(*c.Est).To(Equal(want), k.Name)
						Expect(c.CI95).To(Equal(wantCI), k.Name)
						Expect(c.Runs).To(Equal(2))
						n := fmt.Sprintf("(n %d)", c.Runs)
						if k.Per == "user" {
							n = fmt.Sprintf("(n %d runs, %d users)", c.Runs, c.NVals)
						}
						row += fmt.Sprintf(" %.3g [%.3g, %.3g] %s |", *c.Est, c.CI95.Low, c.CI95.High, n)
					}
					Expect(string(md)).To(ContainSubstring(row+"\n"), k.Name)
					Expect(string(rmd)).To(ContainSubstring(row+"\n"), k.Name)
				}
			}
			// Every value is also a full experiment of its own, with its own figures.
			Expect(byName["pi@probing.interval=5s"].Figures).NotTo(BeEmpty())
		})
	})
})
