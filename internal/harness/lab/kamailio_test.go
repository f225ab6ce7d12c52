package lab_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/topology"
)

// mixedTopology is testTopology with scscf2 Kamailio's.
func mixedTopology() *topology.Topology {
	GinkgoHelper()
	t := testTopology()
	t.Pools.SCSCF.Kamailio = []int{2}
	Expect(t.Validate()).To(Succeed())
	return t
}

// requireKamailio skips when Kamailio is not installed, unless IMSLAB_REQUIRE_KAMAILIO is set (then it fails).
func requireKamailio() {
	GinkgoHelper()
	if lab.KamailioBinary() != "" {
		if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/kamailio/modules/ims_registrar_scscf.so"); err == nil {
			return
		}
		if _, err := exec.LookPath("dpkg"); err != nil {
			return // not Debian: let the start say what is missing
		}
	}
	if os.Getenv("IMSLAB_REQUIRE_KAMAILIO") != "" {
		Fail("Kamailio's IMS S-CSCF is not installed and IMSLAB_REQUIRE_KAMAILIO is set " +
			"(apt-get install -y kamailio kamailio-ims-modules kamailio-presence-modules)")
	}
	Skip("Kamailio's IMS S-CSCF is not installed (kamailio kamailio-ims-modules kamailio-presence-modules)")
}

// groupStates returns the state letters of every live process of a process group.
func groupStates(pgid int) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			out = append(out, f[0])
		}
	}
	return out
}

