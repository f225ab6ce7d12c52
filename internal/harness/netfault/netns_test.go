package netfault_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/netfault"
)

const (
	addrA    = "10.200.0.1"
	addrB    = "10.200.0.2"
	echoPort = "7007"
)

// echoServer is a helper process running helperEcho in one namespace; it
// records every datagram it received, by tag.
type echoServer struct {
	mu sync.Mutex
	rx map[string][]rxRec
}

type rxRec struct {
	size int
	at   time.Time
}

func (s *echoServer) received(tag string) []rxRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rxRec(nil), s.rx[tag]...)
}

// pair is two namespaces joined by a veth pair: A (10.200.0.1, device vethA)
// and B (10.200.0.2, device vethB), each with an echo server on port 7007.
type pair struct {
	nsA, nsB     string
	devA, devB   string
	exA, exB     netfault.Exec
	srvA, srvB   *echoServer
	tagCounter   int
	helperBinary string
}

func requireNetns() {
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if _, err := exec.LookPath("nft"); err != nil {
		why = "nft not installed"
	} else if _, err := exec.LookPath("tc"); err != nil {
		why = "tc not installed"
	}
	if why == "" {
		return
	}
	msg := "netns specs need root, network namespaces, nft and tc: " + why
	if os.Getenv("IMSLAB_REQUIRE_NETNS") == "1" {
		Fail(msg + " (IMSLAB_REQUIRE_NETNS=1)")
	}
	Skip(msg)
}

func run(ctx context.Context, argv ...string) string {
	GinkgoHelper()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s: %s", strings.Join(argv, " "), out)
	return string(out)
}

func newPair(ctx context.Context) *pair {
	GinkgoHelper()
	requireNetns()
	id := fmt.Sprintf("%d%d", os.Getpid()%10000, GinkgoParallelProcess())
	p := &pair{
		nsA: "nfA" + id, nsB: "nfB" + id,
		devA: "nfa" + id, devB: "nfb" + id,
	}
	self, err := os.Executable()
	Expect(err).NotTo(HaveOccurred())
	p.helperBinary = self
	for _, ns := range []string{p.nsA, p.nsB} {
		_ = exec.Command("ip", "netns", "del", ns).Run() // a previous crashed run
		run(ctx, "ip", "netns", "add", ns)
		DeferCleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		run(ctx, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(ctx, "ip", "link", "add", p.devA, "netns", p.nsA, "type", "veth", "peer", "name", p.devB, "netns", p.nsB)
	run(ctx, "ip", "-n", p.nsA, "addr", "add", addrA+"/24", "dev", p.devA)
	run(ctx, "ip", "-n", p.nsB, "addr", "add", addrB+"/24", "dev", p.devB)
	run(ctx, "ip", "-n", p.nsA, "link", "set", p.devA, "up")
	run(ctx, "ip", "-n", p.nsB, "link", "set", p.devB, "up")
	p.exA, p.exB = netfault.InNetns(p.nsA), netfault.InNetns(p.nsB)
	p.srvA = p.startEcho(p.nsA)
	p.srvB = p.startEcho(p.nsB)
	// Both directions work before any fault.
	Eventually(func() int { return p.probe(ctx, p.nsA, addrB, 5, time.Millisecond, 300*time.Millisecond).Recv }).
		WithContext(ctx).Should(Equal(5))
	return p
}

func (p *pair) startEcho(ns string) *echoServer {
	GinkgoHelper()
	cmd := exec.Command("ip", "netns", "exec", ns, p.helperBinary, "0.0.0.0:"+echoPort)
	cmd.Env = append(os.Environ(), helperEnv+"=echo")
	cmd.Stderr = GinkgoWriter
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &echoServer{rx: map[string][]rxRec{}}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 1 && f[0] == "ready" {
				close(ready)
				continue
			}
			if len(f) != 4 || f[0] != "rx" {
				continue
			}
			n, _ := strconv.Atoi(f[2])
			ns, _ := strconv.ParseInt(f[3], 10, 64)
			s.mu.Lock()
			s.rx[f[1]] = append(s.rx[f[1]], rxRec{size: n, at: time.Unix(0, ns)})
			s.mu.Unlock()
		}
	}()
	Eventually(ready).WithTimeout(5 * time.Second).Should(BeClosed())
	return s
}

