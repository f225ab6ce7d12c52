package scenario_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// timedNetLab is a netLab that also records when each ApplyNet and HealNet happened.
type timedNetLab struct {
	netLab
	tmu sync.Mutex
	at  []time.Time
}

func (t *timedNetLab) ApplyNet(ctx context.Context, node, key string, spec netfault.Spec) error {
	t.tmu.Lock()
	t.at = append(t.at, time.Now())
	t.tmu.Unlock()
	return t.netLab.ApplyNet(ctx, node, key, spec)
}

func (t *timedNetLab) HealNet(ctx context.Context, node, key string) error {
	t.tmu.Lock()
	t.at = append(t.at, time.Now())
	t.tmu.Unlock()
	return t.netLab.HealNet(ctx, node, key)
}

var _ = Describe("flap in mode partition and dns-down in mode unreachable", Label("unit"), func() {
	DescribeTable("name the bad field", func(fault, want string) {
		err := netFaultErr("  - " + fault + "\n")
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(want))
	},
		Entry("a flap mode that is none", "{kind: flap, target: pcscf1, mode: sideways, period: 1s, at: 1s, for: 4s}",
			`faults[0].mode: "sideways": must be kill or partition`),
		Entry("a partition flap without period", "{kind: flap, target: pcscf1, mode: partition, peers: [bac], at: 1s, for: 4s}",
			"faults[0].period: missing"),
		Entry("a partition flap shorter than two periods",
			"{kind: flap, target: pcscf1, mode: partition, period: 2s, at: 1s, for: 3s}", "faults[0].for: 3s: a flap lasts at least two periods"),
		Entry("a partition flap without for", "{kind: flap, target: pcscf1, mode: partition, period: 1s, at: 1s}",
			"faults[0].for: "),
		Entry("a partition flap on a pool", "{kind: flap, target: pcscf, mode: partition, period: 1s, at: 1s, for: 4s}",
			`faults[0].target: "pcscf": a flap fault acts on one node`),
		Entry("a partition flap with a loss", "{kind: flap, target: pcscf1, mode: partition, loss: 5, period: 1s, at: 1s, for: 4s}",
			"faults[0].loss: not a field of a flap fault"),
		Entry("a partition flap whose peer is the target",
			"{kind: flap, target: pcscf1, mode: partition, peers: [pcscf], period: 1s, at: 1s, for: 4s}",
			"faults[0].peers: pcscf1 is both a target and a peer"),
		Entry("a partition flap with a bad direction",
			"{kind: flap, target: pcscf1, mode: partition, peers: [bac], direction: up, period: 1s, at: 1s, for: 4s}",
			`faults[0].direction: "up": must be both, in or out`),
		Entry("a kill flap with peers", "{kind: flap, target: pcscf1, peers: [bac], period: 1s, at: 1s, for: 4s}",
			"faults[0].peers: only for a flap with mode: partition"),
		Entry("a kill flap with reject", "{kind: flap, target: pcscf1, mode: kill, reject: true, period: 1s, at: 1s, for: 4s}",
			"faults[0].reject: only for a flap with mode: partition"),
		Entry("a dns-down mode that is none", "{kind: dns-down, mode: pause, at: 1s}",
			`faults[0].mode: "pause": must be kill or unreachable`),
		Entry("an unreachable dns-down with peers", "{kind: dns-down, mode: unreachable, peers: [bac], at: 1s}",
			"faults[0].peers: only for partition"),
		Entry("an unreachable dns-down with a period", "{kind: dns-down, mode: unreachable, period: 1s, at: 1s}",
			"faults[0].period: only for flap"),
		Entry("an unreachable dns-down on another node", "{kind: dns-down, target: hss, mode: unreachable, at: 1s}",
			`faults[0].target: "hss" is a node of kind hss; a dns-down fault acts on a dns`),
		Entry("an hss-down made unreachable", "{kind: hss-down, mode: unreachable, at: 1s}",
			`faults[0].mode: "unreachable": must be kill or pause`),
		Entry("a kill with a mode", "{kind: kill, target: pcscf1, mode: partition, at: 1s}",
			"faults[0].mode: only for hss-down, dns-down and flap"),
	)

	It("accepts the new modes with their own fields, and the old ones as before", func() {
		Expect(netFaultErr(`  - {kind: flap, target: pcscf1, mode: partition, peers: [bac, "site:south"], direction: in, reject: true, period: 1s, at: 1s, for: 4s}
  - {kind: flap, target: scscf1, mode: partition, period: 1s, at: 1s, for: 2s}
  - {kind: flap, target: scscf2, mode: kill, period: 1s, at: 1s, for: 2s}
  - {kind: dns-down, mode: unreachable, at: 1s, for: 2s}
  - {kind: dns-down, mode: kill, at: 5s, for: 2s}
`)).To(Succeed())
	})

	It("partitions and heals the target every period until for is over and leaves it healed",
		SpecTimeout(10*time.Second), func(ctx SpecContext) {
			s := twoSites("  - {kind: flap, target: pcscf1, mode: partition, peers: [bac], at: 100ms, for: 500ms, period: 100ms}\n")
			l := &timedNetLab{}
			t0 := time.Now()
			scenario.NewInjector(l, s.Faults, t0).Run(ctx, func(err error) { Fail(err.Error()) })
			key := "flap pcscf1 at 100ms"
			apply := "apply pcscf1 [" + key + "] partition both peers=[" + l.addr("bac") + "]"
			heal := "heal pcscf1 [" + key + "]"
			Expect(l.net).To(Equal([]string{apply, heal, apply, heal, apply, heal}))
			for i, at := range l.at {
				want := time.Duration(i+1) * 100 * time.Millisecond
				Expect(at.Sub(t0)).To(BeNumerically("~", want, 40*time.Millisecond), l.net[i])
			}
			Expect(l.ops()).To(BeEmpty(), "nothing killed or started")
			Expect(l.kinds()).To(Equal([]string{"fault flap pcscf1", "fault_heal flap pcscf1"}))
			Expect(l.events[0]).To(And(HaveKeyWithValue("mode", "partition"), HaveKeyWithValue("period_s", 0.1),
				HaveKeyWithValue("peer_nodes", []string{"bac"})))
		})

	It("isolates a flapping node that has no peers, and heals it when for ends in a down phase",
		SpecTimeout(10*time.Second), func(ctx SpecContext) {
			s := twoSites("  - {kind: flap, target: scscf2, mode: partition, at: 50ms, for: 250ms, period: 100ms}\n")
			l := &timedNetLab{}
			t0 := time.Now()
			scenario.NewInjector(l, s.Faults, t0).Run(ctx, func(err error) { Fail(err.Error()) })
			apply := "apply scscf2 [flap scscf2 at 50ms] isolate except=[]"
			heal := "heal scscf2 [flap scscf2 at 50ms]"
			// cut at 50ms, healed at 150ms, cut at 250ms, healed at the end of for (300ms)
			Expect(l.net).To(Equal([]string{apply, heal, apply, heal}))
			Expect(l.at[3].Sub(t0)).To(BeNumerically("~", 300*time.Millisecond, 40*time.Millisecond))
		})

	It("partitions a drawn member (random:pcscf) from its peers, not from everyone", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: flap, target: \"random:pcscf\", mode: partition, peers: [bac], at: 20ms, for: 100ms, period: 50ms}\n").
			Resolve(7)
		l := &netLab{}
		scenario.NewInjector(l, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(l.net).To(HaveLen(2), "cut at 20ms, healed at 70ms; for ends at 120ms")
		Expect(l.net[0]).To(And(HavePrefix("apply "+s.Faults[0].Target+" "), HaveSuffix("partition both peers=["+l.addr("bac")+"]")))
	})

	It("makes dnsd unreachable while it runs, then heals it", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: dns-down, mode: unreachable, at: 50ms, for: 100ms}\n")
		l := &netLab{}
		scenario.NewInjector(l, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(l.net).To(Equal([]string{"apply dnsd [dns-down dnsd at 50ms] isolate except=[]",
			"heal dnsd [dns-down dnsd at 50ms]"}))
		Expect(l.ops()).To(BeEmpty(), "dnsd is not killed")
		Expect(l.kinds()).To(Equal([]string{"fault dns-down dnsd", "fault_heal dns-down dnsd"}))
		Expect(l.events[0]).To(HaveKeyWithValue("mode", "unreachable"))
	})

	It("keeps kill as the default of both", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: dns-down, at: 50ms, for: 100ms}\n  - {kind: flap, target: pcscf2, at: 50ms, for: 200ms, period: 100ms}\n")
		l := &netLab{}
		scenario.NewInjector(l, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(l.net).To(BeEmpty())
		Expect(l.ops()).To(ConsistOf("kill dnsd", "start dnsd", "kill pcscf2", "start pcscf2"))
		Expect(s.NetworkFaults()).To(BeEmpty())
	})

	It("is an error on a lab that cannot apply network faults", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: flap, target: pcscf1, mode: partition, at: 20ms, for: 100ms, period: 50ms}\n" +
			"  - {kind: dns-down, mode: unreachable, at: 20ms, for: 50ms}\n")
		var mu sync.Mutex
		var errs []error
		l := &recordingLab{}
		scenario.NewInjector(l, s.Faults, time.Now()).Run(ctx, func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		})
		Expect(errs).To(HaveLen(2))
		for _, err := range errs {
			Expect(errors.Is(err, scenario.ErrUnsupported)).To(BeTrue())
		}
		Expect(l.ops()).To(BeEmpty())
	})

	It("stops before the run on the plain local backend and names the modes", func(ctx SpecContext) {
		s := twoSites("  - {kind: flap, target: pcscf1, mode: partition, peers: [bac], at: 5s, for: 4s, period: 1s}\n" +
			"  - {kind: dns-down, mode: unreachable, at: 5s, for: 2s}\n")
		Expect(s.NetworkFaults()).To(HaveLen(2))
		runDir := filepath.Join(GinkgoT().TempDir(), "run")
		_, err := scenario.Run(ctx, scenario.RunConfig{Scenario: s, RunDir: runDir}, scenario.WithOutput(GinkgoWriter))
		Expect(err).To(MatchError(scenario.ErrNeedsNetns))
		Expect(err.Error()).To(And(ContainSubstring("network fault (flap mode partition, dns-down mode unreachable)"),
			ContainSubstring("imslab run --netns")))
		Expect(filepath.Join(runDir, "events", "pcscf1.jsonl")).NotTo(BeAnExistingFile(), "no node was started")
		Expect(strings.Join(s.Faults[0].PeerNodes, ",")).To(Equal("bac"))
	})
})
