package scenario_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
	"github.com/imslab/quasipool/topologies"
)

// netLab is a recordingLab that applies network faults: it records each ApplyNet/HealNet with its spec. Node
// addresses are 10.0.0.<k> by the order NetAddrs first sees them.
type netLab struct {
	recordingLab
	nmu   sync.Mutex
	addrs map[string]netip.Addr
	net   []string
}

func (n *netLab) NetCheck() error { return nil }
func (n *netLab) NetAddrs(node string) ([]netip.Addr, error) {
	n.nmu.Lock()
	defer n.nmu.Unlock()
	if n.addrs == nil {
		n.addrs = map[string]netip.Addr{}
	}
	if _, ok := n.addrs[node]; !ok {
		n.addrs[node] = netip.AddrFrom4([4]byte{10, 0, 0, byte(len(n.addrs) + 1)})
	}
	return []netip.Addr{n.addrs[node]}, nil
}
func (n *netLab) addr(node string) string {
	a, _ := n.NetAddrs(node)
	return a[0].String() + "/32"
}
func (n *netLab) ApplyNet(_ context.Context, node, key string, spec netfault.Spec) error {
	n.nmu.Lock()
	defer n.nmu.Unlock()
	n.net = append(n.net, fmt.Sprintf("apply %s [%s] %s", node, key, spec))
	return nil
}
func (n *netLab) HealNet(_ context.Context, node, key string) error {
	n.nmu.Lock()
	defer n.nmu.Unlock()
	n.net = append(n.net, fmt.Sprintf("heal %s [%s]", node, key))
	return nil
}

func netFaultErr(faults string) error {
	GinkgoHelper()
	_, err := scenario.Parse([]byte("name: t\nduration: 30s\ntraffic: {phones: 4}\ntopology:\n" +
		"  sites:\n    - {name: north, nodes: [dnsd, hss, bac, icscf], pcscf: [1, 2], scscf: [1, 2]}\n" +
		"    - {name: south, pcscf: [3], scscf: [3]}\nfaults:\n" + faults))
	return err
}