func (p *pair) tag() string {
	p.tagCounter++
	return fmt.Sprintf("t%d", p.tagCounter)
}

type probeOut struct {
	probeResult
	Tag string
}

// probe sends n datagrams from namespace ns to target:7007 and reports the
// echoes it got back.
func (p *pair) probe(ctx context.Context, ns, target string, n int, interval, wait time.Duration) probeOut {
	GinkgoHelper()
	tag := p.tag()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, p.helperBinary,
		target+":"+echoPort, tag, strconv.Itoa(n), interval.String(), wait.String())
	cmd.Env = append(os.Environ(), helperEnv+"=probe")
	cmd.Stderr = GinkgoWriter
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred())
	var r probeOut
	Expect(json.Unmarshal(out, &r.probeResult)).To(Succeed())
	r.Tag = tag
	return r
}

type nsState struct{ ruleset, qdiscs string }

func snap(ctx context.Context, ex netfault.Exec) nsState {
	GinkgoHelper()
	r, err := netfault.Ruleset(ctx, ex)
	Expect(err).NotTo(HaveOccurred())
	q, err := netfault.Qdiscs(ctx, ex)
	Expect(err).NotTo(HaveOccurred())
	// The qdiscs' configuration is what a fault must leave as it found it, not their packet counters: a packet
	// that crosses the link between two snapshots moves htb's direct_packets_stat.
	return nsState{r, qdiscCounters.ReplaceAllString(q, "${1} N")}
}

var qdiscCounters = regexp.MustCompile(`(direct_packets_stat) \d+`)

func mustFault(ex netfault.Exec, spec netfault.Spec) *netfault.Fault {
	GinkgoHelper()
	f, err := netfault.New(ex, spec)
	Expect(err).NotTo(HaveOccurred())
	return f
}

