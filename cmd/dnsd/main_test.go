package main_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/imslab/quasipool/internal/topology"
)

var readyRE = regexp.MustCompile(`msg="dnsd ready" node=dnsd addr=(\S+)`)

func startDNSD(args ...string) (*gexec.Session, string) {
	s, err := gexec.Start(exec.Command(bin, args...), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { s.Kill().Wait(5 * time.Second) })
	Eventually(s.Err, 10*time.Second).Should(gbytes.Say(`dnsd ready`))
	m := readyRE.FindSubmatch(s.Err.Contents())
	Expect(m).NotTo(BeNil(), string(s.Err.Contents()))
	return s, string(m[1])
}

func srvTargets(addr, network, name string) []string {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeSRV)
	r, _, err := (&dns.Client{Net: network, Timeout: 2 * time.Second}).Exchange(m, addr)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, rr := range r.Answer {
		out = append(out, rr.(*dns.SRV).Target)
	}
	return out
}

var _ = Describe("dnsd command", Label("e2e"), func() {
	It("serves the embedded default topology and stops cleanly on SIGTERM", SpecTimeout(30*time.Second), func(ctx SpecContext) {
		events := filepath.Join(GinkgoT().TempDir(), "dnsd.jsonl")
		s, addr := startDNSD("--listen", "127.0.0.1:0", "--events", events, "--log-format", "text")
		for _, network := range []string{"udp", "tcp"} {
			Expect(srvTargets(addr, network, "_sip._udp.pcscf2.ims.test.")).To(Equal(
				[]string{"pcscf2.ims.test.", "pcscf1.ims.test.", "pcscf3.ims.test."}))
		}
		s.Signal(syscall.SIGTERM)
		Eventually(s, 10*time.Second).Should(gexec.Exit(0))
		b, err := os.ReadFile(events)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring(`"kind":"node_ready"`))
		Expect(string(b)).To(MatchRegexp(`"kind":"dns_stats".*"queries":2`))
	})

	It("runs from a node configuration written by the topology", SpecTimeout(30*time.Second), func(ctx SpecContext) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		free := l.Addr().String()
		Expect(l.Close()).To(Succeed())

		run := GinkgoT().TempDir()
		t := topology.Default()
		t.DNS.Listen = free
		t.Pools.SCSCF.Size = 4
		Expect(t.Validate()).To(Succeed())
		Expect(t.WriteFile(filepath.Join(run, "topology.yaml"))).To(Succeed())
		Expect(os.MkdirAll(filepath.Join(run, "events"), 0o755)).To(Succeed())
		Expect(t.WriteNodeConfigs(filepath.Join(run, "config"), topology.InRunDir(run))).To(Succeed())

		s, addr := startDNSD("--config", filepath.Join(run, "config", "dnsd.yaml"))
		Expect(addr).To(Equal(free))
		Expect(srvTargets(addr, "udp", "_sip._udp.scscf.ims.test.")).To(HaveLen(4))
		s.Interrupt()
		Eventually(s, 10*time.Second).Should(gexec.Exit(0))
		Expect(filepath.Join(run, "events", "dnsd.jsonl")).To(BeARegularFile())
	})

	It("exits non-zero with a clear message on a bad configuration", func() {
		run := GinkgoT().TempDir()
		Expect(topology.Default().WriteNodeConfigs(run)).To(Succeed())
		s, err := gexec.Start(exec.Command(bin, "--config", filepath.Join(run, "hss.yaml")), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 10*time.Second).Should(gexec.Exit(1))
		Expect(s.Err).To(gbytes.Say(`kind "hss": want "dnsd"`))

		s, err = gexec.Start(exec.Command(bin, "--listen", "localhost"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 10*time.Second).Should(gexec.Exit(1))
		Expect(s.Err).To(gbytes.Say(`^dnsd config: listen: "localhost": want ip:port`))
	})
})