var _ = Describe("network fault kinds", Label("unit"), func() {
	DescribeTable("name the bad field", func(fault, want string) {
		err := netFaultErr("  - " + fault + "\n")
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(want))
	},
		Entry("partition without peers", "{kind: partition, target: pcscf1, at: 1s}", "faults[0].peers: missing"),
		Entry("a peer that is nothing", "{kind: partition, target: pcscf1, peers: [bac, nope], at: 1s}",
			`faults[0].peers[1]: "nope" is not a node`),
		Entry("a peer that is the target", "{kind: partition, target: pcscf1, peers: [pcscf], at: 1s}",
			"faults[0].peers: pcscf1 is both a target and a peer"),
		Entry("a bad direction", "{kind: partition, target: pcscf1, peers: [bac], direction: sideways, at: 1s}",
			`faults[0].direction: "sideways": must be both, in or out`),
		Entry("a partition with a loss", "{kind: partition, target: pcscf1, peers: [bac], loss: 5, at: 1s}",
			"faults[0].loss: not a field of a partition fault"),
		Entry("a kill with peers", "{kind: kill, target: pcscf1, peers: [bac], at: 1s}",
			"faults[0].peers: only for partition, loss and delay"),
		Entry("a pause with a delay", "{kind: pause, target: pcscf1, delay: 20ms, at: 1s}", "faults[0].delay: only for delay"),
		Entry("a slow with reject", "{kind: slow, target: pcscf1, cpu_percent: 5, reject: true, at: 1s}",
			"faults[0].reject: only for partition"),
		Entry("an hss-down with a rate", "{kind: hss-down, rate: 1mbit, at: 1s}", "faults[0].rate: only for rate"),
		Entry("a loss without loss", "{kind: loss, target: pcscf1, at: 1s}", "faults[0].loss: missing"),
		Entry("a loss over 100", "{kind: loss, target: pcscf1, loss: 150, at: 1s}", "faults[0].loss: 150: must be in (0, 100]"),
		Entry("a loss with reject", "{kind: loss, target: pcscf1, loss: 5, reject: true, at: 1s}",
			"faults[0].reject: not a field of a loss fault"),
		Entry("a rate that is not one", "{kind: rate, target: pcscf1, rate: fast, at: 1s}", `faults[0].rate: "fast"`),
		Entry("a rate inwards", "{kind: rate, target: pcscf1, rate: 1mbit, direction: in, at: 1s}",
			"faults[0].direction"),
		Entry("a delay without delay", "{kind: delay, target: pcscf1, at: 1s}", "faults[0].delay: missing"),
		Entry("a jitter over the delay", "{kind: delay, target: pcscf1, delay: 10ms, delay_jitter: 20ms, at: 1s}",
			"faults[0].delay_jitter: 20ms: must be between 0 and delay"),
		Entry("an isolate with peers", "{kind: isolate, target: pcscf1, peers: [bac], at: 1s}",
			"faults[0].peers: not a field of a isolate fault"),
		Entry("a site-isolate on a node", "{kind: site-isolate, target: pcscf1, at: 1s}",
			`faults[0].target: "pcscf1": a site-isolate fault names a site`),
	)

	It("accepts every kind with its own fields", func() {
		Expect(netFaultErr(`  - {kind: partition, target: pcscf1, peers: [bac, "site:south"], direction: in, reject: true, at: 1s, for: 2s}
  - {kind: isolate, target: scscf1, at: 1s}
  - {kind: site-isolate, target: "site:south", at: 10s, for: 1s}
  - {kind: loss, target: pcscf2, loss: 2.5, peers: [scscf], direction: out, at: 1s}
  - {kind: rate, target: icscf, rate: 800kbit, at: 1s}
  - {kind: delay, target: hss, delay: 20ms, delay_jitter: 5ms, peers: [icscf], at: 1s}
`)).To(Succeed())
	})

	It("partitions the target from its peers' addresses, heals exactly what it applied and records both",
		SpecTimeout(10*time.Second), func(ctx SpecContext) {
			s := twoSites("  - {kind: partition, target: pcscf1, peers: [bac, icscf], at: 50ms, for: 100ms}\n")
			l := &netLab{}
			scenario.NewInjector(l, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
			key := "partition pcscf1 at 50ms"
			Expect(l.net).To(Equal([]string{
				"apply pcscf1 [" + key + "] partition both peers=[" + l.addr("bac") + "," + l.addr("icscf") + "]",
				"heal pcscf1 [" + key + "]"}))
			Expect(l.kinds()).To(Equal([]string{"fault partition pcscf1", "fault_heal partition pcscf1"}))
			Expect(l.events[0]["peer_nodes"]).To(Equal([]string{"bac", "icscf"}))
		})

	It("isolates a site from the rest but not from itself", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: site-isolate, target: \"site:south\", at: 50ms, for: 100ms}\n")
		l := &netLab{}
		scenario.NewInjector(l, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		south := []string{"pcscf3", "pcscf4", "scscf3", "scscf4"}
		var applied []string
		for _, op := range l.net {
			if strings.HasPrefix(op, "apply ") {
				applied = append(applied, op)
			}
		}
		Expect(applied).To(HaveLen(4))
		for _, n := range south {
			var except []string
			for _, o := range south {
				if o != n {
					except = append(except, l.addr(o))
				}
			}
			Expect(applied).To(ContainElement(HavePrefix("apply " + n + " ")))
			for _, op := range applied {
				if strings.HasPrefix(op, "apply "+n+" ") {
					for _, e := range except {
						Expect(op).To(ContainSubstring(e))
					}
					Expect(op).NotTo(ContainSubstring(l.addr(n)), "a node's own address is loopback traffic")
				}
			}
		}
		Expect(l.net[4:]).To(ConsistOf("heal pcscf3 [site-isolate site:south at 50ms]", "heal pcscf4 [site-isolate site:south at 50ms]",
			"heal scscf3 [site-isolate site:south at 50ms]", "heal scscf4 [site-isolate site:south at 50ms]"))
	})

	It("passes loss, rate and delay with their parameters", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: loss, target: pcscf1, loss: 5, direction: in, at: 20ms, for: 50ms}\n" +
			"  - {kind: rate, target: pcscf2, rate: 1mbit, at: 20ms, for: 50ms}\n" +
			"  - {kind: delay, target: scscf1, delay: 20ms, delay_jitter: 2ms, peers: [bac], at: 20ms, for: 50ms}\n" +
			"  - {kind: delay, target: pcscf3, delay: 30ms, at: 20ms, for: 50ms}\n")
		l := &netLab{}
		scenario.NewInjector(l, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(l.net).To(ContainElements(
			"apply pcscf1 [loss pcscf1 at 20ms] loss 5% in peers=[]",
			"apply pcscf2 [rate pcscf2 at 20ms] rate 1mbit dev *",
			"apply scscf1 [delay scscf1 at 20ms] delay 20ms jitter 2ms out dev * peers=[10.0.0.1/32]",
			// Without peers too, only what the target sends: a probe's round trip grows by the delay, not twice it.
			"apply pcscf3 [delay pcscf3 at 20ms] delay 30ms jitter 0s out dev * peers=[]",
			"heal pcscf1 [loss pcscf1 at 20ms]", "heal pcscf2 [rate pcscf2 at 20ms]", "heal scscf1 [delay scscf1 at 20ms]"))
		Expect(l.events[0]).To(SatisfyAny(HaveKeyWithValue("loss_percent", 5.0), HaveKeyWithValue("rate", "1mbit"),
			HaveKeyWithValue("delay_ms", 20.0), HaveKeyWithValue("delay_ms", 30.0)))
	})

	It("is an error on a lab that cannot apply network faults", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: isolate, target: pcscf1, at: 20ms, for: 50ms}\n")
		var errs []error
		scenario.NewInjector(&recordingLab{}, s.Faults, time.Now()).Run(ctx, func(err error) { errs = append(errs, err) })
		Expect(errs).To(HaveLen(1))
		Expect(errors.Is(errs[0], scenario.ErrUnsupported)).To(BeTrue())
	})
})

