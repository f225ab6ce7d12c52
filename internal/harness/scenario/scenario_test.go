package scenario_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
)

const minimal = `
name: t
duration: 30s
traffic: {phones: 10, call_rate: 2}
`

func parseErr(doc string) error {
	GinkgoHelper()
	_, err := scenario.Parse([]byte(doc))
	Expect(err).To(HaveOccurred())
	return err
}

var _ = Describe("scenario files", Label("unit"), func() {
	It("accepts every shipped scenario and each has the faults its name says", func() {
		files, err := filepath.Glob("../../../scenarios/*.yaml")
		Expect(err).NotTo(HaveOccurred())
		names := map[string]*scenario.Scenario{}
		for _, f := range files {
			s, err := scenario.Load(f)
			Expect(err).NotTo(HaveOccurred(), f)
			Expect(s.Name).To(Equal(strings.TrimSuffix(filepath.Base(f), ".yaml")), "name matches the file")
			Expect(s.Duration).To(BeNumerically("<=", 90*time.Second), "runs stay short")
			Expect(s.Expectations).NotTo(BeEmpty())
			names[s.Name] = s
		}
		Expect(names).To(HaveKey("baseline"))
		Expect(names["baseline"].Faults).To(BeEmpty())
		for name, kind := range map[string]string{"pcscf-kill": "kill", "pcscf-pause": "pause", "scscf-kill": "kill",
			"scscf-restart": "restart"} {
			Expect(names).To(HaveKey(name))
			s := names[name]
			Expect(s.Faults).To(HaveLen(1))
			Expect(s.Faults[0].Kind).To(Equal(kind))
			Expect(s.Faults[0].Target).To(HavePrefix(strings.Split(name, "-")[0]))
			if s.Traffic.RefreshPhase != "steady" {
				// Lockstep phones re-register at about half the period: the window after the fault must fit
				// before that. Steady ones refresh at spread points of the period, some inside the window.
				Expect(s.Topology.Registration.Expires/2).To(BeNumerically(">", s.Duration), name)
			}
			var metrics []string
			for _, e := range s.Expectations {
				metrics = append(metrics, e.Metric+" "+e.ValueOf)
			}
			for _, d := range []string{"mo", "mt"} {
				// Every affected user, or every one whose takeover was tested (steady refreshes: a user that
				// refreshed before any test is no evidence either way).
				Expect(metrics).To(ContainElement(BeElementOf(d+".affected_users_with_success affected_users",
					d+".affected_users_with_success "+d+".users_tested")), name)
			}
		}
	})

	It("merges topology overrides into the default topology", func() {
		s, err := scenario.Parse([]byte(minimal + `
topology:
  pools: {pcscf: {size: 2}}
  probing: {interval: 250ms, timeout: 200ms}
  registration: {expires: 120s}
`))
		Expect(err).NotTo(HaveOccurred())
		def := topology.Default()
		Expect(s.Topology.Pools.PCSCF.Size).To(Equal(2))
		Expect(s.Topology.Pools.PCSCF.BasePort).To(Equal(def.Pools.PCSCF.BasePort), "unset fields keep the default")
		Expect(s.Topology.Pools.PCSCF.Weight).To(Equal(def.Pools.PCSCF.Weight))
		Expect(s.Topology.Pools.SCSCF).To(Equal(def.Pools.SCSCF))
		Expect(s.Topology.Probing.Interval).To(Equal(250 * time.Millisecond))
		Expect(s.Topology.Probing.FailuresToDown).To(Equal(def.Probing.FailuresToDown))
		Expect(s.Topology.Registration.Expires).To(Equal(120 * time.Second))
		Expect(s.Topology.DNS).To(Equal(def.DNS))
		_, ok := s.Topology.Node("pcscf3")
		Expect(ok).To(BeFalse())
	})

	It("reads load steps: each rate holds from its offset until the next step", func() {
		s, err := scenario.Parse([]byte("name: t\nduration: 40s\n" +
			"traffic: {phones: 10, call_rate: 10, steps: [{at: 10s, call_rate: 20}, {at: 20s, call_rate: 6}]}\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Traffic.RateAt(0)).To(Equal(10.0))
		Expect(s.Traffic.RateAt(9 * time.Second)).To(Equal(10.0))
		Expect(s.Traffic.RateAt(10 * time.Second)).To(Equal(20.0))
		Expect(s.Traffic.RateAt(25 * time.Second)).To(Equal(6.0))
	})

	It("fills the traffic defaults", func() {
		s, err := scenario.Parse([]byte(minimal))
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Traffic.FirstUser).To(Equal(1))
		Expect(s.Traffic.RegisterRate).To(Equal(50.0))
		Expect(s.Traffic.Hold).To(Equal(2 * time.Second))
		Expect(s.Traffic.Mix).To(BeNil(), "nil = every phone calls")
		Expect(s.Traffic.OnRestoration504).To(Equal("reregister"))
		Expect(s.Faults).To(BeEmpty())
	})

	It("reads the phones' answer to a restoration 504 and the pools' schemes", func() {
		s, err := scenario.Parse([]byte("name: t\nduration: 30s\n" +
			"topology: {pools: {pcscf: {scheme: load-sharing}, scscf: {scheme: n-plus-1}}}\n" +
			"traffic: {phones: 10, on_restoration_504: ignore}\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Traffic.OnRestoration504).To(Equal("ignore"))
		Expect(s.Topology.Pools.PCSCF.SchemeOf()).To(Equal("load-sharing"))
		Expect(s.Topology.Pools.SCSCF.SchemeOf()).To(Equal("n-plus-1"))
		Expect(s.Topology.Pools.PCSCF.Size).To(Equal(3), "the rest of the pool keeps its defaults")
	})

	It("names the scenario after its file when it has no name", func() {
		path := filepath.Join(GinkgoT().TempDir(), "my-test.yaml")
		Expect(os.WriteFile(path, []byte("duration: 10s\ntraffic: {phones: 1}\n"), 0o644)).To(Succeed())
		s, err := scenario.Load(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Name).To(Equal("my-test"))
	})

	It("reads the steady-state workload keys, and leaves lockstep without session timers by default", func() {
		s, err := scenario.Parse([]byte("name: t\nduration: 30s\ntraffic:\n  phones: 2\n  refresh_phase: steady\n  session_expires: 30s\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Traffic.RefreshPhase).To(Equal("steady"))
		Expect(s.Traffic.SessionExpires).To(Equal(30 * time.Second))
		s, err = scenario.Parse([]byte("name: t\nduration: 30s\ntraffic: {phones: 2}\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Traffic.RefreshPhase).To(BeEmpty(), "the phones' default, lockstep")
		Expect(s.Traffic.SessionExpires).To(BeZero())
	})

	DescribeTable("rejects a bad file, naming the field and its line",
		func(doc, want string) {
			Expect(parseErr(doc).Error()).To(ContainSubstring(want))
		},
		Entry("unknown top-level field", minimal+"durations: 3s\n", "line 5: field durations not found"),
		Entry("unknown traffic field", "name: t\nduration: 30s\ntraffic: {phones: 10, calls: 2}\n", "line 3: field calls not found"),
		Entry("unknown topology field", minimal+"topology: {pools: {pcscf: {sise: 2}}}\n", "line 5: field sise not found"),
		Entry("no phones", "name: t\nduration: 30s\ntraffic: {call_rate: 2}\n", "line 3: traffic.phones: must be at least 1"),
		Entry("unknown refresh phase", "name: t\nduration: 30s\ntraffic:\n  phones: 2\n  refresh_phase: random\n",
			`line 5: traffic.refresh_phase: must be lockstep or steady, is "random"`),
		Entry("session interval below 2 s", "name: t\nduration: 30s\ntraffic:\n  phones: 2\n  session_expires: 1s\n",
			"line 5: traffic.session_expires: must be 0 (off) or whole seconds of at least 2s, is 1s"),
		Entry("session interval not whole seconds", "name: t\nduration: 30s\ntraffic: {phones: 2, session_expires: 2500ms}\n",
			"line 3: traffic.session_expires: must be 0 (off) or whole seconds of at least 2s, is 2.5s"),
		Entry("negative session interval", "name: t\nduration: 30s\ntraffic: {phones: 2, session_expires: -5s}\n",
			"line 3: traffic.session_expires: must be 0 (off)"),
		Entry("bad restoration answer", "name: t\nduration: 30s\ntraffic: {phones: 2, on_restoration_504: panic}\n",
			`line 3: traffic.on_restoration_504: must be reregister or ignore, is "panic"`),
		Entry("shares above 1", "name: t\nduration: 30s\ntraffic: {phones: 10, bhca: 3, idle_share: 0.7, mt_only_share: 0.5}\n",
			"line 3: traffic.mt_only_share: idle_share + mt_only_share must not exceed 1"),
		Entry("model without bhca", "name: t\nduration: 30s\ntraffic: {phones: 10, idle_share: 0.2}\n",
			"line 3: traffic.bhca: must be a positive number"),
		Entry("unknown holding distribution", "name: t\nduration: 30s\ntraffic: {phones: 10, bhca: 3, holding: {dist: normal}}\n",
			`traffic.holding.dist: must be exponential or fixed, is "normal"`),
		Entry("probe interval too short", "name: t\nduration: 30s\ntraffic: {phones: 10, reachability: {interval: 1ms}}\n",
			"traffic.reachability.interval: must be at least 10ms"),
		Entry("probers beyond the numbering", "name: t\nduration: 30s\ntraffic: {phones: 10, first_user: 999990, reachability: {interval: 250ms}}\n",
			"traffic.reachability.probers: prober users 1000000..1000003 go beyond user999999, the largest the lab provisions"),
		Entry("phones beyond the numbering", "name: t\nduration: 30s\ntraffic: {phones: 1000000}\n",
			"line 3: traffic.phones: users 1..1000000 go beyond user999999, the largest population the lab provisions"),
		Entry("load step without random calls", "name: t\nduration: 30s\ntraffic: {phones: 10, steps: [{at: 5s, call_rate: 4}]}\n",
			"traffic.steps[0]: a load step needs traffic.call_rate above 0"),
		Entry("load steps out of order", "name: t\nduration: 30s\ntraffic: {phones: 10, call_rate: 2, steps: [{at: 5s, call_rate: 4}, {at: 5s, call_rate: 2}]}\n",
			"traffic.steps[1].at: 5s: must not be negative and must come after the step before"),
		Entry("negative load step rate", "name: t\nduration: 30s\ntraffic: {phones: 10, call_rate: 2, steps: [{at: 5s, call_rate: -4}]}\n",
			"traffic.steps[0].call_rate: must be zero or a positive number, is -4"),
		Entry("unknown scheme", minimal+"topology: {pools: {scscf: {scheme: hot}}}\n", "topology.pools.scscf.scheme"),
		Entry("short duration", "name: t\nduration: 0s\ntraffic: {phones: 1}\n", "line 2: duration: must be at least 1s"),
		Entry("bad topology value", minimal+"topology:\n  pools: {pcscf: {size: 0}}\n", "line 6: topology.pools.pcscf.size"),
		Entry("unknown fault kind", minimal+"faults:\n  - {kind: explode, target: pcscf1, at: 5s}\n",
			`line 6: faults[0].kind: "explode" is not a fault kind (delay, dns-down, failback, flap, hss-down, isolate, kill, loss, partition, pause, rate, restart, site-down, site-isolate, slow, stop)`),
		Entry("target not in the topology", minimal+"faults:\n  - {kind: kill, target: pcscf4, at: 5s}\n",
			`line 6: faults[0].target: "pcscf4" is not a node of the topology`),
		Entry("target outside a smaller pool", minimal+"topology: {pools: {scscf: {size: 2}}}\nfaults:\n  - {kind: kill, target: scscf3, at: 5s}\n",
			`line 7: faults[0].target: "scscf3" is not a node`),
		Entry("fault after the end", minimal+"faults:\n  - {kind: kill, target: pcscf1, at: 30s}\n",
			"faults[0].at: 30s is not before the end of the run"),
		Entry("fault lasting past the end", minimal+"faults:\n  - {kind: pause, target: pcscf1, at: 20s, for: 20s}\n",
			"faults[0].for: the fault would end at 40s"),
		Entry("duration on a restart", minimal+"faults:\n  - {kind: restart, target: scscf1, at: 5s, for: 2s}\n",
			"faults[0].for: a restart fault has no duration"),
		Entry("overlapping faults on one node", minimal+"faults:\n  - {kind: kill, target: pcscf1, at: 5s}\n  - {kind: pause, target: pcscf1, at: 10s}\n",
			"line 7: faults[1].at: 10s overlaps faults[0] on pcscf1"),
		Entry("site-down on a node", minimal+"faults:\n  - {kind: site-down, target: pcscf1, at: 5s}\n",
			`line 6: faults[0].target: "pcscf1": a site-down fault names a site (site:<name>)`),
		Entry("unknown site", minimal+"faults:\n  - {kind: site-down, target: \"site:south\", at: 5s}\n",
			`faults[0].target: "site:south" is not a node of the topology, a pool or a site (dnsd, hss, bac, pcscf1, pcscf2, pcscf3, icscf, scscf1, scscf2, scscf3, pcscf, scscf, site:default)`),
		Entry("hss-down on another node", minimal+"faults:\n  - {kind: hss-down, target: icscf, at: 5s}\n",
			`faults[0].target: "icscf" is a node of kind icscf; a hss-down fault acts on a hss`),
		Entry("hss-down with a bad mode", minimal+"faults:\n  - {kind: hss-down, mode: freeze, at: 5s}\n",
			`faults[0].mode: "freeze": must be kill or pause`),
		Entry("failback without for", minimal+"faults:\n  - {kind: failback, target: pcscf1, at: 5s}\n",
			`faults[0].for: missing: a failback fault needs for`),
		Entry("failback of a pool", minimal+"faults:\n  - {kind: failback, target: pcscf, at: 5s, for: 5s}\n",
			`faults[0].target: "pcscf": a failback fault acts on one node, not a pool or a site`),
		Entry("flap without a period", minimal+"faults:\n  - {kind: flap, target: scscf1, at: 5s, for: 10s}\n",
			`faults[0].period: missing`),
		Entry("flap shorter than two periods", minimal+"faults:\n  - {kind: flap, target: scscf1, at: 5s, for: 5s, period: 3s}\n",
			`faults[0].for: 5s: a flap lasts at least two periods`),
		Entry("slow without a share", minimal+"faults:\n  - {kind: slow, target: pcscf1, at: 5s}\n",
			`faults[0].cpu_percent: 0: must be 1..99`),
		Entry("a parameter of another kind", minimal+"faults:\n  - {kind: kill, target: pcscf1, at: 5s, cpu_percent: 5}\n",
			`faults[0].cpu_percent: only for slow`),
		Entry("a pool fault overlapping a node fault", minimal+"faults:\n  - {kind: kill, target: pcscf2, at: 5s}\n  - {kind: pause, target: pcscf, at: 10s}\n",
			"faults[1].at: 10s overlaps faults[0] on pcscf2"),
		Entry("expectation without a value", minimal+"expectations:\n  - {metric: calls.failed, op: \"==\"}\n",
			"line 6: expectations[0].value: missing"),
		Entry("expectation with both values", minimal+"expectations:\n  - {metric: a, op: \"==\", value: 1, value_of: b}\n",
			"expectations[0].value_of: give value or value_of, not both"),
		Entry("expectation with a bad op", minimal+"expectations:\n  - {metric: a, op: \"=\", value: 1}\n",
			`expectations[0].op: "=" is not one of`),
		Entry("negative jitter", minimal+"faults:\n  - {kind: kill, target: pcscf1, at: 5s, jitter: -1s}\n",
			"line 6: faults[0].jitter: must not be negative, is -1s"),
		Entry("jitter past the end", minimal+"faults:\n  - {kind: kill, target: pcscf1, at: 25s, jitter: 10s}\n",
			"faults[0].jitter: the fault could be injected as late as 35s, after the end of the run (duration 30s)"),
		Entry("jitter and for past the end", minimal+"faults:\n  - {kind: pause, target: pcscf1, at: 20s, jitter: 5s, for: 8s}\n",
			"faults[0].for: the fault would end at 33s (at the latest)"),
		Entry("random target of no pool", minimal+"faults:\n  - {kind: kill, target: \"random:icscf\", at: 5s}\n",
			`line 6: faults[0].target: "random:icscf": a random target names a pool (random:pcscf, random:scscf)`),
		Entry("random target for a site fault", minimal+"faults:\n  - {kind: site-down, target: \"random:pcscf\", at: 5s}\n",
			`faults[0].target: "pcscf1": a site-down fault names a site`),
		Entry("random member overlapping a node fault", minimal+"faults:\n  - {kind: kill, target: pcscf2, at: 5s}\n  - {kind: pause, target: \"random:pcscf\", at: 10s}\n",
			"faults[1].at: 10s overlaps faults[0] on pcscf2"),
		Entry("empty file", "", "scenario: empty file"),
	)

	It("accepts faults on one node one after the other", func() {
		_, err := scenario.Parse([]byte(minimal + "faults:\n  - {kind: pause, target: pcscf1, at: 5s, for: 5s}\n" +
			"  - {kind: restart, target: pcscf1, at: 15s}\n  - {kind: kill, target: scscf2, at: 5s, for: 1s}\n"))
		Expect(err).NotTo(HaveOccurred())
	})

	It("lists the fault kinds with a description each", func() {
		Expect(scenario.FaultKindNames()).To(Equal([]string{"delay", "dns-down", "failback", "flap", "hss-down", "isolate",
			"kill", "loss", "partition", "pause", "rate", "restart", "site-down", "site-isolate", "slow", "stop"}))
		for _, k := range scenario.FaultKinds() {
			Expect(k.Doc).NotTo(BeEmpty())
			Expect(k.Inject != nil || k.Run != nil).To(BeTrue(), k.Name)
		}
	})
})

type metrics map[string]float64

func (m metrics) Lookup(p string) (float64, bool) { v, ok := m[p]; return v, ok }

func num(v float64) *float64 { return &v }

var _ = Describe("expectations", Label("unit"), func() {
	m := metrics{"affected_users": 10, "mo.affected_users_with_success": 10, "mt.affected_users_with_success": 9,
		"mo.taken_over_before_reregistration": 1, "calls.total": 100, "calls.answered": 99, "ratio": 0.1 + 0.2}

	DescribeTable("compare a metric with a value or another metric",
		func(e scenario.Expectation, ok bool) {
			r := scenario.Evaluate([]scenario.Expectation{e}, m)
			Expect(r).To(HaveLen(1))
			Expect(r[0].OK).To(Equal(ok))
		},
		Entry(">= value holds", scenario.Expectation{Metric: "mo.taken_over_before_reregistration", Op: ">=", Value: num(0.99)}, true),
		Entry("> value fails on equal", scenario.Expectation{Metric: "mo.taken_over_before_reregistration", Op: ">", Value: num(1)}, false),
		Entry("< value", scenario.Expectation{Metric: "calls.total", Op: "<", Value: num(101)}, true),
		Entry("<= value fails", scenario.Expectation{Metric: "calls.total", Op: "<=", Value: num(99)}, false),
		Entry("== tolerates float noise", scenario.Expectation{Metric: "ratio", Op: "==", Value: num(0.3)}, true),
		Entry("value_of holds", scenario.Expectation{Metric: "mo.affected_users_with_success", Op: ">=", ValueOf: "affected_users"}, true),
		Entry("value_of fails", scenario.Expectation{Metric: "mt.affected_users_with_success", Op: ">=", ValueOf: "affected_users"}, false),
		Entry("value_of times", scenario.Expectation{Metric: "calls.answered", Op: ">=", ValueOf: "calls.total", Times: num(0.99)}, true),
		Entry("value_of times fails", scenario.Expectation{Metric: "calls.answered", Op: ">=", ValueOf: "calls.total", Times: num(0.995)}, false),
		Entry("missing metric fails", scenario.Expectation{Metric: "nope", Op: ">=", Value: num(0)}, false),
		Entry("missing value_of fails", scenario.Expectation{Metric: "calls.total", Op: ">=", ValueOf: "nope"}, false),
	)

	It("explains a missing metric and prints a table", func() {
		r := scenario.Evaluate([]scenario.Expectation{
			{Name: "affected users called", Metric: "mo.affected_users_with_success", Op: ">=", ValueOf: "affected_users"},
			{Metric: "time_to_detect_s.bac", Op: "<=", Value: num(5)},
		}, m)
		Expect(scenario.Passed(r)).To(BeFalse())
		Expect(r[1].Reason).To(Equal(`the summary has no metric "time_to_detect_s.bac"`))
		var b strings.Builder
		scenario.PrintResults(&b, r)
		Expect(b.String()).To(MatchRegexp(`EXPECTATION\s+METRIC\s+VALUE\s+EXPECTED\s+OK`))
		Expect(b.String()).To(MatchRegexp(`affected users called\s+mo.affected_users_with_success\s+10\s+>= affected_users \(10\)\s+yes`))
		Expect(b.String()).To(MatchRegexp(`time_to_detect_s.bac\s+time_to_detect_s.bac\s+-\s+<= 5\s+NO: the summary has no metric`))
		Expect(scenario.Passed(r[:1])).To(BeTrue())
	})

	It("maps outcomes to exit codes", func() {
		Expect(scenario.ExitCode(&scenario.Outcome{Passed: true}, nil)).To(Equal(0))
		Expect(scenario.ExitCode(&scenario.Outcome{Passed: false}, nil)).To(Equal(1))
		Expect(scenario.ExitCode(&scenario.Outcome{Passed: true}, errors.New("x"))).To(Equal(2))
		Expect(scenario.ExitCode(nil, nil)).To(Equal(2))
	})
})

// fakeLab records the process-control calls it gets, with their time.
type fakeLab struct {
	mu    sync.Mutex
	calls []call
	fail  map[string]error // by "op node"
}

type call struct {
	op string
	at time.Time
}

func (f *fakeLab) do(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{op, time.Now()})
	return f.fail[op]
}

func (f *fakeLab) Start(_ context.Context, n string) error { return f.do("start " + n) }
func (f *fakeLab) Stop(n string, g bool) error {
	if g {
		return f.do("stop " + n)
	}
	return f.do("kill " + n)
}
func (f *fakeLab) Kill(n string) error                       { return f.do("kill " + n) }
func (f *fakeLab) Pause(n string) error                      { return f.do("pause " + n) }
func (f *fakeLab) Resume(n string) error                     { return f.do("resume " + n) }
func (f *fakeLab) Restart(_ context.Context, n string) error { return f.do("restart " + n) }

func (f *fakeLab) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.op)
	}
	return out
}

var _ = Describe("fault schedule", Label("unit"), func() {
	faults := []scenario.Fault{
		{Kind: "pause", Target: "pcscf1", At: 300 * time.Millisecond, For: 300 * time.Millisecond},
		{Kind: "kill", Target: "scscf1", At: 100 * time.Millisecond, For: 700 * time.Millisecond},
		{Kind: "restart", Target: "icscf", At: 400 * time.Millisecond},
		{Kind: "stop", Target: "pcscf2", At: 200 * time.Millisecond},
	}

	It("orders the actions by offset, each fix after its fault", func() {
		var got []string
		for _, a := range scenario.Schedule(faults) {
			what := "inject"
			if a.Fix {
				what = "fix"
			}
			got = append(got, a.At.String()+" "+what+" "+faults[a.Fault].Target)
		}
		Expect(got).To(Equal([]string{"100ms inject scscf1", "200ms inject pcscf2", "300ms inject pcscf1",
			"400ms inject icscf", "600ms fix pcscf1", "800ms fix scscf1"}))
	})

	It("injects and fixes each fault at its offset from t0 and tracks the active ones", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		lab := &fakeLab{}
		t0 := time.Now()
		inj := scenario.NewInjector(lab, faults, t0)
		done := make(chan struct{})
		var errs []error
		go func() {
			defer close(done)
			inj.Run(ctx, func(err error) { errs = append(errs, err) })
		}()
		Eventually(inj.Active).Should(ConsistOf("scscf1 killed", "pcscf2 stopped", "pcscf1 paused"))
		Eventually(done).Should(BeClosed())
		Expect(errs).To(BeEmpty())
		Expect(lab.ops()).To(Equal([]string{"kill scscf1", "stop pcscf2", "pause pcscf1", "restart icscf",
			"resume pcscf1", "start scscf1"}))
		want := []time.Duration{100, 200, 300, 400, 600, 800}
		for i, c := range lab.calls {
			off := c.at.Sub(t0)
			Expect(off).To(BeNumerically(">=", want[i]*time.Millisecond), c.op)
			Expect(off).To(BeNumerically("<", want[i]*time.Millisecond+80*time.Millisecond), c.op)
		}
		Expect(inj.Active()).To(Equal([]string{"pcscf2 stopped"}), "a fault without for stays until the end")
	})

	It("reports a failed injection and does not try to fix that fault", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		lab := &fakeLab{fail: map[string]error{"kill scscf1": errors.New("not running")}}
		inj := scenario.NewInjector(lab, faults[1:2], time.Now())
		var errs []error
		inj.Run(ctx, func(err error) { errs = append(errs, err) })
		Expect(errs).To(HaveLen(1))
		var ae *scenario.ActionError
		Expect(errors.As(errs[0], &ae)).To(BeTrue())
		Expect(ae.Fix).To(BeFalse())
		Expect(errs[0].Error()).To(Equal("fault kill scscf1 at 100ms for 700ms: inject: not running"))
		Expect(lab.ops()).To(Equal([]string{"kill scscf1"}))
		Expect(inj.Active()).To(BeEmpty())
	})

	It("stops waiting when the run ends", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		lab := &fakeLab{}
		c, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		scenario.NewInjector(lab, faults, time.Now()).Run(c, func(error) {})
		Expect(lab.ops()).To(Equal([]string{"kill scscf1"}))
	})
})
