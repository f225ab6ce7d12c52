package compare_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/analysis/provenance"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
)

func fp(x float64) *float64 { return &x }

// fixture is the summary of a pcscf1 kill at 20 s with three affected users: taken over at once (quasi-pool) or
// served when each re-registers (load-sharing).
func fixture(scheme string) *report.Summary {
	s := &report.Summary{Scenario: "compare-pcscf-kill", DurationS: 60, AffectedUsers: 3,
		Faults:        []report.Fault{{Kind: "kill", Target: "pcscf1", AtS: 20, T0S: 20}},
		TimeToDetectS: map[string]float64{"bac": 1.5, "scscf1": 2.2},
		Calls:         report.CallCounts{Total: 400, Answered: 390, Failed: 10},
		SetupLatencyMs: report.SetupLatency{Normal: report.Latency{Count: 300, P50: 20, P95: 40},
			Takeover: report.Latency{Count: 60, P50: 30, P95: 900}},
		Signalling: &report.Signalling{CxPerAffectedUser: map[string]float64{"LIR": 12, "total": 14, "SAR": 2},
			CxPerOtherUser: map[string]float64{"LIR": 10, "total": 10}, SIPPerAffectedUser: 300, SIPPerOtherUser: 280},
	}
	rereg := []float64{5, 15, 30}
	for i, r := range rereg {
		u := report.UserKPI{IMPU: "sip:user000" + string(rune('1'+i)) + "@ims.test", Fault: "pcscf1", T0S: 20,
			ReregS: fp(r)}
		if scheme == topology.SchemeQuasiPool {
			u.MOInterruptionS, u.MTInterruptionS, u.MOTakenOver, u.MTTakenOver = fp(1.8), fp(2.0), true, true
		} else {
			u.MOInterruptionS, u.MTInterruptionS = fp(r+0.3), fp(r+0.5)
		}
		s.Users = append(s.Users, u)
	}
	for i := 0; i < 30; i++ {
		b := report.Bin{StartS: float64(2 * i), AffectedAttempts: 6, AffectedSucceeded: 6, OthersAttempts: 20, OthersSucceeded: 20}
		if i >= 10 && i < 12 || scheme != topology.SchemeQuasiPool && i >= 10 && i < 20 {
			b.AffectedSucceeded = 1
		}
		s.Bins = append(s.Bins, b)
	}
	if scheme == topology.SchemeQuasiPool {
		s.MO = report.Direction{Attempts: 240, Succeeded: 236, UsersAttempted: 3, AffectedUsersWithSuccess: 3,
			TakenOverBeforeReregistration: fp(1), InterruptionS: &report.Percentiles{Count: 3, P50: 1.8, P95: 1.8, Max: 1.8}}
		s.MT = report.Direction{Attempts: 240, Succeeded: 238, UsersAttempted: 3, AffectedUsersWithSuccess: 3,
			TakenOverBeforeReregistration: fp(1), InterruptionS: &report.Percentiles{Count: 3, P50: 2, P95: 2, Max: 2}}
	} else {
		s.MO = report.Direction{Attempts: 240, Succeeded: 140, UsersAttempted: 3,
			TakenOverBeforeReregistration: fp(0), InterruptionS: &report.Percentiles{Count: 3, P50: 15.3, P95: 30.3, Max: 30.3}}
		s.MT = report.Direction{Attempts: 200, Succeeded: 120, UsersAttempted: 3,
			TakenOverBeforeReregistration: fp(0), InterruptionS: &report.Percentiles{Count: 3, P50: 15.5, P95: 30.5, Max: 30.5}}
	}
	return s
}

func loadScenario() *scenario.Scenario {
	GinkgoHelper()
	sc, err := scenario.Load(filepath.Join("..", "..", "..", "scenarios", "compare-pcscf-kill.yaml"))
	Expect(err).NotTo(HaveOccurred())
	return sc
}

// fakeRun records what it was asked to run and returns the fixture of the scheme.
type fakeRun struct {
	mu    sync.Mutex
	runs  []*scenario.Scenario
	dirs  []string
	seeds []int64
	fail  string // variant dir name that fails
	busy  bool   // the failing run finds its ports taken (lab.ErrPortInUse)
}

