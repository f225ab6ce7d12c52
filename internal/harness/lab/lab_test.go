package lab_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/nf/hss"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/topology"
)

// Fake node binaries: shell scripts named after kinds, started as "<bin> --config <file>".
const (
	// pcscf: well behaved; logs a ready line, exits 0 on SIGTERM.
	goodNode = `#!/bin/sh
name=$(basename "$2" .yaml)
trap 'echo "$name stopping"; exit 0' TERM
echo "level=INFO msg=\"$name starting\""
echo "level=INFO msg=\"$name ready\" config=$2"
while :; do sleep 0.05; done
`
	// scscf: ready, but ignores SIGTERM.
	stubbornNode = `#!/bin/sh
trap '' TERM
echo "ready"
while :; do sleep 0.05; done
`
	// bac: fails at start.
	failingNode = `#!/bin/sh
echo "level=INFO msg=starting"
echo "level=ERROR msg=\"listen udp: bind: address already in use\""
exit 3
`
	// icscf: never ready.
	silentNode = `#!/bin/sh
echo "level=INFO msg=\"waiting for something\""
while :; do sleep 0.05; done
`
)

func fakeBinDir() string {
	dir := GinkgoT().TempDir()
	for kind, script := range map[string]string{"pcscf": goodNode, "scscf": stubbornNode, "bac": failingNode, "icscf": silentNode} {
		Expect(os.WriteFile(filepath.Join(dir, kind), []byte(script), 0o755)).To(Succeed())
	}
	return dir
}

func newFakeLab(only ...string) *lab.Lab {
	l, err := lab.New(lab.Config{Topology: testTopology(), RunDir: GinkgoT().TempDir(), BinDir: fakeBinDir(), Only: only,
		ReadyTimeout: 5 * time.Second, GracePeriod: 300 * time.Millisecond}, lab.WithLogger(testLogger()))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(l.Down()).To(Succeed())
		Expect(l.Close()).To(Succeed())
	})
	return l
}