var _ = Describe("A Kamailio S-CSCF member", func() {
	It("gets its kamailio.cfg and cdp XML from the topology", Label("unit"), func() {
		t := mixedTopology()
		l, err := lab.New(lab.Config{Topology: t, RunDir: GinkgoT().TempDir(), BinDir: fakeBinDir()},
			lab.WithLogger(testLogger()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Close)
		Expect(l.Prepare()).To(Succeed())
		f := lab.KamailioPaths(l.RunDir(), "scscf2")
		cfg, err := os.ReadFile(f.Config)
		Expect(err).NotTo(HaveOccurred())
		me, _ := t.Node("scscf2")
		icscf, _ := t.Node("icscf")
		pcscf1, _ := t.Node("pcscf1")
		hss, _ := t.Node("hss")
		Expect(string(cfg)).To(ContainSubstring("listen=udp:" + me.Listen()))
		Expect(string(cfg)).To(ContainSubstring(`#!define URI "sip:scscf2.ims.test"`), "the Server-Name the HSS allows it")
		Expect(string(cfg)).To(ContainSubstring(`$du = "sip:`+icscf.Listen()+`"`), "originating requests go to the I-CSCF")
		Expect(string(cfg)).To(ContainSubstring(`if ($dd == "pcscf1.ims.test") {`+"\n\t\t$du = \"sip:"+pcscf1.Listen()+`";`),
			"the lab's names are mapped to their addresses")
		Expect(string(cfg)).To(ContainSubstring(`save("REG_SAR_REPLY", "location", "0", "0")`), "5.6's save() takes 4 arguments")
		Expect(string(cfg)).To(ContainSubstring(`record_route_advertised_address("scscf2.ims.test")`),
			"Record-Route names a home-network host without a port, which a P-CSCF relays a phone's ACK and BYE to")
		Expect(string(cfg)).To(ContainSubstring(`"registration_default_algorithm", "HSS-Selected"`))
		Expect(string(cfg)).To(ContainSubstring(`"default_expires", 600`), "the topology's registration period")
		xml, err := os.ReadFile(f.CDP)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(xml)).To(ContainSubstring(`FQDN="scscf2.ims.test"`))
		Expect(string(xml)).To(ContainSubstring(`<Peer FQDN="127.0.0.1" Realm="ims.test" port="` + strconv.Itoa(hss.Ports[0].Port) + `"/>`))
		Expect(f.XSD).To(BeAnExistingFile())
		Expect(f.DataDir + "/presentity").To(BeAnExistingFile())
		// Our own members keep their node configurations.
		Expect(l.RunDir() + "/config/scscf1.yaml").To(BeAnExistingFile())
		Expect(l.RunDir()+"/config/scscf2.yaml").To(BeAnExistingFile(), "the topology still writes one (unused)")
		Expect(status(l, "scscf2").Kind).To(Equal(topology.KindSCSCF))
	})

	It("starts, is ready on OPTIONS and Cx, and is paused, killed and restarted as one node", Label("e2e"),
		SpecTimeout(3*time.Minute), func(ctx SpecContext) {
			requireKamailio()
			t := mixedTopology()
			l, err := lab.New(lab.Config{Topology: t, RunDir: GinkgoT().TempDir(), Only: []string{"dnsd", "hss", "scscf2"},
				ReadyTimeout: 30 * time.Second, GracePeriod: 5 * time.Second}, lab.WithLogger(testLogger()))
			Expect(err).NotTo(HaveOccurred())
			var pids []int
			DeferCleanup(func() {
				if CurrentSpecReport().Failed() {
					b, _ := os.ReadFile(l.LogFile("scscf2"))
					GinkgoWriter.Printf("---- scscf2 ----\n%s\n", b)
				}
				Expect(l.Down()).To(Succeed())
				Expect(l.Close()).To(Succeed())
				for _, p := range pids {
					Eventually(func() bool { return groupGone(p) }).Should(BeTrue(), "pid %d left behind", p)
				}
			})
			me, _ := t.Node("scscf2")
			options := func() error {
				c, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
				defer cancel()
				return lab.SIPOptions(c, me.Listen())
			}

			Expect(l.Up(ctx)).To(Succeed())
			Expect(status(l, "scscf2").State).To(Equal(lab.StateReady))
			pid := l.PID("scscf2")
			pids = append(pids, pid)
			Expect(len(groupStates(pid))).To(BeNumerically(">", 2), "Kamailio's children are in the node's process group")
			Expect(options()).To(Succeed())
			By("its Cx connection is up: the HSS answered its CER and counts no refusal")
			hssLog, _ := os.ReadFile(l.EventsFile("hss"))
			Expect(string(hssLog)).NotTo(ContainSubstring(`"cx_refused"`))

			By("pausing every one of its processes")
			Expect(l.Pause("scscf2")).To(Succeed())
			Eventually(func() []string { return groupStates(pid) }).Should(HaveEach("T"))
			Expect(status(l, "scscf2").State).To(Equal(lab.StatePaused))
			Expect(options()).NotTo(Succeed(), "a paused member answers nothing")
			Expect(l.Resume("scscf2")).To(Succeed())
			Eventually(options).Should(Succeed())

			By("sampling its CPU over the whole process group")
			Eventually(func() []event { return eventsOf(l, "resource", "scscf2") }, 5*time.Second).ShouldNot(BeEmpty())

			By("killing it: no process of the group is left")
			Expect(l.Kill("scscf2")).To(Succeed())
			Eventually(func() bool { return groupGone(pid) }, 5*time.Second).Should(BeTrue())
			Expect(options()).NotTo(Succeed())
			exits := eventsOf(l, "node_exit", "scscf2")
			Expect(exits).To(HaveLen(1))
			Expect(exits[0]["signal"]).To(Equal("SIGKILL"))

			By("starting it again: ready with a new Cx connection")
			Expect(l.Start(ctx, "scscf2")).To(Succeed())
			Expect(l.PID("scscf2")).NotTo(Equal(pid))
			pids = append(pids, l.PID("scscf2"))
			Expect(options()).To(Succeed())

			By("restarting it (SIGTERM to the group, then a new start)")
			old := l.PID("scscf2")
			Expect(l.Restart(ctx, "scscf2")).To(Succeed())
			Expect(l.PID("scscf2")).NotTo(Equal(old))
			Expect(groupGone(old)).To(BeTrue())
			pids = append(pids, l.PID("scscf2"))
			Expect(options()).To(Succeed())
			Expect(eventsOf(l, "node_ready", "scscf2")).To(HaveLen(3))
		})
})