func (f *fakeRun) run(_ context.Context, sc *scenario.Scenario, dir string, seed int64) (*scenario.Outcome, *report.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs, f.dirs, f.seeds = append(f.runs, sc), append(f.dirs, dir), append(f.seeds, seed)
	if f.fail != "" && filepath.Base(dir) == f.fail {
		if f.busy {
			return nil, nil, fmt.Errorf("lab: pcscf1 sip is in use: %w", lab.ErrPortInUse)
		}
		return nil, nil, errors.New("lab did not start")
	}
	s := fixture(sc.Topology.Pools.PCSCF.SchemeOf())
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	res := scenario.Evaluate(sc.Expectations, s)
	return &scenario.Outcome{RunDir: dir, Seed: seed, Results: res, Passed: scenario.Passed(res)}, s, nil
}

var _ = Describe("variants", Label("unit"), func() {
	It("reads scheme+option and refuses unknown schemes and options", func() {
		v, err := compare.ParseVariant("load-sharing+ignore-504")
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Scheme).To(Equal(topology.SchemeLoadSharing))
		Expect(v.Options).To(Equal([]string{"ignore-504"}))
		_, err = compare.ParseVariant("pool")
		Expect(err).To(MatchError(ContainSubstring(`"pool" is not a scheme`)))
		_, err = compare.ParseVariant("quasi-pool+fast")
		Expect(err).To(MatchError(ContainSubstring(`"fast" is not an option`)))
		_, err = compare.ParseVariants("quasi-pool,quasi-pool")
		Expect(err).To(MatchError(ContainSubstring("twice")))
	})

	It("keeps the active members equal: n-plus-1 gets one spare per pool, and the original is untouched", func() {
		sc := loadScenario()
		v, err := compare.ParseVariant("n-plus-1")
		Expect(err).NotTo(HaveOccurred())
		c, err := v.Apply(sc, 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Topology.Pools.PCSCF.Size).To(Equal(4))
		Expect(c.Topology.Pools.SCSCF.Size).To(Equal(4))
		Expect(c.Topology.Pools.PCSCF.Scheme).To(Equal("n-plus-1"))
		Expect(sc.Topology.Pools.PCSCF.Size).To(Equal(3))
		Expect(sc.Topology.Pools.PCSCF.Scheme).To(BeEmpty())
		v, _ = compare.ParseVariant("active-standby")
		c, err = v.Apply(sc, 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Topology.Pools.PCSCF.Size).To(Equal(3), "the standbys are nodes of their own, not pool members")
		Expect(compare.Members("active-standby", 3)).To(Equal(6))
		Expect(compare.SpareCapacity("n-plus-1", 3)).To(BeNumerically("~", 0.25))
		Expect(compare.SpareCapacity("active-standby", 3)).To(BeNumerically("~", 0.5))
		Expect(compare.SpareCapacity("quasi-pool", 3)).To(BeZero())
	})
})

