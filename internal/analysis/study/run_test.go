package study_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/analysis/provenance"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/study"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// fakeRunner stands in for the lab: it records the runs in order and writes a summary.json and an
// expectations.json as a finished run does. fail makes a run fail (before it writes anything complete).
type fakeRunner struct {
	mu    sync.Mutex
	calls []string // "<variant-dir>/rep<k> seed"
	fail  func(dir string) bool
	// sum replaces fakeSummary when set.
	sum func(sc *scenario.Scenario, seed int64, dir string) *report.Summary
}

// users of a fake run: n = 3 + seed%3 affected users, interruptions from the seed.
func fakeSummary(sc *scenario.Scenario, seed int64) *report.Summary {
	n := 3 + int(seed%3)
	s := &report.Summary{Scenario: sc.Name, Seed: seed, AffectedUsers: n,
		TimeToDetectS: map[string]float64{"bac": 1.5 + float64(seed%5)/10}}
	ignore := sc.Traffic.OnRestoration504 == "ignore"
	for i := range n {
		v := 0.5 + float64(i)/10 + float64(seed%7)/100
		if ignore {
			v += 30
		}
		s.Users = append(s.Users, report.UserKPI{IMPU: fmt.Sprintf("u%d", i), MOInterruptionS: &v, MTInterruptionS: &v})
	}
	restored := 1.0
	if ignore {
		restored = 0
	}
	var median *float64 // half restored at 1 s, or never
	if !ignore {
		median = fp(1)
	}
	s.Survival = &report.Survival{TimedAt: report.TimedAtAnswer, IntervalS: 0.25, Users: n, ObservedS: 40,
		DetectedFirstS: 1.2, DetectedLastS: 1.6, BoundS: 1.85, RestoredAtBound: restored,
		MT: report.KMCurve{N: n, Points: []report.KMPoint{{TS: 0}, {TS: 1, Restored: restored}}},
		Service: report.KMCurve{N: n, Restored: int(restored) * n, Censored: n - int(restored)*n, MedianS: median,
			Points: []report.KMPoint{{TS: 0}, {TS: 1, Restored: restored}}}}
	if median != nil { // the probes that got through started 0.8 s before they were answered
		s.Survival.SetupStarted = report.KMCurve{N: n, Restored: n, MedianS: fp(0.2)}
	}
	return s
}

func (f *fakeRunner) run(_ context.Context, sc *scenario.Scenario, dir string, seed int64) (*scenario.Outcome, *report.Summary, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%s %d", filepath.Join(filepath.Base(filepath.Dir(filepath.Dir(dir))),
		filepath.Base(filepath.Dir(dir)), filepath.Base(dir)), seed))
	f.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	s := fakeSummary(sc, seed)
	if f.sum != nil {
		s = f.sum(sc, seed, dir)
	}
	if s.Provenance == nil { // as a real run records the command that made it
		s.Provenance = &provenance.Info{CommandLine: []string{"imslab", "study", "s.yaml", "--experiments", "p,s"},
			CPUModel: "Test CPU", CPUs: 2, Kernel: "6.1"}
	}
	b, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(dir, report.FileSummary), b, 0o644); err != nil {
		return nil, nil, err
	}
	if f.fail != nil && f.fail(dir) {
		return nil, nil, errors.New("the lab did not come up")
	}
	o := &scenario.Outcome{RunDir: dir, Seed: seed, Passed: true}
	b, _ = json.Marshal(o)
	if err := os.WriteFile(filepath.Join(dir, "expectations.json"), b, 0o644); err != nil {
		return nil, nil, err
	}
	return o, s, nil
}

func planOf(body string, quick bool) *study.Plan {
	sf, err := study.Load(writeStudy(body))
	Expect(err).NotTo(HaveOccurred())
	p, err := sf.Plan(quick)
	Expect(err).NotTo(HaveOccurred())
	return p
}

