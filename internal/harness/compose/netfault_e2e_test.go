package compose_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/testutil"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/topology"
)

// The compose lab is a lab scenarios can apply network faults to. (internal/harness/scenario imports internal/harness/compose,
// so the assertion lives in the external test package, which may import both.)
var _ scenario.NetLab = (*compose.Lab)(nil)

// peerState is a peer_state event of a node's events file.
type peerState struct {
	TNs   int64  `json:"t_ns"`
	Kind  string `json:"kind"`
	Peer  string `json:"peer"`
	Addr  string `json:"addr"`
	State string `json:"state"`
	// Reason is why (probe_timeout, …).
	Reason string `json:"reason"`
}

var _ = Describe("network faults in the containers' namespaces", Label("e2e", "docker", "netfault", "full"), Ordered, func() {
	var (
		l       *compose.Lab
		eng     *compose.Engine
		imslab  string // the imslab binary built on the host: run in a container's namespace with nsenter, it probes from there
		runDir  string
		pcscf1  string // pcscf1's address (core)
		bacNets []netip.Prefix
	)

	pidOf := func(ctx context.Context, node string) int {
		GinkgoHelper()
		cs, err := eng.Containers(ctx, l.Project())
		Expect(err).NotTo(HaveOccurred())
		Expect(cs).To(HaveKey(node))
		in, err := eng.Inspect(ctx, cs[node].ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(in.PID).NotTo(BeZero(), "%s runs", node)
		return in.PID
	}
	// inNet runs a host command in a node's network namespace, the way the lab does (and a user would).
	inNet := func(ctx context.Context, node string, argv ...string) (string, error) {
		full := append([]string{"-t", strconv.Itoa(pidOf(ctx, node)), "-n", "--"}, argv...)
		out, err := exec.CommandContext(ctx, "nsenter", full...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	ruleset := func(ctx context.Context, node string) string {
		GinkgoHelper()
		out, err := inNet(ctx, node, "nft", "-s", "list", "ruleset") // -s: no counters, which move with traffic
		Expect(err).NotTo(HaveOccurred(), out)
		return out
	}
	probe := func(ctx context.Context, from string) (string, error) {
		return inNet(ctx, from, imslab, "probe", "sip", net.JoinHostPort(pcscf1, "5060"), "--timeout", "1s")
	}
	// downAtBAC returns the peers the BAC marked down since t.
	downAtBAC := func(since time.Time) []string {
		b, _ := os.ReadFile(filepath.Join(runDir, "events", "bac.jsonl"))
		var out []string
		for _, line := range strings.Split(string(b), "\n") {
			var e peerState
			if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "peer_state" && e.State == "down" && e.TNs >= since.UnixNano() {
				out = append(out, e.Peer)
			}
		}
		return out
	}
	// bacSaw returns the BAC's peer_state events about pcscf1 since t (the BAC's own record, in the run directory).
	bacSaw := func(since time.Time) []peerState {
		f, err := os.Open(filepath.Join(runDir, "events", "bac.jsonl"))
		if err != nil {
			return nil
		}
		defer f.Close()
		var out []peerState
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			var e peerState
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Kind != "peer_state" || e.TNs < since.UnixNano() {
				continue
			}
			if host, _, _ := net.SplitHostPort(e.Addr); host == pcscf1 || e.Peer == "pcscf1" {
				out = append(out, e)
			}
		}
		return out
	}
	states := func(es []peerState) []string {
		var s []string
		for _, e := range es {
			s = append(s, e.State)
		}
		return s
	}
	// bacEvents is the BAC's events file, for failure messages.
	bacEvents := func() string {
		b, _ := os.ReadFile(filepath.Join(runDir, "events", "bac.jsonl"))
		var keep []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "peer_state") {
				keep = append(keep, line)
			}
		}
		return strings.Join(keep, "\n")
	}
	lastState := func(since time.Time) string {
		s := states(bacSaw(since))
		if len(s) == 0 {
			return ""
		}
		return s[len(s)-1]
	}

	BeforeAll(func(ctx SpecContext) {
		testutil.RequireDocker(ctx)
		repo := repoRoot()
		var err error
		eng, err = compose.NewEngine()
		Expect(err).NotTo(HaveOccurred())
		runDir = filepath.Join(GinkgoT().TempDir(), "run")
		l, err = compose.New(compose.Config{Topology: topology.Default(), RunDir: runDir, RepoDir: repo, Build: true,
			NoCapture: true, GracePeriod: 2 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		if err := l.NetCheck(); err != nil {
			if testutil.DockerRequired() {
				Fail(err.Error() + " and IMSLAB_REQUIRE_DOCKER is set")
			}
			Skip(err.Error())
		}
		imslab, err = gexec.Build("github.com/imslab/quasipool/cmd/imslab")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
		DeferCleanup(func() {
			Expect(l.Down()).To(Succeed())
			Expect(l.Close()).To(Succeed())
		})
		Expect(l.Up(ctx)).To(Succeed())

		// The BAC probes the P-CSCFs once it has forwarded to their pool: phones on the host register through it.
		cfg := ue.DefaultConfig()
		cfg.Listen, cfg.Proxy = l.PhoneListen(), l.PhoneProxy()
		cfg.Users.From, cfg.Users.Count = 1, 3
		cfg.Manual = true
		u, err := ue.New(cfg, ue.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		Expect(err).NotTo(HaveOccurred())
		uctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- u.Run(uctx) }()
		DeferCleanup(func() { cancel(); Eventually(done, 15*time.Second).Should(Receive()) })
		Eventually(u.Ready(), 10*time.Second).Should(BeClosed())
		for _, p := range u.Phones() {
			Expect(p.Register(ctx)).To(Succeed())
		}

		pa, err := l.NetAddrs("pcscf1")
		Expect(err).NotTo(HaveOccurred())
		Expect(pa).To(HaveLen(1), "pcscf1 is on the core network only")
		pcscf1 = pa[0].String()
		ba, err := l.NetAddrs("bac")
		Expect(err).NotTo(HaveOccurred())
		for _, a := range ba {
			bacNets = append(bacNets, netip.PrefixFrom(a, a.BitLen()))
		}
	}, NodeTimeout(5*time.Minute))

	It("knows every address of every container, as the engine reports them", func(ctx SpecContext) {
		cs, err := eng.Containers(ctx, l.Project())
		Expect(err).NotTo(HaveOccurred())
		for _, node := range compose.ServiceNames(l.Topology()) {
			in, err := eng.Inspect(ctx, cs[node].ID)
			Expect(err).NotTo(HaveOccurred())
			var engine []netip.Addr
			for _, a := range in.Addrs {
				engine = append(engine, a)
			}
			got, err := l.NetAddrs(node)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(ConsistOf(engine), node)
		}
		got, _ := l.NetAddrs("bac")
		Expect(got).To(HaveLen(2), "the BAC is on access and core")
		_, err = l.NetAddrs("pcscf9")
		Expect(err).To(MatchError(ContainSubstring("pcscf9: no such node")))
	}, NodeTimeout(time.Minute))

	It("partitions pcscf1 from the BAC only: the BAC marks it down, the S-CSCF still reaches it; the heal leaves nothing", func(ctx SpecContext) {
		// Before: the BAC's side reaches pcscf1 and nothing of ours is in its namespace.
		out, err := probe(ctx, "bac")
		Expect(err).NotTo(HaveOccurred(), out)
		before := ruleset(ctx, "pcscf1")
		Expect(before).NotTo(ContainSubstring("imslab_fault"))
		pid := pidOf(ctx, "pcscf1")

		t0 := time.Now()
		Expect(l.ApplyNet(ctx, "pcscf1", "partition", netfault.Partition{Peers: bacNets})).To(Succeed())
		Expect(ruleset(ctx, "pcscf1")).To(ContainSubstring("imslab_fault"), "the rule is in pcscf1's own namespace")
		Expect(ruleset(ctx, "bac")).NotTo(ContainSubstring("imslab_fault"), "and in no other")

		// Seen from the BAC's namespace, nothing answers.
		out, err = probe(ctx, "bac")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("i/o timeout"))
		// The BAC marks pcscf1 down by its probes, within its failures_to_down × interval (2 × 1 s) and a margin.
		Eventually(func() string { return lastState(t0) }).WithTimeout(10*time.Second).WithPolling(200*time.Millisecond).
			Should(Equal("down"), func() string { return "the BAC's events:\n" + bacEvents() })
		down := bacSaw(t0)[0]
		Expect(down.Reason).To(Equal("probe_timeout"), "silence, not an error: the partition drops without a word")
		GinkgoWriter.Printf("partition: the BAC marked pcscf1 down %.2f s after the apply\n", float64(down.TNs-t0.UnixNano())/1e9)
		// Seen from scscf1's namespace, pcscf1 answers: it is alive and serving.
		out, err = probe(ctx, "scscf1")
		Expect(err).NotTo(HaveOccurred(), "pcscf1 still answers the S-CSCF: %s", out)
		out, err = probe(ctx, "icscf")
		Expect(err).NotTo(HaveOccurred(), "and the I-CSCF: %s", out)
		Expect(pidOf(ctx, "pcscf1")).To(Equal(pid), "pcscf1 was not restarted")
		Expect(downAtBAC(t0)).To(ConsistOf(HavePrefix("pcscf1")), "the BAC still has pcscf2 and pcscf3: the partition is pcscf1's alone")
		Consistently(func() string { return lastState(t0) }).WithTimeout(3*time.Second).WithPolling(250*time.Millisecond).
			Should(Equal("down"), "the BAC keeps it down while the partition lasts")

		// Heal: nothing of the fault is left in pcscf1's namespace, and the BAC marks it up again.
		t1 := time.Now()
		Expect(l.HealNet(ctx, "pcscf1", "partition")).To(Succeed())
		plain, err := inNet(ctx, "pcscf1", "nft", "list", "ruleset")
		Expect(err).NotTo(HaveOccurred(), plain)
		Expect(plain).NotTo(ContainSubstring("imslab_fault"))
		Expect(ruleset(ctx, "pcscf1")).To(Equal(before), "the ruleset is as it was before the fault")
		Eventually(func() string { return lastState(t1) }).WithTimeout(10*time.Second).WithPolling(200*time.Millisecond).
			Should(Equal("up"), func() string { return "the BAC's events:\n" + bacEvents() })
		up := bacSaw(t1)
		GinkgoWriter.Printf("heal: the BAC marked pcscf1 up %.2f s after the heal\n", float64(up[len(up)-1].TNs-t1.UnixNano())/1e9)
		out, err = probe(ctx, "bac")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(l.HealNet(ctx, "pcscf1", "partition")).To(Succeed(), "healing twice is not an error")
	}, NodeTimeout(time.Minute))

	It("shows 50 % loss between pcscf1 and the BAC as probe failures: pcscf1 flaps down and up at the BAC", func(ctx SpecContext) {
		Eventually(func() string { out, _ := probe(ctx, "bac"); return out }).WithTimeout(5 * time.Second).
			Should(HaveSuffix(" ok"))
		before := ruleset(ctx, "pcscf1")
		t0 := time.Now()
		Expect(l.ApplyNet(ctx, "pcscf1", "loss", netfault.Loss{Percent: 50, Peers: bacNets})).To(Succeed())
		// Each probe (and its answer) crosses the loss once each way: about one in four gets through. Two lost in a
		// row mark pcscf1 down; the next that gets through marks it up: a partition never brings it up, no fault
		// never takes it down.
		Eventually(func() []string { return states(bacSaw(t0)) }).WithTimeout(40*time.Second).WithPolling(250*time.Millisecond).
			Should(ContainElements("down", "up"), func() string { return "the BAC's events while the loss lasts:\n" + bacEvents() })
		es := bacSaw(t0)
		Expect(es[0].State).To(Equal("down"))
		Expect(es[0].Reason).To(Equal("probe_timeout"))
		GinkgoWriter.Printf("loss 50%%: %d state changes of pcscf1 at the BAC in %.1f s: %v\n", len(es),
			time.Since(t0).Seconds(), states(es))
		Expect(l.HealNet(ctx, "pcscf1", "loss")).To(Succeed())
		Expect(ruleset(ctx, "pcscf1")).To(Equal(before))
		Eventually(func() string { out, _ := probe(ctx, "bac"); return out }).WithTimeout(5 * time.Second).
			Should(HaveSuffix(" ok"))
	}, NodeTimeout(time.Minute))

	It("drops the faults of a container that is killed and started again, and applies in its new namespace", func(ctx SpecContext) {
		Expect(l.ApplyNet(ctx, "pcscf1", "partition", netfault.Partition{Peers: bacNets})).To(Succeed())
		oldPID := pidOf(ctx, "pcscf1")
		Expect(ruleset(ctx, "pcscf1")).To(ContainSubstring("imslab_fault"))

		Expect(l.Kill("pcscf1")).To(Succeed())
		Expect(l.Start(ctx, "pcscf1")).To(Succeed())
		Expect(pidOf(ctx, "pcscf1")).NotTo(Equal(oldPID))
		Expect(ruleset(ctx, "pcscf1")).NotTo(ContainSubstring("imslab_fault"), "a fresh namespace: the fault is gone")
		out, err := probe(ctx, "bac")
		Expect(err).NotTo(HaveOccurred(), "the BAC reaches the new pcscf1: %s", out)

		// The heal of a fault whose namespace is gone has nothing to do: no error, and the lab says what happened.
		Expect(l.HealNet(ctx, "pcscf1", "partition")).To(Succeed())
		b, err := os.ReadFile(filepath.Join(runDir, "events", "lab.jsonl"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(MatchRegexp(`"keys":\["partition"\].*"kind":"net_fault_gone"|"kind":"net_fault_gone".*"keys":\["partition"\]`))

		// Applied again, the fault lands in the new namespace, and heals clean.
		before := ruleset(ctx, "pcscf1")
		Expect(l.ApplyNet(ctx, "pcscf1", "partition", netfault.Partition{Peers: bacNets})).To(Succeed())
		Expect(ruleset(ctx, "pcscf1")).To(ContainSubstring("imslab_fault"))
		out, err = probe(ctx, "bac")
		Expect(err).To(HaveOccurred(), out)
		Expect(l.HealNet(ctx, "pcscf1", "partition")).To(Succeed())
		Expect(ruleset(ctx, "pcscf1")).To(Equal(before))

		// A stopped container has no namespace to apply in: a clear error.
		Expect(l.Kill("pcscf1")).To(Succeed())
		Eventually(func() error {
			return l.ApplyNet(ctx, "pcscf1", "loss", netfault.Loss{Percent: 10})
		}).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("not running")))
		Expect(l.Start(ctx, "pcscf1")).To(Succeed())
	}, NodeTimeout(2*time.Minute))

	It("heals what is still applied when the lab goes down", func(ctx SpecContext) {
		Expect(l.ApplyNet(ctx, "scscf1", "loss", netfault.Loss{Percent: 20})).To(Succeed())
		Expect(ruleset(ctx, "scscf1")).To(ContainSubstring("imslab_fault"))
		// Hold scscf1's namespace open: it outlives the container, so what Down left in it can be read after.
		ns, err := os.Open("/proc/" + strconv.Itoa(pidOf(ctx, "scscf1")) + "/ns/net")
		Expect(err).NotTo(HaveOccurred())
		defer ns.Close()
		held := func() string {
			cmd := exec.CommandContext(ctx, "nsenter", "--net=/proc/self/fd/3", "--", "nft", "-s", "list", "ruleset")
			cmd.ExtraFiles = []*os.File{ns}
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			return string(out)
		}
		Expect(held()).To(ContainSubstring("imslab_fault"), "the held namespace is scscf1's")

		Expect(l.Down()).To(Succeed()) // the DeferCleanup's Down is then a no-op
		cs, err := eng.Containers(ctx, l.Project())
		Expect(err).NotTo(HaveOccurred())
		Expect(cs).To(BeEmpty(), "the project is gone")
		Expect(held()).NotTo(ContainSubstring("imslab_fault"), "Down healed the loss before it removed the container")
	}, NodeTimeout(2*time.Minute))
})