var _ = Describe("the mutual scheme in a comparison", Label("unit"), func() {
	It("needs an even number of active members and says how to get one", func() {
		sc := loadScenario()
		v, err := compare.ParseVariant("mutual")
		Expect(err).NotTo(HaveOccurred())
		_, err = v.Apply(sc, 0)
		Expect(err).To(MatchError(ContainSubstring("3 active members per pool: mutual pairs them")))
		Expect(err).To(MatchError(ContainSubstring("--pool-size 4")))
		c, err := v.Apply(sc, 4)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Topology.Pools.PCSCF.Size).To(Equal(4))
		Expect(c.Topology.Pools.SCSCF.Scheme).To(Equal("mutual"))
		Expect(compare.Members("mutual", 4)).To(Equal(4), "no extra processes: both members of a pair are active")
		Expect(compare.SpareCapacity("mutual", 4)).To(BeZero())
		Expect(compare.StateReplicated("mutual")).To(BeTrue())
	})

	It("runs at --pool-size and prints the study's 1+1互备 column beside the measurement", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		vs, err := compare.ParseVariants("quasi-pool,mutual")
		Expect(err).NotTo(HaveOccurred())
		f := &fakeRun{}
		res, err := compare.Run(ctx, compare.Config{Scenario: loadScenario(), Variants: vs, OutDir: dir, Run: f.run,
			PoolSize: 4})
		Expect(err).NotTo(HaveOccurred())
		Expect(f.runs[0].Topology.Pools.PCSCF.Size).To(Equal(4), "every scheme gets the same active members")
		Expect(f.runs[1].Topology.Pools.SCSCF.Size).To(Equal(4))
		Expect(res.Rows[1].ActiveMembers).To(Equal([2]int{4, 4}))
		md, err := os.ReadFile(filepath.Join(dir, "compare.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## The study's Table 1 beside the measurement"))
		Expect(string(md)).To(ContainSubstring("| Table 1 row | quasi-pool (准POOL) | mutual (1+1互备) |"))
		Expect(string(md)).To(ContainSubstring("| 倒换风险 (switchover risk) | study: 小 (low) · measured: not measured by this scenario | study: 小 (low) ·"))
		Expect(string(md)).To(ContainSubstring("study: 是（HSS共享或容灾查询） (yes, through the HSS) · measured: member to member: no; 0 replication messages"))
		Expect(string(md)).To(ContainSubstring("study: 1倍 (1×) · measured: 0 % of the processes idle; by configuration one failure adds 100 % to the load of the partner; survivors' load not measured in this run"))
		Expect(string(md)).To(ContainSubstring("study: 1/(N-1) · measured: 0 % of the processes idle; by configuration one failure adds 33 % to the load of each survivor"))
		Expect(string(md)).To(ContainSubstring("study: 全部 (all) · measured: 100 % MO / 100 % MT of the 3 affected users"))
		Expect(string(md)).To(ContainSubstring("seven values for six columns"))
		h, err := os.ReadFile(filepath.Join(dir, "compare.html"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(h)).To(ContainSubstring("<th>mutual (1+1互备)</th>"))
	}, SpecTimeout(30*time.Second))

	It("has the study's words for every scheme", func() {
		for _, s := range topology.Schemes {
			Expect(compare.Study[s].Name).NotTo(BeEmpty(), s)
			Expect(compare.Study[s].Values).NotTo(ContainElement(""), s)
		}
	})
})