var _ = Describe("a scenario with a network fault on a lab without namespaces", Label("unit"), func() {
	sc := func() *scenario.Scenario {
		s, err := scenario.Load("../../../scenarios/partition-bac-pcscf.yaml")
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	It("stops before the run and says what is needed (no root under --netns)", func(ctx SpecContext) {
		runDir := filepath.Join(GinkgoT().TempDir(), "run")
		_, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc(), RunDir: runDir, Netns: true},
			scenario.WithOutput(GinkgoWriter),
			scenario.WithLabOptions(lab.WithNetnsCheck(func() error { return errors.New("netns: needs root (uid 1000)") })))
		Expect(err).To(MatchError(scenario.ErrNeedsNetns))
		Expect(err.Error()).To(And(ContainSubstring("scenario partition-bac-pcscf has a network fault (partition)"),
			ContainSubstring("imslab run --netns"), ContainSubstring("--backend compose"),
			ContainSubstring("needs root (uid 1000)")))
	})

	It("stops before the run on the plain local backend", func(ctx SpecContext) {
		runDir := filepath.Join(GinkgoT().TempDir(), "run")
		_, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc(), RunDir: runDir}, scenario.WithOutput(GinkgoWriter))
		Expect(err).To(MatchError(scenario.ErrNeedsNetns))
		Expect(err.Error()).To(ContainSubstring("has a network fault (partition)"))
		Expect(filepath.Join(runDir, "events", "pcscf1.jsonl")).NotTo(BeAnExistingFile(), "no node was started")
	})
})

var _ = Describe("the wan-latency scenario", Label("unit"), func() {
	It("has the sites and pools of topologies/two-sites.yaml and its 20 ms link, with 1 % loss", func() {
		s, err := scenario.Load("../../../scenarios/wan-latency.yaml")
		Expect(err).NotTo(HaveOccurred())
		t, err := topology.Parse(topologies.TwoSites)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Topology.Sites).To(Equal(t.Sites))
		Expect(s.Topology.Pools).To(Equal(t.Pools))
		want := t.Links()
		want[0].Loss = 1
		Expect(s.Topology.Links()).To(Equal(want))
	})
})