func twoExperiments() string {
	return `
name: t
out: unused
experiments:
  - name: p
    scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `
    schemes: [quasi-pool, load-sharing+ignore-504]
    seed: 100
    repeat: 3
  - name: s
    scenario: ` + scenarioPath("realistic-pcscf-kill.yaml") + `
    seed: 200
    repeat: 2
    faults: [{kind: kill, target: "random:scscf", at: 20s, jitter: 1s}]
`
}

var _ = Describe("running a study", Label("unit"), func() {
	var (
		out string
		f   *fakeRunner
		log *bytes.Buffer
	)
	BeforeEach(func() {
		out = GinkgoT().TempDir()
		f = &fakeRunner{}
		log = &bytes.Buffer{}
	})
	execute := func(p *study.Plan) (*study.Result, error) {
		return study.Execute(context.Background(), study.Config{Plan: p, File: "s.yaml", OutDir: out, Run: f.run, Out: log,
			NoFigures: true, Provenance: study.Collect("", []string{"imslab", "study", "s.yaml"})})
	}

	It("interleaves the runs: repetition 1 of every experiment and scheme, then repetition 2, …", func() {
		p := planOf(twoExperiments(), false)
		_, err := execute(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(Equal([]string{
			"p/quasi-pool/rep1 100", "p/load-sharing+ignore-504/rep1 100", "s/as-is/rep1 200",
			"p/quasi-pool/rep2 101", "p/load-sharing+ignore-504/rep2 101", "s/as-is/rep2 201",
			"p/quasi-pool/rep3 102", "p/load-sharing+ignore-504/rep3 102",
		}))
	})

	It("does not run a finished run again, and reruns an unfinished or failed one", func() {
		p := planOf(twoExperiments(), false)
		f.fail = func(dir string) bool { return strings.HasSuffix(dir, filepath.Join("p", "quasi-pool", "rep2")) }
		res, err := execute(p)
		Expect(err).To(MatchError(study.ErrRunsFailed))
		Expect(study.ExitCode(err)).To(Equal(study.ExitRuns))
		Expect(res.RunsFailed).To(Equal(1))
		Expect(res.Experiments[0].Variants[0].Runs).To(Equal(2))
		Expect(res.Experiments[0].Variants[0].Errors).To(ConsistOf(ContainSubstring("rep 2 (seed 101): the lab did not come up")))
		Expect(f.calls).To(HaveLen(8))
		// An interrupted run: its record and a partial report, no expectations.json.
		Expect(os.Remove(filepath.Join(out, "s", "as-is", "rep2", "expectations.json"))).To(Succeed())
		// A run whose phones did not stop: report and expectations written, then the run failed.
		stuck, err := json.Marshal(scenario.Outcome{Seed: 102, Passed: true, PhonesNotStopped: "did not stop within 30s"})
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(out, "p", "load-sharing+ignore-504", "rep3", "expectations.json"), stuck, 0o644)).To(Succeed())

		f.calls, f.fail = nil, nil
		log.Reset()
		res, err = execute(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(Equal([]string{"p/quasi-pool/rep2 101", "s/as-is/rep2 201", "p/load-sharing+ignore-504/rep3 102"}))
		Expect(log.String()).To(ContainSubstring("p/quasi-pool rep 1 (seed 100): skipped, done"))
		Expect(log.String()).To(ContainSubstring("s/as-is rep 2 (seed 201): " + filepath.Join(out, "s", "as-is", "rep2") +
			" holds an unfinished run of it: removed"))
		Expect(strings.Count(log.String(), "skipped, done")).To(Equal(5))
		Expect(res.RunsDone).To(Equal(8))
		Expect(res.RunsSkipped).To(Equal(5))
		Expect(res.Experiments[0].Variants[0].Runs).To(Equal(3))

		f.calls = nil
		_, err = execute(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(BeEmpty())
		states, err := study.States(p, out)
		Expect(err).NotTo(HaveOccurred())
		Expect(states).To(HaveEach("done"))
	})

	It("refuses to resume into directories that hold runs of another configuration, before running anything", func() {
		_, err := execute(planOf(twoExperiments(), false))
		Expect(err).NotTo(HaveOccurred())
		f.calls = nil
		changed := strings.Replace(twoExperiments(), "repeat: 3", "repeat: 3\n    duration: 50s", 1)
		_, err = execute(planOf(changed, false))
		Expect(err).To(MatchError(ContainSubstring("holds a finished run that is not this study's p/quasi-pool rep 1")))
		Expect(study.ExitCode(err)).To(Equal(study.ExitError))
		Expect(f.calls).To(BeEmpty())
	})

	It("aggregates per experiment and scheme with n, a CI for every KPI, and provenance, in study.json and study.md", func() {
		p := planOf(twoExperiments(), false)
		_, err := execute(p)
		Expect(err).NotTo(HaveOccurred())
		b, err := os.ReadFile(filepath.Join(out, study.FileJSON))
		Expect(err).NotTo(HaveOccurred())
		var res study.Result
		Expect(json.Unmarshal(b, &res)).To(Succeed())
		Expect(res.RunsPlanned).To(Equal(8))
		Expect(res.Experiments).To(HaveLen(2))
		for _, e := range res.Experiments {
			for _, v := range e.Variants {
				Expect(v.Runs).To(Equal(e.Repeat), e.Name+"/"+v.Variant)
				users := 0
				for _, seed := range v.Seeds {
					users += 3 + int(seed%3)
				}
				Expect(v.AffectedUsers).To(Equal(users))
				names := map[string]bool{}
				for _, m := range v.Metrics {
					names[m.Name] = true
					Expect(m.Stat.Runs).To(Equal(e.Repeat), m.Name)
					Expect(m.Stat.MeanCI).NotTo(BeNil(), m.Name)
					Expect(m.Stat.MedianCI).NotTo(BeNil(), m.Name)
					Expect(m.Stat.P95).To(BeNil(), "fewer than 20 values: no p95 ("+m.Name+")")
				}
				for _, n := range []string{"affected_users", "time_to_detect_s", "mo_interruption_s", "mt_interruption_s",
					"restored_at_bound", "mt_restored_at_bound", "restored_at_5s", "restored_at_end"} {
					Expect(names).To(HaveKey(n))
				}
				Expect(v.Metric("mo_interruption_s").Stat.Values).To(Equal(users), "per-user KPI: one value per affected user")
			}
		}
		qp, ls := res.Experiments[0].Variants[0], res.Experiments[0].Variants[1]
		Expect(qp.Metric("restored_at_bound").Stat.Mean).To(Equal(1.0))
		Expect(ls.Metric("restored_at_bound").Stat.Mean).To(Equal(0.0))
		Expect(qp.Metric("restored_at_5s").Stat.Mean).To(Equal(1.0), "read from the service curve at 5 s")
		Expect(qp.Metric("restore_median_s").Stat.Mean).To(Equal(1.0), "the service curve's median")
		Expect(ls.Metric("restore_median_s")).To(BeNil(), "nobody restored: no median in any run")
		Expect(qp.Metric("setup_started_median_s").Stat.Mean).To(BeNumerically("~", 0.2, 1e-12), "the setup-started curve's median")
		Expect(qp.Metric("restored_at_1s").Stat.Mean).To(Equal(1.0))
		Expect(qp.Metric("restored_at_30s").Stat.Mean).To(Equal(1.0), "nobody censored: read past the observation")
		Expect(ls.Metric("restored_at_30s").Stat.Mean).To(Equal(0.0), "all censored at 40 s: 30 s is read")
		Expect(qp.Metric("detected_first_s").Stat.Mean).To(BeNumerically("~", 1.2, 1e-12))
		Expect(qp.Metric("detected_last_s").Stat.Mean).To(BeNumerically("~", 1.6, 1e-12))
		Expect(ls.Metric("restored_at_5s").Stat.Mean).To(Equal(0.0))
		Expect(ls.Metric("mo_interruption_s").Stat.Min).To(BeNumerically(">", 30))
		Expect(res.Provenance.Seeds).To(Equal(map[string][]int64{"p": {100, 101, 102}, "s": {200, 201}}))

		pv := res.Provenance
		Expect(pv.Commit).To(MatchRegexp(`^[0-9a-f]{40}$`))
		Expect(pv.GoVersion).To(HavePrefix("go"))
		Expect(pv.CPUModel).NotTo(Or(BeEmpty(), Equal("unknown")))
		Expect(pv.CPUs).To(BeNumerically(">=", 1))
		Expect(pv.Kernel).NotTo(Or(BeEmpty(), Equal("unknown")))
		Expect(pv.CommandLine).To(Equal([]string{"imslab", "study", "s.yaml"}))
		Expect(pv.Finished).To(BeTemporally(">=", pv.Started))
		Expect(pv.Started.IsZero()).To(BeFalse())
		// Every run records the commit that ran it: all 8 here ran on the same code.
		key := pv.Commit
		if pv.Dirty {
			key += "+dirty"
		}
		Expect(pv.RunCommits).To(Equal(map[string]int{key: 8}))
		Expect(pv.CPUsAllowed).NotTo(BeEmpty())
		Expect(pv.RunCPUs).To(Equal(map[string]int{fmt.Sprint(pv.CPUsAllowed): 8}), "every run could use the same CPUs")
		Expect(pv.RunCommands).To(Equal(map[string]int{"imslab study s.yaml --experiments p,s": 8}),
			"the command that made the runs, beside the one that aggregated them")
		Expect(pv.RunMachines).To(Equal(map[string]int{"Test CPU, 2 cores, kernel 6.1": 8}),
			"the machine that made the runs, beside the one that aggregated them")
		env, err := os.ReadFile(filepath.Join(out, "p", "quasi-pool", "rep1", study.FileEnv))
		Expect(err).NotTo(HaveOccurred())
		var re study.RunEnv
		Expect(json.Unmarshal(env, &re)).To(Succeed())
		Expect(re.Commit).To(Equal(pv.Commit))
		Expect(re.Finished).To(BeTemporally(">=", re.Started))

		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## Provenance"))
		Expect(string(md)).To(ContainSubstring(pv.Commit))
		Expect(string(md)).To(ContainSubstring("| runs by commit | `" + key + "`: 8 |"))
		Expect(string(md)).To(ContainSubstring("| restored_at_bound (share, per run) | 1 [0.227, 1]; median 1; 1–1 (n 3) | 0 [0, 0.773]"))
		Expect(string(md)).To(ContainSubstring("seeds of p | 100, 101, 102"))
		Expect(string(md)).To(ContainSubstring("[p/quasi-pool/rep1](p/quasi-pool/rep1/)"))
	})

	It("measures Table 1's redundancy and sync rows per run: the faulted pool's peak load ratio where the report "+
		"gives one, and replication messages and bytes per second", func() {
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			s := fakeSummary(sc, seed)
			s.DurationS = 60
			s.Signalling = &report.Signalling{WindowS: 40}
			ratio := 1.4 + float64(seed%3)/10 // 1.5, 1.6, 1.4 for seeds 100…102
			s.MemberLoad = &report.MemberLoad{
				Members: []report.MemberLoadRow{{Node: "pcscf1", Pool: "pcscf", Faulted: true}, {Node: "pcscf2", Pool: "pcscf"},
					{Node: "scscf1", Pool: "scscf"}},
				Pools: map[string]*report.PoolLoad{"pcscf": {PeakLoadRatio: &ratio}, "scscf": {}}}
			if strings.Contains(dir, "load-sharing") {
				// a pool-sync stand-in: 600 replication messages of 300 bytes over the 60 s run
				s.Signalling.ReplMessages, s.Signalling.ReplBytes = 600, 180000
				s.MemberLoad.Pools["pcscf"].PeakLoadRatio = nil // below 1 request/s: the report gives no ratio
			}
			return s
		}
		res, err := execute(planOf(twoExperiments(), false))
		Expect(err).NotTo(HaveOccurred())
		qp, ls := res.Experiments[0].Variants[0], res.Experiments[0].Variants[1]
		Expect(qp.Metric("peak_load_ratio").Stat.Mean).To(BeNumerically("~", 1.5, 1e-9))
		Expect(qp.Metric("peak_load_ratio").Stat.Runs).To(Equal(3))
		Expect(qp.Metric("repl_msgs_per_s").Stat.Max).To(BeZero())
		Expect(ls.Metric("peak_load_ratio")).To(BeNil(), "no run gave one")
		Expect(ls.Metric("repl_msgs_per_s").Stat.Mean).To(BeNumerically("~", 10, 1e-9))
		Expect(ls.Metric("repl_bytes_per_s").Stat.Mean).To(BeNumerically("~", 3000, 1e-9))
		md, err := os.ReadFile(filepath.Join(out, study.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("| repl_msgs_per_s (msgs/s, per run) | 0 [0, 0]; median 0; 0–0 (n 3) | 10 [10, 10]"))
	})

	It("measures what the affected users perceive (the share of their own calls that failed) and the takeover's "+
		"Cx cost per call and per user, and leaves runs without calls out of n", func() {
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			s := fakeSummary(sc, seed)
			if strings.Contains(dir, "load-sharing") {
				// 10 calls placed, 4 refused; 5 received, 2 refused and 1 never delivered to the phone
				s.MO = report.Direction{Attempts: 10, Succeeded: 6}
				s.MT = report.Direction{Attempts: 5, Succeeded: 3, NotDelivered: 1}
				return s
			}
			if seed != 101 { // the quasi-pool's users placed and received calls in two runs of three
				s.MO = report.Direction{Attempts: 20, Succeeded: 20}
				s.MT = report.Direction{Attempts: 20, Succeeded: 19}
			}
			s.TakeoverCx = &report.TakeoverCx{ExtraLIRPerCall: 0.5, ExtraRegCxPerUser: 1}
			return s
		}
		res, err := execute(planOf(twoExperiments(), false))
		Expect(err).NotTo(HaveOccurred())
		qp, ls := res.Experiments[0].Variants[0], res.Experiments[0].Variants[1]
		Expect(qp.Metric("mo_failed_share").Stat.Mean).To(BeZero())
		Expect(qp.Metric("mo_failed_share").Stat.Runs).To(Equal(2), "a run whose users placed no call has no value")
		Expect(qp.Metric("mt_failed_share").Stat.Mean).To(BeNumerically("~", 0.05, 1e-9))
		Expect(ls.Metric("mo_failed_share").Stat.Mean).To(BeNumerically("~", 0.4, 1e-9))
		Expect(ls.Metric("mt_failed_share").Stat.Mean).To(BeNumerically("~", 0.5, 1e-9), "(2 failed + 1 not delivered) / 6")
		Expect(qp.Metric("takeover_extra_lir_per_call").Stat.Mean).To(BeNumerically("~", 0.5, 1e-9))
		Expect(qp.Metric("takeover_extra_reg_cx_per_user").Stat.Mean).To(BeNumerically("~", 1, 1e-9))
		Expect(qp.Metric("takeover_extra_cx_per_sub_hour").Stat.Mean).To(BeNumerically("~", 0.5*2*study.OperatorCallsPerHour, 1e-9))
		Expect(ls.Metric("takeover_extra_lir_per_call")).To(BeNil(), "runs made before takeover_cx existed have none")
		rmd, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(rmd)).To(ContainSubstring("What the affected users perceive"))
		Expect(string(rmd)).To(ContainSubstring("The takeover's Cx cost at the HSS"))
	})

	It("measures the steady-state cost per subscriber-hour and per procedure, composes it for an operator's "+
		"registration periods, and compares the pools' CPU with the quasi-pool's run of the same seed", func() {
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			s := fakeSummary(sc, seed)
			perReg, repl := 4.0, 0.0
			pools := 1000 + float64(seed-100)*100      // the quasi-pool: 1000, 1100, 1200 for seeds 100…102
			if strings.Contains(dir, "load-sharing") { // a pool-sync stand-in: 6 copies per refresh, 25 % more CPU
				repl = 6
				pools /= 0.8
			}
			s.Cost = &report.Cost{Registrations: 400, Calls: 10, CxPerRegistration: &perReg, CxPerCall: fp(1),
				ReplPerRegistration: &repl, PerSubscriberHour: map[string]float64{"cx": 430, "repl_messages": 600 * repl / 6,
					"repl_bytes": 180000 * repl / 6, "cpu_ms": pools + 1500, "cpu_ms_pcscf": pools / 2, "cpu_ms_scscf": pools / 2}}
			return s
		}
		res, err := execute(planOf(twoExperiments(), false))
		Expect(err).NotTo(HaveOccurred())
		qp, ps := res.Experiments[0].Variants[0], res.Experiments[0].Variants[1]
		Expect(qp.Metric("cx_per_sub_hour").Stat.Mean).To(BeNumerically("~", 430, 1e-9))
		Expect(qp.Metric("pool_cpu_ms_per_sub_hour").Stat.Mean).To(BeNumerically("~", 1100, 1e-9))
		Expect(ps.Metric("repl_msgs_per_sub_hour").Stat.Mean).To(BeNumerically("~", 600, 1e-9))
		Expect(ps.Metric("repl_per_registration").Stat.Mean).To(BeNumerically("~", 6, 1e-9))
		By("composing: 600 s refreshes every 300 s (12 per hour), 3600 s every 3000 s (1.2 per hour), 1 call per hour")
		Expect(qp.Metric("cx_per_sub_hour_600s").Stat.Mean).To(BeNumerically("~", 4*12+1, 1e-9))
		Expect(qp.Metric("cx_per_sub_hour_3600s").Stat.Mean).To(BeNumerically("~", 4*1.2+1, 1e-9))
		Expect(ps.Metric("repl_msgs_per_sub_hour_600s").Stat.Mean).To(BeNumerically("~", 72, 1e-9))
		Expect(ps.Metric("repl_msgs_per_sub_hour_3600s").Stat.Mean).To(BeNumerically("~", 7.2, 1e-9))
		By("pairing each run with the quasi-pool's run of the same seed")
		Expect(qp.Metric("pool_cpu_extra_share")).To(BeNil(), "the baseline is not compared with itself")
		Expect(ps.Metric("pool_cpu_extra_share").Stat.Runs).To(Equal(3))
		Expect(ps.Metric("pool_cpu_extra_share").Stat.Min).To(BeNumerically("~", 0.2, 1e-9))
		Expect(ps.Metric("pool_cpu_extra_share").Stat.Max).To(BeNumerically("~", 0.2, 1e-9))
		Expect(res.Experiments[1].Variants[0].Metric("pool_cpu_extra_share")).To(BeNil(), "no quasi-pool in experiment s")
		b, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring("Table 1's data-sync and cost rows in steady state"))
		Expect(string(b)).To(ContainSubstring("| Cx /sub-h at 600 s |"))
	})

	It("reads the users of each of two faults apart: restored_at_end_fault1 and _fault2", func() {
		f.sum = func(sc *scenario.Scenario, seed int64, dir string) *report.Summary {
			s := fakeSummary(sc, seed)
			s.Faults = []report.Fault{{Kind: "kill", Target: "pcscf2"}, {Kind: "kill", Target: "pcscf1"}}
			r := 0.5
			s.Users = []report.UserKPI{ // pcscf2's two users restored, one of pcscf1's two
				{IMPU: "a", Fault: "pcscf2", Probed: true, RestoreS: &r},
				{IMPU: "b", Fault: "pcscf2", Probed: true, RestoreS: &r},
				{IMPU: "c", Fault: "pcscf1", Probed: true, RestoreS: &r},
				{IMPU: "d", Fault: "pcscf1", Probed: true, Censored: true},
				{IMPU: "e", Fault: "pcscf1"}, // not probed: not counted
			}
			if strings.Contains(dir, "/s/") {
				s.Faults = s.Faults[:1] // one fault: no per-fault KPI
			}
			return s
		}
		res, err := execute(planOf(twoExperiments(), false))
		Expect(err).NotTo(HaveOccurred())
		v := res.Experiments[0].Variants[0]
		Expect(v.Metric("restored_at_end_fault1").Stat.Mean).To(Equal(1.0))
		Expect(v.Metric("restored_at_end_fault2").Stat.Mean).To(Equal(0.5))
		Expect(res.Experiments[1].Variants[0].Metric("restored_at_end_fault1")).To(BeNil())
		md, err := os.ReadFile(filepath.Join(out, study.FileResults))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("| quasi-pool | 3 / 12 | 1 [0.227, 1]; median 1 | 1 [0.292, 1]; median 1 | 0.5 [0.0387, 0.961]; median 0.5 |"))
	})

	It("stops at a run whose lab finds its ports taken (another lab running) instead of failing every run after it", func() {
		p := planOf(twoExperiments(), false)
		n := 0
		run := func(c context.Context, sc *scenario.Scenario, dir string, seed int64) (*scenario.Outcome, *report.Summary, error) {
			n++
			if n == 2 {
				return nil, nil, fmt.Errorf("scenario x: %w", fmt.Errorf("lab: dnsd dns 127.0.0.1:1053/udp: %w", lab.ErrPortInUse))
			}
			return f.run(c, sc, dir, seed)
		}
		res, err := study.Execute(context.Background(), study.Config{Plan: p, OutDir: out, Run: compare.RunFunc(run),
			Out: log, NoFigures: true})
		Expect(err).To(MatchError(lab.ErrPortInUse))
		Expect(err).To(MatchError(ContainSubstring("the study stopped here")))
		Expect(study.ExitCode(err)).To(Equal(study.ExitError))
		Expect(n).To(Equal(2), "no run after the one that found the ports taken")
		Expect(res.RunsDone).To(Equal(1))
		Expect(filepath.Join(out, study.FileJSON)).To(BeAnExistingFile())

		// The other lab gone, a rerun resumes from the run that stopped the study.
		f.calls = nil
		_, err = execute(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(f.calls).To(HaveLen(7))
		Expect(f.calls[0]).To(Equal("p/load-sharing+ignore-504/rep1 100"))
	})

	It("gives a p95 only from 20 values on", func() {
		p := planOf(strings.Replace(twoExperiments(), "repeat: 3", "repeat: 20", 1), false)
		res, err := execute(p)
		Expect(err).NotTo(HaveOccurred())
		v := res.Experiments[0].Variants[0]
		Expect(v.Metric("time_to_detect_s").Stat.P95).NotTo(BeNil(), "20 runs")
		Expect(res.Experiments[1].Variants[0].Metric("time_to_detect_s").Stat.P95).To(BeNil(), "2 runs")
	})

	It("stops when interrupted and keeps the outputs of the runs so far", func() {
		p := planOf(twoExperiments(), false)
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		run := func(c context.Context, sc *scenario.Scenario, dir string, seed int64) (*scenario.Outcome, *report.Summary, error) {
			n++
			if n == 3 {
				cancel()
			}
			return f.run(c, sc, dir, seed)
		}
		res, err := study.Execute(ctx, study.Config{Plan: p, OutDir: out, Run: compare.RunFunc(run), NoFigures: true})
		Expect(err).To(MatchError(context.Canceled))
		Expect(study.ExitCode(err)).To(Equal(study.ExitError))
		Expect(res.RunsDone).To(Equal(3))
		Expect(filepath.Join(out, study.FileJSON)).To(BeAnExistingFile())
	})
})

var _ = Describe("the fingerprint of a run", Label("unit"), func() {
	It("ignores fields left at their zero value (a newer imslab's additions) and changes with any value set", func() {
		p := planOf(twoExperiments(), false)
		sc := p.Runs[0].Scenario
		a, err := study.Fingerprint(sc, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(a).To(HavePrefix("v2:"))

		same := *sc
		same.Traffic.Steps = []scenario.Step{} // [] instead of null: no value set
		b, err := study.Fingerprint(&same, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(b).To(Equal(a))

		c, _ := study.Fingerprint(sc, 2)
		Expect(c).NotTo(Equal(a), "another seed")
		other := *sc
		other.Traffic.Phones++
		d, _ := study.Fingerprint(&other, 1)
		Expect(d).NotTo(Equal(a), "another value")
	})
})

func fp(x float64) *float64 { return &x }
