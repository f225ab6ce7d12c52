package lab_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/lab"
)

var _ = Describe("lab with the real dnsd and hss", Label("e2e"), func() {
	It("builds and starts them, resolves through dnsd, survives SIGKILL of the HSS and stops cleanly", SpecTimeout(4*time.Minute), func(ctx SpecContext) {
		t := testTopology()
		l, err := lab.New(lab.Config{Topology: t, RunDir: GinkgoT().TempDir(), Only: []string{"dnsd", "hss"},
			ReadyTimeout: 30 * time.Second, GracePeriod: 5 * time.Second}, lab.WithLogger(testLogger()))
		Expect(err).NotTo(HaveOccurred())
		var pids []int
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				for _, n := range []string{"dnsd", "hss"} {
					b, _ := os.ReadFile(l.LogFile(n))
					GinkgoWriter.Printf("---- %s ----\n%s\n", n, b)
				}
			}
			Expect(l.Down()).To(Succeed())
			Expect(l.Close()).To(Succeed())
			for _, p := range pids {
				Eventually(func() bool { return groupGone(p) }).Should(BeTrue(), "pid %d left behind", p)
			}
		})

		Expect(l.Up(ctx)).To(Succeed())
		Expect(status(l, "dnsd").State).To(Equal(lab.StateReady))
		Expect(status(l, "hss").State).To(Equal(lab.StateReady))
		Expect(status(l, "pcscf1").State).To(Or(Equal(lab.StateSkipped), Equal(lab.StateNotBuilt)))
		pids = append(pids, l.PID("dnsd"), l.PID("hss"))
		By("starting each node with the lab's GOMAXPROCS, the machine's CPUs shared among the nodes")
		want := t.NodeGoMaxProcsSetting(runtime.NumCPU())
		for _, n := range []string{"dnsd", "hss"} {
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", l.PID(n)))
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.Split(string(env), "\x00")).To(ContainElement("GOMAXPROCS="+want), n)
		}
		By("recording the binaries that ran, built once into the build cache, instead of copying them")
		Expect(l.RunDir() + "/bin").NotTo(BeADirectory())
		bins, err := lab.ReadBinaries(l.RunDir())
		Expect(err).NotTo(HaveOccurred())
		Expect(bins.Built).To(BeTrue())
		var names []string
		for _, b := range bins.Binaries {
			names = append(names, b.Name)
			Expect(b.SHA256).To(HaveLen(64))
			Expect(b.Path).To(BeAnExistingFile())
			Expect(b.Revision).To(MatchRegexp(`^[0-9a-f]{40}$`), "the commit Go embedded")
		}
		Expect(names).To(ConsistOf("dnsd", "hss"), "only the selected kinds are built")
		Expect(l.BinDir()).To(HavePrefix(lab.CacheDir()))

		dnsNode, _ := t.Node("dnsd")
		hssNode, _ := t.Node("hss")
		res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, dnsNode.Listen())
		}}

		By("resolving the HSS through the lab's dnsd")
		_, srvs, err := res.LookupSRV(ctx, "", "", "_diameter._tcp.hss.ims.test.")
		Expect(err).NotTo(HaveOccurred())
		Expect(srvs).To(HaveLen(1))
		Expect(int(srvs[0].Port)).To(Equal(hssNode.Ports[0].Port))
		addrs, err := res.LookupHost(ctx, strings.TrimSuffix(srvs[0].Target, ".")+".")
		Expect(err).NotTo(HaveOccurred())
		Expect(addrs).To(Equal([]string{"127.0.0.1"}))
		_, srvs, err = res.LookupSRV(ctx, "sip", "udp", "pcscf2.ims.test.")
		Expect(err).NotTo(HaveOccurred())
		Expect(srvs).To(HaveLen(2), "the zone comes from the run's topology (pools of 2), not the embedded default")
		Expect(srvs[0].Target).To(Equal("pcscf2.ims.test."))

		hssUp := func() error {
			c, err := net.DialTimeout("tcp", hssNode.Endpoint("diameter"), time.Second)
			if err != nil {
				return err
			}
			return c.Close()
		}
		Expect(hssUp()).To(Succeed())
		apiAddr, tokenFile := l.HSSAPI()
		Expect(apiAddr).To(Equal(hssNode.Endpoint("http")))
		token, err := os.ReadFile(tokenFile)
		Expect(err).NotTo(HaveOccurred())
		st, err := os.Stat(tokenFile)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		req, err := http.NewRequest(http.MethodGet, "http://"+apiAddr+"/api/v1/subscribers?limit=1", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(200))
		Expect(string(body)).To(ContainSubstring("user0001@ims.test"), "the lab subscribers are provisioned")

		By("sampling each running node's CPU time and memory every second")
		Eventually(func() []event { return eventsOf(l, "resource", "hss") }).WithTimeout(5 * time.Second).
			Should(ContainElement(And(HaveKeyWithValue("pid", BeEquivalentTo(l.PID("hss"))),
				HaveKeyWithValue("cpu_s", BeNumerically(">", 0)), HaveKeyWithValue("rss_bytes", BeNumerically(">", 1<<20)))))
		Expect(eventsOf(l, "resource", "pcscf1")).To(BeEmpty(), "a node that does not run is not sampled")

		By("killing the HSS with SIGKILL")
		pid := l.PID("hss")
		Expect(l.Kill("hss")).To(Succeed())
		Expect(eventsOf(l, "node_exit", "hss")).To(ConsistOf(And(HaveKeyWithValue("signal", "SIGKILL"),
			HaveKeyWithValue("pid", BeEquivalentTo(pid)), HaveKeyWithValue("expected", true))))
		Expect(eventsOf(l, "fault", "hss")).To(ConsistOf(HaveKeyWithValue("fault", "kill")))
		Expect(hssUp()).NotTo(Succeed())

		By("restarting it on the same data")
		Expect(l.Restart(ctx, "hss")).To(Succeed())
		Expect(l.PID("hss")).NotTo(Or(BeZero(), Equal(pid)))
		pids = append(pids, l.PID("hss"))
		Expect(hssUp()).To(Succeed())
		Expect(eventsOf(l, "node_ready", "hss")).To(HaveLen(2))
		hssEvents, err := os.ReadFile(l.EventsFile("hss"))
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Count(string(hssEvents), `"kind":"node_ready"`)).To(Equal(2))

		By("stopping dnsd gracefully")
		Expect(l.Stop("dnsd", true)).To(Succeed())
		Expect(eventsOf(l, "node_exit", "dnsd")).To(ConsistOf(And(HaveKeyWithValue("exit_code", BeEquivalentTo(0)),
			Not(HaveKey("signal")))))
		dnsEvents, err := os.ReadFile(l.EventsFile("dnsd"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(dnsEvents)).To(ContainSubstring(`"kind":"dns_stats"`))

		By("down")
		Expect(l.Down()).To(Succeed())
		Expect(l.PID("hss")).To(BeZero())
		Expect(eventsOf(l, "node_exit", "hss")).To(HaveLen(2))
		Expect(eventsOf(l, "node_exit", "hss")[1]).To(HaveKeyWithValue("exit_code", BeEquivalentTo(0)))
	})
})
