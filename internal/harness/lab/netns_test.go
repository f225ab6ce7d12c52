package lab_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/topology"
)

var _ = Describe("the lab in network namespaces without root", Label("unit"), func() {
	It("fails with an error that says what is needed", func() {
		_, err := lab.New(lab.Config{Topology: testTopology(), RunDir: GinkgoT().TempDir(), Netns: true},
			lab.WithNetnsCheck(func() error { return netns.CheckUID(1000) }), lab.WithLogger(testLogger()))
		Expect(err).To(MatchError(netns.ErrUnsupported))
		Expect(err.Error()).To(And(ContainSubstring("needs root"), ContainSubstring("uid 1000"),
			ContainSubstring("network namespaces")))
	})
})

func netnsOf(pid int) string {
	GinkgoHelper()
	s, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "ns/net"))
	Expect(err).NotTo(HaveOccurred())
	return s
}

var _ = Describe("the lab with every node in its own network namespace", Label("netns", "e2e"), func() {
	BeforeEach(func() {
		if err := netns.Check(); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_NETNS") != "" {
				Fail("network namespaces are required (IMSLAB_REQUIRE_NETNS is set): " + err.Error())
			}
			Skip(err.Error())
		}
	})

	It("runs each node in its namespace on its own address, carries registrations and calls, kills for real and leaves nothing behind",
		SpecTimeout(5*time.Minute), func(ctx SpecContext) {
			recDir := GinkgoT().TempDir()
			By("a crashed run left its network behind")
			owner := exec.Command("sleep", "300")
			Expect(owner.Start()).To(Succeed())
			crashed, err := netns.Create(ctx, netns.Options{RecordDir: recDir, Owner: owner.Process.Pid})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) { _ = crashed.Destroy(ctx) })
			crashedNS, err := crashed.AddNode(ctx, "pcscf1", netns.Addr(crashed.Subnet, 11))
			Expect(err).NotTo(HaveOccurred())
			Expect(owner.Process.Kill()).To(Succeed())
			_ = owner.Wait()

			l, err := lab.New(lab.Config{Topology: topology.Default(), RunDir: GinkgoT().TempDir(), Netns: true,
				NetnsRecordDir: recDir, ReadyTimeout: 30 * time.Second, GracePeriod: 5 * time.Second},
				lab.WithLogger(testLogger()))
			Expect(err).NotTo(HaveOccurred())
			nw := l.Network()
			Expect(nw).NotTo(BeNil())
			By("the next start removed it")
			Expect(filepath.Join("/run/netns", crashedNS)).NotTo(BeAnExistingFile())
			Expect(filepath.Join("/sys/class/net", crashed.Bridge)).NotTo(BeAnExistingFile())
			Expect(filepath.Join(recDir, crashed.ID+".json")).NotTo(BeAnExistingFile())
			bridge, id := nw.Bridge, nw.ID
			closed := false
			DeferCleanup(func() {
				if CurrentSpecReport().Failed() {
					for _, s := range l.Status() {
						b, _ := os.ReadFile(l.LogFile(s.Name))
						GinkgoWriter.Printf("---- %s (%s) ----\n%s\n", s.Name, s.State, b)
					}
				}
				if !closed {
					Expect(l.Down()).To(Succeed())
					Expect(l.Close()).To(Succeed())
				}
			})
			Expect(l.Up(ctx)).To(Succeed())
			t := l.Topology()

			By("every node is ready, in a namespace of its own that is not the host's, on its own address")
			host := netnsOf(os.Getpid())
			seen := map[string]string{}
			for _, s := range l.Status() {
				Expect(s.State).To(Equal(lab.StateReady), s.Name)
				comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(s.PID), "comm"))
				Expect(err).NotTo(HaveOccurred())
				Expect(strings.TrimSpace(string(comm))).To(Equal(string(s.Kind)),
					"the PID the lab holds is the node binary's, not ip's")
				ns := netnsOf(s.PID)
				Expect(ns).NotTo(Equal(host), s.Name)
				Expect(seen).NotTo(HaveKey(ns), "%s shares a namespace with %s", s.Name, seen[ns])
				seen[ns] = s.Name
				n, _ := t.Node(s.Name)
				Expect(nw.Subnet.Contains(netip.MustParseAddr(n.Address))).To(BeTrue())
				out, err := netns.Exec(ctx, l.Namespace(s.Name), "ip", "-o", "-4", "addr", "show", "dev", "eth0")
				Expect(err).NotTo(HaveOccurred())
				Expect(out).To(ContainSubstring(n.Address+"/24"), s.Name)
			}
			Expect(seen).To(HaveLen(len(t.Nodes())))

			By("phones on the bridge's gateway register through the BAC and call")
			cfg := ue.DefaultConfig()
			cfg.Listen = l.PhoneListen()
			cfg.DNSServer = t.DNS.Listen
			cfg.Users.From, cfg.Users.Count = 1, 2
			cfg.Manual = true
			cfg.RingTime = 100 * time.Millisecond
			cfg.CallTimeout = 8 * time.Second
			u, err := ue.New(cfg, ue.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
			Expect(err).NotTo(HaveOccurred())
			uctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- u.Run(uctx) }()
			DeferCleanup(func() { cancel(); Eventually(done, 15*time.Second).Should(Receive()) })
			Eventually(u.Ready(), 10*time.Second).Should(BeClosed())
			for _, name := range []string{"user0001", "user0002"} {
				Expect(u.Phone(name).Register(ctx)).To(Succeed(), name)
			}
			res, err := u.Phone("user0001").Call(ctx, "sip:user0002@ims.test", 300*time.Millisecond)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(200))
			Expect(res.ByeStatus).To(Equal(200))
			Expect(res.PCSCF).To(MatchRegexp(`pcscf\d\.ims\.test`))

			By("killing a node is a real SIGKILL of its process")
			pid := l.PID("pcscf1")
			before := netnsOf(pid)
			Expect(l.Kill("pcscf1")).To(Succeed())
			Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH))
			Expect(status(l, "pcscf1").Exit).To(ContainSubstring("killed"))
			Expect(l.Start(ctx, "pcscf1")).To(Succeed(), "it starts again in its namespace")
			Expect(netnsOf(l.PID("pcscf1"))).To(Equal(before))

			By("down and close remove the namespaces, the bridge and the record")
			Expect(l.Down()).To(Succeed())
			Expect(l.Close()).To(Succeed())
			closed = true
			for _, n := range t.Nodes() {
				Expect(filepath.Join("/run/netns", netns.NamespaceName(id, n.Name))).NotTo(BeAnExistingFile())
			}
			Expect(filepath.Join("/sys/class/net", bridge)).NotTo(BeAnExistingFile())
			Expect(filepath.Join(recDir, id+".json")).NotTo(BeAnExistingFile())
		})
})