var _ = Describe("lab config", Label("unit"), func() {
	DescribeTable("Validate names the bad field",
		func(mod func(*lab.Config), want string) {
			cfg := lab.Config{Topology: topology.Default(), RunDir: "run"}
			mod(&cfg)
			Expect(cfg.Validate()).To(MatchError(ContainSubstring(want)))
			_, err := lab.New(cfg)
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry("no topology", func(c *lab.Config) { c.Topology = nil }, "lab config: topology: missing"),
		Entry("invalid topology", func(c *lab.Config) { c.Topology.Domain = "" }, "lab config: topology: domain: must not be empty"),
		Entry("no run dir", func(c *lab.Config) { c.RunDir = "" }, "lab config: run_dir: missing"),
		Entry("unknown node in only", func(c *lab.Config) { c.Only = []string{"pcscf9"} }, `lab config: only: "pcscf9" is not a node`),
		Entry("negative grace", func(c *lab.Config) { c.GracePeriod = -time.Second }, "lab config: grace_period"),
		Entry("negative ready timeout", func(c *lab.Config) { c.ReadyTimeout = -time.Second }, "lab config: ready_timeout"),
	)

	It("finds the repository from a directory inside it, and not from outside", func() {
		wd, err := os.Getwd()
		Expect(err).NotTo(HaveOccurred())
		repo, err := lab.FindRepo(wd)
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Join(repo, "internal", "harness", "lab")).To(Equal(wd))
		_, err = lab.FindRepo(GinkgoT().TempDir())
		Expect(err).To(MatchError(ContainSubstring("no go.mod of github.com/imslab/quasipool")))
	})

	It("writes the run directory: topology, node configs, and an HSS config the HSS reads", func() {
		t := testTopology()
		run := GinkgoT().TempDir()
		l, err := lab.New(lab.Config{Topology: t, RunDir: run, BinDir: fakeBinDir()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Close)
		Expect(l.Prepare()).To(Succeed())

		back, err := topology.Load(filepath.Join(run, "topology.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(back).To(Equal(t))
		nc, err := topology.LoadNodeConfig(filepath.Join(run, "config", "pcscf2.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(nc.EventsFile).To(Equal(filepath.Join(run, "events", "pcscf2.jsonl")))
		d, err := topology.LoadNodeConfig(filepath.Join(run, "config", "dnsd.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(d.DNS.Topology).To(Equal(filepath.Join(run, "topology.yaml")))

		hc, err := hss.LoadConfig(filepath.Join(run, "config", "hss.yaml"))
		Expect(err).NotTo(HaveOccurred())
		n, _ := t.Node("hss")
		Expect(hc.DiameterListen).To(Equal(n.Endpoint("diameter")))
		Expect(hc.HTTPListen).To(Equal(n.Endpoint("http")))
		Expect(hc.DataDir).To(Equal(filepath.Join(run, "data", "hss")))
		Expect(hc.EventsFile).To(Equal(filepath.Join(run, "events", "hss.jsonl")))
		Expect(hc.OriginHost).To(Equal("hss.ims.test"))
		Expect(hc.OriginRealm).To(Equal("ims.test"))
		Expect(hc.LabSubscribers).To(BeTrue())
		Expect(hc.Log.Level).To(Equal("info"))
		Expect(hc.CapabilitySets).To(HaveKey("default"))
		Expect(hc.Validate()).To(Succeed(), "the HSS starts: it has peers")
		Expect(hc.AllowAnyPeer).To(BeFalse())
		Expect(hc.APITokenFile).To(Equal(lab.HSSTokenFile(run, "hss")))
		Expect(hc.Peers).To(ContainElements(
			cx.Peer{OriginHost: "icscf.ims.test", Address: "127.0.0.1"},
			cx.Peer{OriginHost: "scscf1.ims.test", Address: "127.0.0.1", ServerName: "sip:scscf1.ims.test"}))
		Expect(hc.Peers).NotTo(ContainElement(HaveField("OriginHost", HavePrefix("pcscf"))), "only Cx clients")
	})

	It("knows which nodes have a command and starts them in dependency order", func() {
		l := newFakeLab()
		var names []string
		states := map[string]lab.State{}
		for _, s := range l.Status() {
			names = append(names, s.Name)
			states[s.Name] = s.State
		}
		Expect(names).To(Equal([]string{"dnsd", "hss", "scscf1", "scscf2", "icscf", "pcscf1", "pcscf2", "bac"}))
		Expect(states).To(Equal(map[string]lab.State{"dnsd": lab.StateNotBuilt, "hss": lab.StateNotBuilt,
			"scscf1": lab.StateStopped, "scscf2": lab.StateStopped, "icscf": lab.StateStopped,
			"pcscf1": lab.StateStopped, "pcscf2": lab.StateStopped, "bac": lab.StateStopped}))
		Expect(status(l, "hss").Addresses).To(HaveLen(2))
		Expect(l.Start(context.Background(), "dnsd")).To(MatchError(lab.ErrNotBuilt))
		Expect(l.Start(context.Background(), "nope")).To(MatchError(lab.ErrUnknownNode))
		Expect(l.Kill("pcscf1")).To(MatchError(lab.ErrNotRunning))
		Expect(l.PID("pcscf1")).To(BeZero())
		Expect(l.Exited("pcscf1")).To(BeNil())
	})
})

var _ = Describe("lab process control", Label("integration"), func() {
	It("starts, kills, restarts, pauses, resumes and stops nodes, recording every step", SpecTimeout(60*time.Second), func(ctx SpecContext) {
		l := newFakeLab("pcscf1", "pcscf2", "scscf1")
		Expect(l.Up(ctx)).To(Succeed())
		for _, name := range []string{"pcscf1", "pcscf2", "scscf1"} {
			Expect(status(l, name).State).To(Equal(lab.StateReady), name)
			Expect(l.PID(name)).NotTo(BeZero())
		}
		Expect(status(l, "bac").State).To(Equal(lab.StateSkipped))
		Expect(l.Start(ctx, "bac")).To(MatchError(lab.ErrSkipped))
		Expect(l.Start(ctx, "pcscf1")).To(MatchError(lab.ErrRunning))
		log, err := os.ReadFile(l.LogFile("pcscf1"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).To(ContainSubstring("config=" + filepath.Join(l.RunDir(), "config", "pcscf1.yaml")))

		By("SIGKILL")
		pid := l.PID("pcscf1")
		Expect(l.Kill("pcscf1")).To(Succeed())
		Expect(l.Exited("pcscf1")).To(BeClosed())
		Expect(l.PID("pcscf1")).To(BeZero())
		Eventually(func() bool { return groupGone(pid) }).Should(BeTrue())
		Expect(status(l, "pcscf1")).To(And(HaveField("State", lab.StateStopped), HaveField("Exit", "signal: killed")))
		Expect(eventsOf(l, "fault", "pcscf1")).To(ConsistOf(And(HaveKeyWithValue("fault", "kill"), HaveKeyWithValue("pid", BeEquivalentTo(pid)))))
		Expect(eventsOf(l, "node_exit", "pcscf1")).To(ConsistOf(And(HaveKeyWithValue("signal", "SIGKILL"),
			HaveKeyWithValue("exit_code", BeEquivalentTo(-1)), HaveKeyWithValue("expected", true))))

		By("start again")
		Expect(l.Start(ctx, "pcscf1")).To(Succeed())
		Expect(l.PID("pcscf1")).NotTo(Or(BeZero(), Equal(pid)))
		Expect(eventsOf(l, "node_ready", "pcscf1")).To(HaveLen(2))

		By("restart")
		pid = l.PID("pcscf1")
		Expect(l.Restart(ctx, "pcscf1")).To(Succeed())
		Expect(l.PID("pcscf1")).NotTo(Or(BeZero(), Equal(pid)))
		Expect(eventsOf(l, "fault", "pcscf1")).To(ContainElement(HaveKeyWithValue("fault", "restart")))
		Expect(eventsOf(l, "node_exit", "pcscf1")[1]).To(And(HaveKeyWithValue("exit_code", BeEquivalentTo(0)),
			Not(HaveKey("signal"))), "graceful: the node's SIGTERM handler exits 0")

		By("pause and resume")
		pid = l.PID("pcscf2")
		Expect(l.Pause("pcscf2")).To(Succeed())
		Expect(status(l, "pcscf2").State).To(Equal(lab.StatePaused))
		Eventually(func() string { return procState(pid) }).Should(Equal("T"))
		Expect(l.Resume("pcscf2")).To(Succeed())
		Eventually(func() string { return procState(pid) }).ShouldNot(Equal("T"))
		Expect(status(l, "pcscf2").State).To(Equal(lab.StateReady))

		By("a graceful stop of a paused node")
		Expect(l.Pause("pcscf2")).To(Succeed())
		Expect(l.Stop("pcscf2", true)).To(Succeed())
		Expect(eventsOf(l, "node_exit", "pcscf2")).To(ConsistOf(HaveKeyWithValue("exit_code", BeEquivalentTo(0))))
		var faults []any
		for _, e := range eventsOf(l, "fault", "pcscf2") {
			faults = append(faults, e["fault"])
		}
		Expect(faults).To(Equal([]any{"pause", "resume", "pause", "stop"}))

		By("a node that ignores SIGTERM is killed after the grace period")
		began := time.Now()
		Expect(l.Stop("scscf1", true)).To(Succeed())
		Expect(time.Since(began)).To(BeNumerically(">=", 300*time.Millisecond))
		Expect(eventsOf(l, "node_exit", "scscf1")).To(ConsistOf(HaveKeyWithValue("signal", "SIGKILL")))

		By("an exit the lab did not ask for")
		Expect(l.Start(ctx, "scscf1")).To(Succeed())
		pid = l.PID("scscf1")
		Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
		Eventually(l.Exited("scscf1")).Should(BeClosed())
		Expect(status(l, "scscf1").State).To(Equal(lab.StateExited))
		Expect(eventsOf(l, "node_exit", "scscf1")[1]).To(HaveKeyWithValue("expected", false))

		By("down")
		pids := []int{l.PID("pcscf1")}
		Expect(l.Down()).To(Succeed())
		for _, s := range l.Status() {
			Expect(s.PID).To(BeZero(), s.Name)
		}
		for _, p := range pids {
			Eventually(func() bool { return groupGone(p) }).Should(BeTrue())
		}
		Expect(eventsOf(l, "lab_down", "")).NotTo(BeEmpty())
	})

	It("stops what it started and names the node, with its log, when a node fails to start", SpecTimeout(30*time.Second), func(ctx SpecContext) {
		l := newFakeLab("pcscf1", "bac")
		err := l.Up(ctx)
		var se *lab.StartError
		Expect(errors.As(err, &se)).To(BeTrue(), "%v", err)
		Expect(se.Node).To(Equal("bac"))
		Expect(se.Log).To(Equal(l.LogFile("bac")))
		Expect(err.Error()).To(ContainSubstring("lab: node bac did not start: exited before it was ready (exit status 3)"))
		Expect(err.Error()).To(ContainSubstring("--- last lines of " + l.LogFile("bac") + " ---"))
		Expect(err.Error()).To(ContainSubstring("address already in use"))
		Expect(l.PID("pcscf1")).To(BeZero(), "pcscf1 was started before bac and must be stopped again")
		Expect(eventsOf(l, "node_exit", "pcscf1")).To(HaveLen(1))
	})

	It("gives up on a node that never becomes ready, and kills it", SpecTimeout(30*time.Second), func(ctx SpecContext) {
		l, err := lab.New(lab.Config{Topology: testTopology(), RunDir: GinkgoT().TempDir(), BinDir: fakeBinDir(),
			Only: []string{"icscf"}, ReadyTimeout: 400 * time.Millisecond}, lab.WithLogger(testLogger()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Close)
		err = l.Up(ctx)
		Expect(err).To(MatchError(ContainSubstring("lab: node icscf did not start: not ready after 400ms: no ready line in its log")))
		Expect(err).To(MatchError(ContainSubstring("waiting for something")))
		Expect(l.Exited("icscf")).To(BeClosed())
	})

	It("refuses to start when a node's port is taken, naming the node", SpecTimeout(30*time.Second), func(ctx SpecContext) {
		l := newFakeLab("pcscf2")
		n := status(l, "pcscf2")
		Expect(n.Addresses).To(HaveLen(1))
		var addr string
		_, err := fmt.Sscanf(n.Addresses[0], "sip %s", &addr)
		Expect(err).NotTo(HaveOccurred())
		addr = addr[:len(addr)-len("/udp")]
		busy, err := net.ListenPacket("udp", addr)
		Expect(err).NotTo(HaveOccurred())
		defer busy.Close()
		err = l.Up(ctx)
		Expect(err).To(MatchError(ContainSubstring("lab: pcscf2 sip " + addr + "/udp is in use")))
		Expect(err).To(MatchError(lab.ErrPortInUse), "a study stops on it (internal/analysis/study)")
		Expect(l.PID("pcscf2")).To(BeZero())
	})
})
