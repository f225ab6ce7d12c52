package netns_test

import (
	"context"
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

	"github.com/imslab/quasipool/internal/harness/netns"
)

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func nsInode(pid int) string {
	GinkgoHelper()
	s, err := os.Readlink(filepath.Join("/proc", itoa(pid), "ns/net"))
	Expect(err).NotTo(HaveOccurred())
	return s
}

func itoa(i int) string { return strconv.Itoa(i) }

var _ = Describe("splitting iptables rules", Label("unit"), func() {
	It("keeps quoted comments together", func() {
		Expect(netns.SplitRuleForTest(`-A FORWARD -i imslab-abc123 -o imslab-abc123 -m comment --comment "imslab-abc123" -j ACCEPT`)).
			To(Equal([]string{"-A", "FORWARD", "-i", "imslab-abc123", "-o", "imslab-abc123", "-m", "comment", "--comment", "imslab-abc123", "-j", "ACCEPT"}))
	})
})

var _ = Describe("a lab network", Label("netns"), func() {
	var dir string
	BeforeEach(func() {
		requireNetns()
		dir = GinkgoT().TempDir()
	})

	create := func(ctx context.Context, o netns.Options) *netns.Network {
		GinkgoHelper()
		o.RecordDir = dir
		n, err := netns.Create(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { Expect(n.Destroy(ctx)).To(Succeed()) })
		return n
	}

	It("gives each node its own namespace and address, carries traffic over the bridge and leaves nothing behind", SpecTimeout(time.Minute), func(ctx SpecContext) {
		n := create(ctx, netns.Options{})
		Expect(len(n.Bridge)).To(BeNumerically("<=", 15))
		Expect(n.Subnet.Bits()).To(Equal(24))
		a, b := netns.Addr(n.Subnet, 2), netns.Addr(n.Subnet, 3)
		nsA, err := n.AddNode(ctx, "a", a)
		Expect(err).NotTo(HaveOccurred())
		nsB, err := n.AddNode(ctx, "b", b)
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Join("/run/netns", nsA)).To(BeAnExistingFile())

		By("the namespace sees eth0 with its address and a default route via the gateway")
		out, err := netns.Exec(ctx, nsA, "ip", "-o", "-4", "addr", "show", "dev", "eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring(a.String() + "/24"))
		out, err = netns.Exec(ctx, nsA, "ip", "route", "show", "default")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("via " + n.Gateway.String()))

		By("a process started with Command is the program itself, in the namespace")
		cmd := netns.Command(nsB, "sleep", "30")
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		Eventually(func() string {
			b, _ := os.ReadFile(filepath.Join("/proc", itoa(cmd.Process.Pid), "comm"))
			return strings.TrimSpace(string(b))
		}).Should(Equal("sleep"))
		Expect(nsInode(cmd.Process.Pid)).NotTo(Equal(nsInode(os.Getpid())))
		var inB string
		Expect(netns.Do(nsB, func() error {
			var err error
			inB, err = os.Readlink("/proc/thread-self/ns/net")
			return err
		})).To(Succeed())
		Expect(nsInode(cmd.Process.Pid)).To(Equal(inB))

		By("a datagram from a to b crosses the bridge and arrives from a's address")
		var rx net.PacketConn
		Expect(netns.Do(nsB, func() error {
			var err error
			rx, err = net.ListenPacket("udp4", netip.AddrPortFrom(b, 40000).String())
			return err
		})).To(Succeed())
		DeferCleanup(rx.Close)
		var tx net.Conn
		Expect(netns.Do(nsA, func() error {
			var err error
			tx, err = net.Dial("udp4", netip.AddrPortFrom(b, 40000).String())
			return err
		})).To(Succeed())
		DeferCleanup(tx.Close)
		_, err = tx.Write([]byte("hello"))
		Expect(err).NotTo(HaveOccurred())
		buf := make([]byte, 64)
		Expect(rx.SetReadDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
		k, from, err := rx.ReadFrom(buf)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(buf[:k])).To(Equal("hello"))
		Expect(from.(*net.UDPAddr).IP.String()).To(Equal(a.String()))

		By("the host reaches b from the gateway address")
		h, err := net.DialUDP("udp4", &net.UDPAddr{IP: n.Gateway.AsSlice()}, net.UDPAddrFromAddrPort(netip.AddrPortFrom(b, 40000)))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(h.Close)
		_, err = h.Write([]byte("host"))
		Expect(err).NotTo(HaveOccurred())
		k, from, err = rx.ReadFrom(buf)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(buf[:k])).To(Equal("host"))
		Expect(from.(*net.UDPAddr).IP.String()).To(Equal(n.Gateway.String()))

		By("destroy removes namespaces, bridge, veths and the record")
		Expect(n.Destroy(ctx)).To(Succeed())
		Expect(exists(filepath.Join("/run/netns", nsA))).To(BeFalse())
		Expect(exists(filepath.Join("/run/netns", nsB))).To(BeFalse())
		Expect(exists(filepath.Join("/sys/class/net", n.Bridge))).To(BeFalse())
		Expect(leftLinks(n.ID)).To(BeEmpty())
		Expect(iptablesRules(n.ID)).To(BeEmpty())
		Expect(filepath.Join(dir, n.ID+".json")).NotTo(BeAnExistingFile())
	})

	It("cleans what a dead owner left behind and leaves a live run alone", SpecTimeout(time.Minute), func(ctx SpecContext) {
		owner := exec.Command("sleep", "300")
		Expect(owner.Start()).To(Succeed())
		dead := create(ctx, netns.Options{Owner: owner.Process.Pid})
		_, err := dead.AddNode(ctx, "x", netns.Addr(dead.Subnet, 2))
		Expect(err).NotTo(HaveOccurred())
		live := create(ctx, netns.Options{})
		Expect(live.Subnet).NotTo(Equal(dead.Subnet), "a second network gets another subnet")
		_, err = live.AddNode(ctx, "y", netns.Addr(live.Subnet, 2))
		Expect(err).NotTo(HaveOccurred())

		By("while both owners run, clean removes nothing")
		rm, err := netns.Clean(ctx, dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(rm.Empty()).To(BeTrue(), rm.String())

		By("the first owner crashes")
		Expect(owner.Process.Kill()).To(Succeed())
		_ = owner.Wait()
		rm, err = netns.Clean(ctx, dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(rm.Namespaces).To(ConsistOf(netns.NamespaceName(dead.ID, "x")))
		Expect(rm.Links).To(ContainElement(dead.Bridge))
		Expect(rm.Records).To(ConsistOf(filepath.Join(dir, dead.ID+".json")))
		Expect(exists(filepath.Join("/run/netns", netns.NamespaceName(dead.ID, "x")))).To(BeFalse())
		Expect(exists(filepath.Join("/sys/class/net", dead.Bridge))).To(BeFalse())
		Expect(leftLinks(dead.ID)).To(BeEmpty())
		Expect(iptablesRules(dead.ID)).To(BeEmpty())

		By("the live run is intact")
		Expect(exists(filepath.Join("/run/netns", netns.NamespaceName(live.ID, "y")))).To(BeTrue())
		Expect(exists(filepath.Join("/sys/class/net", live.Bridge))).To(BeTrue())
		Expect(filepath.Join(dir, live.ID+".json")).To(BeAnExistingFile())
	})
})

// leftLinks returns the host links whose names belong to network id.
func leftLinks(id string) []string {
	ents, err := os.ReadDir("/sys/class/net")
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), id) {
			out = append(out, e.Name())
		}
	}
	return out
}

// iptablesRules returns the FORWARD rules that mention network id.
func iptablesRules(id string) []string {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil
	}
	out, err := exec.Command("iptables", "-S", "FORWARD").Output()
	Expect(err).NotTo(HaveOccurred())
	var rules []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, id) {
			rules = append(rules, l)
		}
	}
	return rules
}