var _ = Describe("the measured Table 1", Label("unit"), func() {
	It("has the columns of the study and the signalling on top of an unaffected user's", func() {
		qp, _ := compare.ParseVariant("quasi-pool")
		r := compare.RowOf(qp, [2]int{3, 3}, "quasi-pool", fixture("quasi-pool"), nil, nil)
		Expect(*r.TimeToDetectS).To(Equal(1.5))
		Expect(*r.MO.TakenOver).To(Equal(1.0))
		Expect(r.MO.Failed).To(Equal(4))
		Expect(r.CxExtraPerUser).To(Equal(map[string]float64{"LIR": 2, "SAR": 2, "total": 4}))
		Expect(*r.SIPExtraPerUser).To(Equal(20.0))
		Expect(r.SpareCapacity).To(BeZero())

		ls, _ := compare.ParseVariant("load-sharing")
		r = compare.RowOf(ls, [2]int{3, 3}, "load-sharing", fixture("load-sharing"), nil, nil)
		Expect(*r.MT.TakenOver).To(BeZero())
		Expect(*r.MT.ReregGapP50S).To(BeNumerically("~", 0.5, 1e-9), "MT service comes back with re-registration")
	})

	It("takes the faulted pool's measured member load for the redundancy row", func() {
		qp, _ := compare.ParseVariant("quasi-pool")
		s := fixture("quasi-pool")
		ratio, cpu := 1.48, 1.3
		s.MemberLoad = &report.MemberLoad{Members: []report.MemberLoadRow{
			{Node: "scscf1", Pool: "scscf"}, {Node: "pcscf1", Pool: "pcscf", Faulted: true}},
			Pools: map[string]*report.PoolLoad{"pcscf": {PeakLoadRatio: &ratio, CPUPeakRatio: &cpu},
				"scscf": {}}}
		r := compare.RowOf(qp, [2]int{3, 3}, "quasi-pool", s, nil, nil)
		Expect(*r.PeakLoadRatio).To(Equal(1.48))
		Expect(*r.CPUPeakRatio).To(Equal(1.3))
		rep, err := compare.Aggregate("x", "quasi-pool", []compare.RepeatRun{{Seed: 1, Summary: s}, {Seed: 2, Summary: s}})
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Metric("peak_load_ratio")).NotTo(BeNil())
		Expect(rep.Metric("peak_load_ratio").Stat.Mean).To(Equal(1.48))
	})

	It("gives a taken-over share an interval on the users tested (effective n), not on the runs", func() {
		// Five runs in which none of 10 affected users tested was served before re-registering.
		var runs []compare.RepeatRun
		for i := range 5 {
			s := fixture("load-sharing")
			zero := 0.0
			s.MO.TakenOverBeforeReregistration, s.MO.UsersTested = &zero, 10
			s.MT.TakenOverBeforeReregistration, s.MT.UsersTested = &zero, 10
			runs = append(runs, compare.RepeatRun{Seed: int64(i + 1), Summary: s})
		}
		rep, err := compare.Aggregate("x", "load-sharing", runs)
		Expect(err).NotTo(HaveOccurred())
		for _, kpi := range []string{"mo_taken_over", "mt_taken_over"} {
			m := rep.Metric(kpi)
			Expect(m).NotTo(BeNil(), kpi)
			Expect(m.Stat.Method).To(Equal(stats.MethodSharesUsers), kpi)
			Expect(m.Stat.MeanCI.Low).To(BeZero())
			Expect(m.Stat.MeanCI.High).To(BeNumerically(">", 0), "no zero-width interval")
			Expect(m.Stat.MeanCI.High).To(BeNumerically("<", 0.25), "50 users tested, not 5 runs (which give 0.522)")
		}
		runs[2].Summary.MO.UsersTested = 0
		rep, err = compare.Aggregate("x", "load-sharing", runs)
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Metric("mo_taken_over").Stat.Method).To(Equal(stats.MethodSharesRuns), "a run without users: the runs")
	})

	It("writes one row per scheme in table1.csv, compare.md/html/json and the plots", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		vs, err := compare.ParseVariants("quasi-pool,load-sharing,n-plus-1")
		Expect(err).NotTo(HaveOccurred())
		f := &fakeRun{}
		prov := provenance.Collect("", []string{"imslab", "compare", "x.yaml"})
		res, err := compare.Run(ctx, compare.Config{Scenario: loadScenario(), Variants: vs, OutDir: dir, Run: f.run,
			Provenance: &prov})
		Expect(err).NotTo(HaveOccurred())
		Expect(compare.ExitCode(err)).To(Equal(compare.ExitOK))
		md, err := os.ReadFile(filepath.Join(dir, "compare.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("Code: commit `" + prov.Commit + "`"))
		Expect(prov.Commit).To(MatchRegexp(`^[0-9a-f]{40}$`))

		By("running the same seed in one directory per scheme, with the spare for n-plus-1")
		Expect(f.seeds).To(HaveLen(3))
		Expect(f.seeds[0]).NotTo(BeZero())
		Expect(f.seeds).To(HaveEach(f.seeds[0]))
		Expect(f.dirs).To(Equal([]string{filepath.Join(dir, "quasi-pool"), filepath.Join(dir, "load-sharing"),
			filepath.Join(dir, "n-plus-1")}))
		Expect(f.runs[2].Topology.Pools.SCSCF.Size).To(Equal(4))

		By("reporting load-sharing's missed expectations without failing")
		Expect(res.Rows[0].ExpectationsMiss).To(BeEmpty())
		Expect(res.Rows[1].ExpectationsMiss).To(ContainElement("MT takeover before re-registration"))

		for _, name := range []string{"compare.md", "compare.html", "compare.json", "table1.csv",
			"plots/success.svg", "plots/interruption_mo.svg", "plots/interruption_mt.svg", "plots/rereg_scatter.svg"} {
			Expect(filepath.Join(dir, name)).To(BeAnExistingFile())
		}
		b, err := os.ReadFile(filepath.Join(dir, "table1.csv"))
		Expect(err).NotTo(HaveOccurred())
		recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
		Expect(err).NotTo(HaveOccurred())
		Expect(recs).To(HaveLen(4))
		col := func(name string) int {
			GinkgoHelper()
			i := indexOf(recs[0], name)
			Expect(i).To(BeNumerically(">=", 0), name)
			return i
		}
		Expect(recs[1][col("variant")]).To(Equal("quasi-pool"))
		Expect(recs[1][col("mt_taken_over")]).To(Equal("1"))
		Expect(recs[2][col("mt_taken_over")]).To(Equal("0"))
		Expect(recs[3][col("spare_capacity")]).To(Equal("0.25"))
		Expect(recs[3][col("pcscf_members")]).To(Equal("4"))
		Expect(recs[1][col("cx_extra_per_user_LIR")]).To(Equal("2"))

		md, err = os.ReadFile(filepath.Join(dir, "compare.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## Setup"))
		Expect(string(md)).To(ContainSubstring("## Table 1, measured"))
		Expect(string(md)).To(ContainSubstring("| load-sharing | 3/3 (3) | 0 % | no |"))
		Expect(string(md)).To(ContainSubstring("| n-plus-1 | 4/4 (3) | 25 % | no |"))
		Expect(string(md)).To(ContainSubstring("](load-sharing/users.csv)"))
		h, err := os.ReadFile(filepath.Join(dir, "compare.html"))
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Count(string(h), "<svg")).To(Equal(4))
		var j struct{ Rows []compare.Row }
		jb, err := os.ReadFile(filepath.Join(dir, "compare.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(jb, &j)).To(Succeed())
		Expect(j.Rows).To(HaveLen(3))
		scatter, err := os.ReadFile(filepath.Join(dir, "plots/rereg_scatter.svg"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(scatter)).To(ContainSubstring("load-sharing"))
	}, SpecTimeout(30*time.Second))

	It("repeats every scheme with consecutive seeds, interleaved, and aggregates each with n and a CI", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		vs, err := compare.ParseVariants("quasi-pool,load-sharing")
		Expect(err).NotTo(HaveOccurred())
		f := &fakeRun{}
		res, err := compare.Run(ctx, compare.Config{Scenario: loadScenario(), Variants: vs, OutDir: dir, Run: f.run,
			Seed: 40, Repeat: 3})
		Expect(err).NotTo(HaveOccurred())
		Expect(f.seeds).To(Equal([]int64{40, 40, 41, 41, 42, 42}), "rep 1 of every scheme, then rep 2, …")
		Expect(f.dirs).To(Equal([]string{
			filepath.Join(dir, "quasi-pool", "rep1"), filepath.Join(dir, "load-sharing", "rep1"),
			filepath.Join(dir, "quasi-pool", "rep2"), filepath.Join(dir, "load-sharing", "rep2"),
			filepath.Join(dir, "quasi-pool", "rep3"), filepath.Join(dir, "load-sharing", "rep3")}))
		Expect(res.Repeat).To(Equal(3))
		Expect(res.Rows).To(HaveLen(2))
		Expect(res.Rows[0].RunDir).To(Equal(filepath.Join("quasi-pool", "rep1")))
		for _, v := range []string{"quasi-pool", "load-sharing"} {
			Expect(filepath.Join(dir, v, "repeat.json")).To(BeAnExistingFile())
			Expect(filepath.Join(dir, v, "repeat.md")).To(BeAnExistingFile())
		}
		var rep compare.Repeat
		b, err := os.ReadFile(filepath.Join(dir, "quasi-pool", "repeat.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(b, &rep)).To(Succeed())
		Expect(rep.Runs).To(Equal(3))
		Expect(rep.Seeds).To(Equal([]int64{40, 41, 42}))
		mo := rep.Metric("mo_interruption_s")
		Expect(mo).NotTo(BeNil())
		Expect(mo.Stat.Runs).To(Equal(3))
		Expect(mo.Stat.Values).To(Equal(9), "3 affected users in each of 3 runs")
		Expect(mo.Stat.Mean).To(BeNumerically("~", 1.8, 1e-9))
		Expect(mo.Stat.MeanCI).NotTo(BeNil())
		Expect(mo.Stat.Method).To(Equal(stats.MethodClusterT), "users of one run are one cluster")
		Expect(mo.Stat.P95).To(BeNil(), "9 values: no p95")
		Expect(rep.Metric("time_to_detect_s").Stat.Method).To(Equal(stats.MethodT))
		taken := rep.Metric("mo_taken_over").Stat
		Expect(taken.Mean).To(Equal(1.0))
		Expect(taken.Method).To(Equal(stats.MethodSharesRuns))
		Expect(taken.MeanCI.Low).To(BeNumerically("~", 0.292, 1e-3), "3 of 3 runs: 0.025^(1/3), not [1, 1]")
		Expect(taken.MeanCI.High).To(Equal(1.0))
		Expect(rep.Metric("time_to_detect_s").Stat.Median).To(Equal(1.5))
		md, err := os.ReadFile(filepath.Join(dir, "compare.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## Repetitions (3 runs per scheme)"))
		Expect(string(md)).To(ContainSubstring("| quasi-pool | 3/3 | 3 [3, 3] n=3 | 1.5 [1.5, 1.5] n=3 | 1.8 [1.8, 1.8] n=3 (9 users) |"))
		Expect(string(md)).To(ContainSubstring("](quasi-pool/rep1/users.csv)"))
		h, err := os.ReadFile(filepath.Join(dir, "compare.html"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(h)).To(ContainSubstring("<h2>Repetitions (3 runs per scheme)</h2>"))
		Expect(string(h)).To(ContainSubstring("<td>1.8 [1.8, 1.8] n=3 (9 users)</td>"))
	}, SpecTimeout(30*time.Second))

	It("records a run that could not be carried out with --keep-going and exits 1", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		vs, _ := compare.ParseVariants("quasi-pool,load-sharing")
		f := &fakeRun{fail: "load-sharing"}
		res, err := compare.Run(ctx, compare.Config{Scenario: loadScenario(), Variants: vs, OutDir: dir, Run: f.run, KeepGoing: true})
		Expect(compare.ExitCode(err)).To(Equal(compare.ExitRuns))
		Expect(res.Rows).To(HaveLen(2))
		Expect(res.Rows[1].Error).To(ContainSubstring("lab did not start"))
		Expect(filepath.Join(dir, "compare.md")).To(BeAnExistingFile())

		f = &fakeRun{fail: "load-sharing"}
		_, err = compare.Run(ctx, compare.Config{Scenario: loadScenario(), Variants: vs, OutDir: GinkgoT().TempDir(), Run: f.run})
		Expect(compare.ExitCode(err)).To(Equal(compare.ExitError))

		By("stopping even with --keep-going when another lab holds the ports: every later run would fail the same way")
		vs3, _ := compare.ParseVariants("quasi-pool,load-sharing,n-plus-1")
		f = &fakeRun{fail: "load-sharing", busy: true}
		_, err = compare.Run(ctx, compare.Config{Scenario: loadScenario(), Variants: vs3, OutDir: GinkgoT().TempDir(),
			Run: f.run, KeepGoing: true})
		Expect(err).To(MatchError(lab.ErrPortInUse))
		Expect(f.runs).To(HaveLen(2), "n-plus-1 not run")
	}, SpecTimeout(30*time.Second))
})

var _ = Describe("sweeps", Label("unit"), func() {
	It("runs every combination of values and schemes and writes sweep.csv and a plot per varied parameter", func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		n, err := compare.ParseParam("pool_size=2,4")
		Expect(err).NotTo(HaveOccurred())
		e, err := compare.ParseParam("expires=60s,120s")
		Expect(err).NotTo(HaveOccurred())
		_, err = compare.ParseParam("pool_size=9")
		Expect(err).To(HaveOccurred())
		_, err = compare.ParseParam("colour=red")
		Expect(err).To(MatchError(ContainSubstring("pool_size")))
		fast, err := compare.ParseParam("provisional_timeout=0,200ms")
		Expect(err).NotTo(HaveOccurred())
		Expect(fast.Values).To(Equal([]string{"0", "200ms"}))
		_, err = compare.ParseParam("provisional_timeout=10ms")
		Expect(err).To(MatchError(ContainSubstring("provisional_timeout \"10ms\": want 0 (off) or a duration of at least 50ms")))
		vs, _ := compare.ParseVariants("quasi-pool,n-plus-1")
		f := &fakeRun{}
		rows, err := compare.Sweep(ctx, compare.SweepConfig{Scenario: loadScenario(), Params: []compare.Param{n, e},
			Variants: vs, OutDir: dir, Run: f.run, Seed: 5})
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(8))
		Expect(f.seeds).To(HaveEach(int64(5)))
		sizes := map[string]int{}
		for i, sc := range f.runs {
			sizes[filepath.Base(filepath.Dir(f.dirs[i]))+"/"+filepath.Base(f.dirs[i])] = sc.Topology.Pools.PCSCF.Size
		}
		Expect(sizes).To(HaveKeyWithValue("pool_size=2_expires=60s/quasi-pool", 2))
		Expect(sizes).To(HaveKeyWithValue("pool_size=4_expires=120s/n-plus-1", 5))
		Expect(f.runs[2].Topology.Registration.Expires).To(Equal(120 * time.Second))

		b, err := os.ReadFile(filepath.Join(dir, "sweep.csv"))
		Expect(err).NotTo(HaveOccurred())
		recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
		Expect(err).NotTo(HaveOccurred())
		Expect(recs).To(HaveLen(9))
		Expect(recs[0][:3]).To(Equal([]string{"pool_size", "expires", "variant"}))
		Expect(recs[0]).To(ContainElement("mt_interruption_p95_s"))
		Expect(filepath.Join(dir, "plots", "sweep_pool_size.svg")).To(BeAnExistingFile())
		Expect(filepath.Join(dir, "plots", "sweep_expires.svg")).To(BeAnExistingFile())
	}, SpecTimeout(30*time.Second))

	It("compares fast failure detection with the probe-based reference (provisional_timeout=0,200ms)", func(ctx SpecContext) {
		p, err := compare.ParseParam("provisional_timeout=0,200ms")
		Expect(err).NotTo(HaveOccurred())
		vs, _ := compare.ParseVariants("quasi-pool")
		f := &fakeRun{}
		rows, err := compare.Sweep(ctx, compare.SweepConfig{Scenario: loadScenario(), Params: []compare.Param{p},
			Variants: vs, OutDir: GinkgoT().TempDir(), Run: f.run, Seed: 5})
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(2))
		var got []time.Duration
		for _, sc := range f.runs {
			got = append(got, sc.Topology.Failover.ProvisionalTimeout)
			Expect(sc.Topology.Validate()).To(Succeed())
		}
		Expect(got).To(ConsistOf(time.Duration(0), 200*time.Millisecond))
	}, SpecTimeout(30*time.Second))

	It("repeats runs with a seed parameter, each run with its own seed", func(ctx SpecContext) {
		p, err := compare.ParseParam("seed=11,12,13")
		Expect(err).NotTo(HaveOccurred())
		_, err = compare.ParseParam("seed=0")
		Expect(err).To(HaveOccurred())
		vs, _ := compare.ParseVariants("quasi-pool")
		f := &fakeRun{}
		rows, err := compare.Sweep(ctx, compare.SweepConfig{Scenario: loadScenario(), Params: []compare.Param{p},
			Variants: vs, OutDir: GinkgoT().TempDir(), Run: f.run, Seed: 5})
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(3))
		Expect(f.seeds).To(Equal([]int64{11, 12, 13}))
	}, SpecTimeout(30*time.Second))

	It("repeats one scenario (imslab run --repeat) into rep<k>/ and writes repeat.json and repeat.md", func(ctx SpecContext) {
		f := &fakeRun{}
		dir := GinkgoT().TempDir()
		outcomes, agg, err := compare.RunRepeat(ctx, compare.RepeatConfig{Scenario: loadScenario(), Dir: dir, Seed: 9,
			Repeat: 2, Run: f.run})
		Expect(err).NotTo(HaveOccurred())
		Expect(outcomes).To(HaveLen(2))
		Expect(f.seeds).To(Equal([]int64{9, 10}))
		Expect(f.dirs).To(Equal([]string{filepath.Join(dir, "rep1"), filepath.Join(dir, "rep2")}))
		Expect(agg.RunDirs).To(Equal([]string{"rep1", "rep2"}))
		md, err := os.ReadFile(filepath.Join(dir, "repeat.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("2 runs asked for, 2 with a report (seeds 9, 10)"))
		Expect(string(md)).To(ContainSubstring("[rep1](rep1/report.md)"))
		Expect(filepath.Join(dir, "repeat.json")).To(BeAnExistingFile())
		_, _, err = compare.RunRepeat(ctx, compare.RepeatConfig{Scenario: loadScenario(), Dir: dir, Repeat: 1, Run: f.run})
		Expect(err).To(MatchError(ContainSubstring("repeat of at least 2")))
	}, SpecTimeout(30*time.Second))

	It("repeats every combination with consecutive seeds, interleaved, and aggregates each", func(ctx SpecContext) {
		p, err := compare.ParseParam("pool_size=2,3")
		Expect(err).NotTo(HaveOccurred())
		vs, _ := compare.ParseVariants("quasi-pool")
		f := &fakeRun{}
		dir := GinkgoT().TempDir()
		rows, err := compare.Sweep(ctx, compare.SweepConfig{Scenario: loadScenario(), Params: []compare.Param{p},
			Variants: vs, OutDir: dir, Run: f.run, Seed: 5, Repeat: 2})
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(4))
		Expect(f.seeds).To(Equal([]int64{5, 5, 6, 6}))
		Expect(f.dirs).To(Equal([]string{filepath.Join(dir, "pool_size=2", "quasi-pool", "rep1"),
			filepath.Join(dir, "pool_size=3", "quasi-pool", "rep1"), filepath.Join(dir, "pool_size=2", "quasi-pool", "rep2"),
			filepath.Join(dir, "pool_size=3", "quasi-pool", "rep2")}))
		var rep compare.Repeat
		b, err := os.ReadFile(filepath.Join(dir, "pool_size=3", "quasi-pool", "repeat.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(b, &rep)).To(Succeed())
		Expect(rep.Seeds).To(Equal([]int64{5, 6}))
		Expect(rep.Metric("mt_interruption_s").Stat.Runs).To(Equal(2))
		Expect(rep.Metric("mt_interruption_s").Stat.MeanCI).NotTo(BeNil())
		b, err = os.ReadFile(filepath.Join(dir, "sweep.csv"))
		Expect(err).NotTo(HaveOccurred())
		recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
		Expect(err).NotTo(HaveOccurred())
		rc := indexOf(recs[0], "rep")
		Expect(rc).To(BeNumerically(">=", 0))
		Expect([]string{recs[1][rc], recs[2][rc], recs[3][rc], recs[4][rc]}).To(Equal([]string{"1", "1", "2", "2"}))
		svg, err := os.ReadFile(filepath.Join(dir, "plots", "sweep_pool_size.svg"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(svg)).To(ContainSubstring("n=2 runs per point"))
	}, SpecTimeout(30*time.Second))

	It("moves the pools to larger port ranges when 8 members with standbys do not fit the default plan", func(ctx SpecContext) {
		p, err := compare.ParseParam("pool_size=8")
		Expect(err).NotTo(HaveOccurred())
		vs, _ := compare.ParseVariants("active-standby,n-plus-1,quasi-pool")
		f := &fakeRun{}
		_, err = compare.Sweep(ctx, compare.SweepConfig{Scenario: loadScenario(), Params: []compare.Param{p},
			Variants: vs, OutDir: GinkgoT().TempDir(), Run: f.run})
		Expect(err).NotTo(HaveOccurred())
		Expect(f.runs).To(HaveLen(3))
		as := f.runs[0].Topology
		Expect(as.Pools.PCSCF.Size).To(Equal(8))
		Expect(as.Nodes()).To(HaveLen(3 + 16 + 1 + 16))
		Expect(as.Validate()).To(Succeed())
		Expect(as.Pools.PCSCF.BasePort).NotTo(Equal(loadScenario().Topology.Pools.PCSCF.BasePort), "moved")
		Expect(f.runs[2].Topology.Pools.PCSCF.BasePort).To(Equal(loadScenario().Topology.Pools.PCSCF.BasePort),
			"a pool that fits keeps its ports")
	}, SpecTimeout(30*time.Second))
})

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

var _ = Describe("phone options", Label("unit"), func() {
	It("sets the phones' reaction to a 504 restoration answer", func() {
		v, err := compare.ParseVariant("load-sharing+ignore-504")
		Expect(err).NotTo(HaveOccurred())
		c, err := v.Apply(loadScenario(), 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Traffic.OnRestoration504).To(Equal("ignore"))
		v, _ = compare.ParseVariant("load-sharing+reregister-504")
		c, err = v.Apply(loadScenario(), 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Traffic.OnRestoration504).To(Equal("reregister"))
	})
})

var _ = Describe("a variant the run did not apply", Label("unit"), func() {
	It("warns when phones re-registered on a 504 under ignore-504", func() {
		v, _ := compare.ParseVariant("load-sharing+ignore-504")
		s := fixture("load-sharing")
		s.Registrations.ByKind = map[string]int{"restoration": 7}
		r := compare.RowOf(v, [2]int{3, 3}, "x", s, nil, nil)
		Expect(r.Warnings).To(ConsistOf(ContainSubstring("registered 7 times")))
		v, _ = compare.ParseVariant("load-sharing")
		Expect(compare.RowOf(v, [2]int{3, 3}, "x", s, nil, nil).Warnings).To(BeEmpty())
	})
})