var _ = Describe("faults in a network namespace", Label("netns"), func() {
	var p *pair
	peerB := []netip.Prefix{netip.MustParsePrefix(addrB + "/32")}
	const n = 20

	BeforeEach(func(ctx SpecContext) {
		p = newPair(ctx)
	}, NodeTimeout(30*time.Second))

	It("partition both ways: nothing crosses, heal restores traffic and state, twice is safe", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		icmpA, icmpB := icmpInDestUnreach(ctx, p.nsA), icmpInDestUnreach(ctx, p.nsB)
		f := mustFault(p.exA, netfault.Partition{Peers: peerB})
		Expect(f.Apply(ctx)).To(Succeed())
		Expect(f.Apply(ctx)).To(Succeed(), "applying twice")

		ab := p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond)
		ba := p.probe(ctx, p.nsB, addrA, n, time.Millisecond, 300*time.Millisecond)
		Expect(ab.Recv).To(Equal(0))
		Expect(ba.Recv).To(Equal(0))
		Expect(p.srvB.received(ab.Tag)).To(BeEmpty(), "B saw A's datagrams")
		Expect(p.srvA.received(ba.Tag)).To(BeEmpty(), "A saw B's datagrams")
		// Silent: neither side got an ICMP error.
		Expect(icmpInDestUnreach(ctx, p.nsA)).To(Equal(icmpA))
		Expect(icmpInDestUnreach(ctx, p.nsB)).To(Equal(icmpB))
		// Loopback inside A is not affected.
		Expect(p.probe(ctx, p.nsA, "127.0.0.1", n, time.Millisecond, 200*time.Millisecond).Recv).To(Equal(n))

		Expect(f.Heal(ctx)).To(Succeed())
		Expect(f.Heal(ctx)).To(Succeed(), "healing twice")
		Expect(snap(ctx, p.exA)).To(Equal(before))
		Expect(p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond).Recv).To(Equal(n))
		Expect(p.probe(ctx, p.nsB, addrA, n, time.Millisecond, 300*time.Millisecond).Recv).To(Equal(n))
	}, SpecTimeout(30*time.Second))

	It("partition In drops only what comes from the peer", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		f := mustFault(p.exA, netfault.Partition{Peers: peerB, Direction: netfault.In})
		Expect(f.Apply(ctx)).To(Succeed())
		ab := p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond)
		Expect(p.srvB.received(ab.Tag)).To(HaveLen(n), "A→B must pass")
		Expect(ab.Recv).To(Equal(0), "B→A echoes must be dropped")
		ba := p.probe(ctx, p.nsB, addrA, n, time.Millisecond, 300*time.Millisecond)
		Expect(p.srvA.received(ba.Tag)).To(BeEmpty())
		Expect(f.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(30*time.Second))

	It("partition Out drops only what goes to the peer", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		f := mustFault(p.exA, netfault.Partition{Peers: peerB, Direction: netfault.Out})
		Expect(f.Apply(ctx)).To(Succeed())
		ab := p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond)
		Expect(p.srvB.received(ab.Tag)).To(BeEmpty(), "A→B must be dropped")
		ba := p.probe(ctx, p.nsB, addrA, n, time.Millisecond, 300*time.Millisecond)
		Expect(p.srvA.received(ba.Tag)).To(HaveLen(n), "B→A must pass")
		Expect(ba.Recv).To(Equal(0), "A's echoes to B must be dropped")
		Expect(f.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(30*time.Second))

	It("partition with Reject answers instead of dropping silently", func(ctx SpecContext) {
		f := mustFault(p.exB, netfault.Partition{Peers: []netip.Prefix{netip.MustParsePrefix(addrA + "/32")}, Direction: netfault.In, Reject: true})
		Expect(f.Apply(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(f.Heal(ctx)).To(Succeed()) })
		icmp0 := icmpInDestUnreach(ctx, p.nsA)
		ab := p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond)
		Expect(ab.Recv).To(Equal(0))
		Expect(p.srvB.received(ab.Tag)).To(BeEmpty())
		// The rejects arrive in A as ICMP destination unreachable. B's kernel
		// rate-limits ICMP errors per peer (a burst of 6, then 1/s), so not
		// one per datagram.
		Expect(icmpInDestUnreach(ctx, p.nsA) - icmp0).To(BeNumerically(">=", 1))
	}, SpecTimeout(30*time.Second))

	It("isolate leaves only loopback and the exceptions", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		f := mustFault(p.exA, netfault.Isolate{})
		Expect(f.Apply(ctx)).To(Succeed())
		ab := p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond)
		ba := p.probe(ctx, p.nsB, addrA, n, time.Millisecond, 300*time.Millisecond)
		Expect(p.srvB.received(ab.Tag)).To(BeEmpty())
		Expect(p.srvA.received(ba.Tag)).To(BeEmpty())
		Expect(p.probe(ctx, p.nsA, "127.0.0.1", n, time.Millisecond, 200*time.Millisecond).Recv).To(Equal(n))
		Expect(f.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
		Expect(p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond).Recv).To(Equal(n))

		g := mustFault(p.exA, netfault.Isolate{Except: peerB})
		Expect(g.Apply(ctx)).To(Succeed())
		Expect(p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond).Recv).To(Equal(n), "the exception passes")
		Expect(g.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(30*time.Second))

	It("loss 30 %: the share B receives of 1000 datagrams is within 4 sigma of 70 %", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		f := mustFault(p.exA, netfault.Loss{Percent: 30, Direction: netfault.Out})
		Expect(f.Apply(ctx)).To(Succeed())
		const N = 1000
		ab := p.probe(ctx, p.nsA, addrB, N, 200*time.Microsecond, 500*time.Millisecond)
		got := len(p.srvB.received(ab.Tag))
		// Binomial(N, 0.7): mean 700, sigma = sqrt(N*0.7*0.3) ≈ 14.5.
		sigma := math.Sqrt(N * 0.7 * 0.3)
		AddReportEntry("loss 30 %", fmt.Sprintf("B received %d of %d (expected 700 ± %.0f)", got, N, 4*sigma))
		Expect(float64(got)).To(BeNumerically("~", 700, 4*sigma))
		Expect(ab.Recv).To(Equal(got), "the way back is not lossy")
		Expect(f.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
		Expect(p.probe(ctx, p.nsA, addrB, 200, 200*time.Microsecond, 300*time.Millisecond).Recv).To(Equal(200))
	}, SpecTimeout(30*time.Second))

	It("rate 1mbit: what B receives from a 3 Mbit/s send is 1 Mbit/s within 25 %", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		f := mustFault(p.exA, netfault.Rate{Device: p.devA, Rate: "1mbit"})
		Expect(f.Apply(ctx)).To(Succeed())
		Expect(f.Apply(ctx)).To(Succeed(), "applying twice")
		tag := "bulk" + p.tag()
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", p.nsA, p.helperBinary,
			addrB+":"+echoPort, tag, "3000000", "2500ms", "1000")
		cmd.Env = append(os.Environ(), helperEnv+"=bulk")
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		// The queue drains within tbf's 50 ms latency; wait until B's count
		// stops growing.
		last := -1
		Eventually(func() bool {
			c := len(p.srvB.received(tag))
			stable := c == last && c > 0
			last = c
			return stable
		}).WithContext(ctx).WithPolling(200 * time.Millisecond).Should(BeTrue())
		rx := p.srvB.received(tag)
		// Bytes on the wire: payload + UDP 8 + IP 20 + Ethernet 14 (what tbf
		// counts). The sender offers 3 Mbit/s, so while it keeps up the tbf
		// queue is never empty and datagrams leave every 8.3 ms. A sender
		// stalled by a loaded machine (longer than the 50 ms queue) leaves
		// the link idle, which is not the shaper's doing: the rate is
		// measured over the busy periods, gaps over 25 ms (3 datagram times)
		// left out. A shaper too slow (gaps over 25 ms everywhere) or absent
		// (3 Mbit/s) still fails.
		var bytes int
		var busy time.Duration
		for i := 1; i < len(rx); i++ {
			if gap := rx[i].at.Sub(rx[i-1].at); gap <= 25*time.Millisecond {
				busy += gap
				bytes += rx[i].size + 42
			}
		}
		secs := rx[len(rx)-1].at.Sub(rx[0].at).Seconds()
		var all int
		for _, r := range rx[1:] {
			all += r.size + 42
		}
		bps := float64(bytes*8) / busy.Seconds()
		sent, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		AddReportEntry("rate 1mbit", fmt.Sprintf("sent %d, received %d datagrams over %.2f s: %.0f bit/s while busy (%.2f s), %.0f bit/s overall",
			sent, len(rx), secs, bps, busy.Seconds(), float64(all*8)/secs))
		Expect(busy.Seconds()).To(BeNumerically(">", 1.5), "the link was busy at least 1.5 s")
		Expect(bps).To(BeNumerically("~", 1e6, 0.25e6))
		Expect(f.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(30*time.Second))

	It("rate 1mbit to some peers (a site link): B, a peer, gets 1 Mbit/s; with B not among the peers it gets all", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		bulkTo := func(tag string) (bps float64) {
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", p.nsA, p.helperBinary,
				addrB+":"+echoPort, tag, "3000000", "2000ms", "1000")
			cmd.Env = append(os.Environ(), helperEnv+"=bulk")
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%s", out)
			last := -1
			Eventually(func() bool {
				c := len(p.srvB.received(tag))
				stable := c == last && c > 0
				last = c
				return stable
			}).WithContext(ctx).WithPolling(200 * time.Millisecond).Should(BeTrue())
			rx := p.srvB.received(tag)
			var bytes int
			var busy time.Duration
			for i := 1; i < len(rx); i++ { // busy periods only, as in the spec above
				if gap := rx[i].at.Sub(rx[i-1].at); gap <= 25*time.Millisecond {
					busy += gap
					bytes += rx[i].size + 42
				}
			}
			Expect(busy.Seconds()).To(BeNumerically(">", 1), "the link was busy at least 1 s")
			return float64(bytes*8) / busy.Seconds()
		}
		toB := mustFault(p.exA, netfault.Rate{Device: p.devA, Rate: "1mbit",
			Peers: []netip.Prefix{netip.MustParsePrefix(addrB + "/32")}})
		Expect(toB.Apply(ctx)).To(Succeed())
		Expect(toB.Apply(ctx)).To(Succeed(), "applying twice")
		limited := bulkTo("peer" + p.tag())
		Expect(toB.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))

		elsewhere := mustFault(p.exA, netfault.Rate{Device: p.devA, Rate: "1mbit",
			Peers: []netip.Prefix{netip.MustParsePrefix("192.0.2.7/32")}})
		Expect(elsewhere.Apply(ctx)).To(Succeed())
		free := bulkTo("other" + p.tag())
		Expect(elsewhere.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
		AddReportEntry("rate to peers", fmt.Sprintf("to a peer %.0f bit/s, to a non-peer %.0f bit/s", limited, free))
		Expect(limited).To(BeNumerically("~", 1e6, 0.25e6))
		Expect(free).To(BeNumerically(">", 2e6), "traffic to other addresses is not shaped")
	}, SpecTimeout(40*time.Second))

	It("delay: netem when the kernel has it; without, the delay line, which needs the namespace file", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		ok, err := netfault.NetemSupported(ctx, p.exA)
		Expect(err).NotTo(HaveOccurred())
		Expect(snap(ctx, p.exA)).To(Equal(before), "the probe leaves nothing behind")
		f := mustFault(p.exA, netfault.Delay{Device: p.devA, Delay: 50 * time.Millisecond, Direction: netfault.Out})
		if !ok {
			AddReportEntry("delay", "this kernel has no sch_netem: Delay uses the NFQUEUE delay line (its own specs)")
			err := f.Apply(ctx)
			Expect(errors.Is(err, netfault.ErrInvalid)).To(BeTrue(), "err = %v", err)
			Expect(err.Error()).To(ContainSubstring("NewAt"))
			Expect(f.Applied()).To(BeFalse())
			Expect(snap(ctx, p.exA)).To(Equal(before))
			Expect(f.Heal(ctx)).To(Succeed())
			return
		}
		base := median(p.probe(ctx, p.nsA, addrB, 20, 20*time.Millisecond, 300*time.Millisecond).RTTus)
		Expect(f.Apply(ctx)).To(Succeed())
		Expect(f.Mechanism()).To(Equal("netem"))
		r := p.probe(ctx, p.nsA, addrB, 20, 20*time.Millisecond, 300*time.Millisecond)
		Expect(r.Recv).To(Equal(20))
		got := float64(median(r.RTTus) - base)
		AddReportEntry("delay", fmt.Sprintf("added RTT %.1f ms for 50 ms netem delay", got/1000))
		Expect(got).To(BeNumerically("~", 50000, 10000))
		Expect(f.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(30*time.Second))

	It("heals in any order, keeps other people's rules and refuses a foreign root qdisc", func(ctx SpecContext) {
		run(ctx, "ip", "netns", "exec", p.nsA, "nft", "add table inet other; add chain inet other c { type filter hook input priority 0; policy accept; }; add rule inet other c udp dport 9 counter accept")
		before := snap(ctx, p.exA)
		part := mustFault(p.exA, netfault.Partition{Peers: peerB, Direction: netfault.Out})
		loss := mustFault(p.exA, netfault.Loss{Percent: 10})
		rate := mustFault(p.exA, netfault.Rate{Device: p.devA, Rate: "10mbit"})
		for _, f := range []*netfault.Fault{part, loss, rate} {
			Expect(f.Apply(ctx)).To(Succeed())
		}
		// A second fault on the same device is refused, not stacked.
		other := mustFault(p.exA, netfault.Rate{Device: p.devA, Rate: "2mbit"})
		Expect(errors.Is(other.Apply(ctx), netfault.ErrBusy)).To(BeTrue())
		for _, f := range []*netfault.Fault{loss, part, rate} {
			Expect(f.Heal(ctx)).To(Succeed(), "heal %s", f)
		}
		Expect(snap(ctx, p.exA)).To(Equal(before))

		// A root qdisc that is not ours is never replaced.
		run(ctx, "ip", "netns", "exec", p.nsB, "tc", "qdisc", "add", "dev", p.devB, "root", "handle", "1:", "htb")
		beforeB := snap(ctx, p.exB)
		err := mustFault(p.exB, netfault.Rate{Device: p.devB, Rate: "1mbit"}).Apply(ctx)
		Expect(errors.Is(err, netfault.ErrBusy)).To(BeTrue(), "err = %v", err)
		Expect(snap(ctx, p.exB)).To(Equal(beforeB))
	}, SpecTimeout(30*time.Second))

	It("Clean removes what a crashed run left", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		for _, s := range []netfault.Spec{
			netfault.Partition{Peers: peerB},
			netfault.Loss{Percent: 5},
			netfault.Rate{Device: p.devA, Rate: "1mbit"},
		} {
			Expect(mustFault(p.exA, s).Apply(ctx)).To(Succeed())
		}
		// The Faults are forgotten, as after a crash.
		Expect(snap(ctx, p.exA)).NotTo(Equal(before))
		removed, err := netfault.Clean(ctx, p.exA)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(HaveLen(3))
		Expect(snap(ctx, p.exA)).To(Equal(before))
		Expect(p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond).Recv).To(Equal(n))
		removed, err = netfault.Clean(ctx, p.exA)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(BeEmpty())
	}, SpecTimeout(30*time.Second))

	It("InNetnsPath and InPID reach the same namespace", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		f := mustFault(netfault.InNetnsPath("/run/netns/"+p.nsA), netfault.Partition{Peers: peerB})
		Expect(f.Apply(ctx)).To(Succeed())
		Expect(p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond).Recv).To(Equal(0))
		Expect(f.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))

		sleeper := exec.Command("ip", "netns", "exec", p.nsA, "sleep", "30")
		Expect(sleeper.Start()).To(Succeed())
		DeferCleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
		// `ip netns exec` enters the namespace after it started: wait for it.
		st, err := os.Stat("/run/netns/" + p.nsA)
		Expect(err).NotTo(HaveOccurred())
		want := fmt.Sprintf("net:[%d]", st.Sys().(*syscall.Stat_t).Ino)
		Eventually(func() (string, error) {
			return os.Readlink(fmt.Sprintf("/proc/%d/ns/net", sleeper.Process.Pid))
		}).WithContext(ctx).Should(Equal(want))
		g := mustFault(netfault.InPID(sleeper.Process.Pid), netfault.Partition{Peers: peerB})
		Expect(g.Apply(ctx)).To(Succeed())
		Expect(p.probe(ctx, p.nsA, addrB, n, time.Millisecond, 300*time.Millisecond).Recv).To(Equal(0))
		Expect(g.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(30*time.Second))
})

func median(xs []int64) int64 {
	GinkgoHelper()
	Expect(xs).NotTo(BeEmpty())
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// icmpInDestUnreach reads IcmpInDestUnreachs of the namespace's kernel.
func icmpInDestUnreach(ctx context.Context, ns string) int {
	GinkgoHelper()
	out := run(ctx, "ip", "netns", "exec", ns, "cat", "/proc/net/snmp")
	var head []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Icmp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, h := range head {
			if h == "InDestUnreachs" {
				v, _ := strconv.Atoi(f[i])
				return v
			}
		}
	}
	Fail("no Icmp InDestUnreachs in /proc/net/snmp")
	return 0
}
