package netfault_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/netfault"
)

// addrC is a second address of B: traffic to it is "a third address".
const addrC = "10.200.0.3"

// rttStats summarises round trips in microseconds.
type rttStats struct {
	n                          int
	p10, p25, median, p75, p90 int64
}

func stats(us []int64) rttStats {
	s := append([]int64(nil), us...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) int64 { return s[int(q*float64(len(s)-1)+0.5)] }
	return rttStats{n: len(s), p10: at(0.1), p25: at(0.25), median: at(0.5), p75: at(0.75), p90: at(0.9)}
}

func (s rttStats) iqr() int64 { return s.p75 - s.p25 }

func (s rttStats) spread() int64 { return s.p90 - s.p10 }

func (s rttStats) String() string {
	return fmt.Sprintf("n=%d median %.2f ms, p10 %.2f, p90 %.2f", s.n, float64(s.median)/1000, float64(s.p10)/1000, float64(s.p90)/1000)
}

// The delay line runs in a child process: on a machine loaded far beyond its
// cores the kernel's scheduler still adds its latency to every delay. The
// timing specs may run twice (the project's rule: a timing failure under load
// is rerun once).
var _ = Describe("the NFQUEUE delay line", Label("netns", "full"), func() {
	var (
		p     *pair
		pathA string
	)
	const probes = 60
	peer := func(a string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(a + "/32")} }

	BeforeEach(func(ctx SpecContext) {
		p = newPair(ctx)
		pathA = "/run/netns/" + p.nsA
		run(ctx, "ip", "-n", p.nsB, "addr", "add", addrC+"/24", "dev", p.devB)
	}, NodeTimeout(30*time.Second))

	// rtt probes target from A, every 10 ms, and requires every echo.
	rtt := func(ctx context.Context, target string) rttStats {
		GinkgoHelper()
		r := p.probe(ctx, p.nsA, target, probes, 10*time.Millisecond, 400*time.Millisecond)
		Expect(r.Recv).To(Equal(probes), "echoes from %s", target)
		return stats(r.RTTus)
	}
	delayAt := func(spec netfault.Delay) *netfault.Fault {
		GinkgoHelper()
		f, err := netfault.NewAt(p.exA, pathA, spec)
		Expect(err).NotTo(HaveOccurred())
		return f
	}
	// added is the growth of the median RTT in ms.
	added := func(with, base rttStats) float64 { return float64(with.median-base.median) / 1000 }

	It("20 ms out: the median RTT grows by 20 ms ± 20 %; heal leaves no rule, no table, no qdisc and the RTT is back", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		base := rtt(ctx, addrB)
		f := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out})
		Expect(f.Apply(ctx)).To(Succeed())
		Expect(f.Apply(ctx)).To(Succeed(), "applying twice")
		netem, err := netfault.NetemSupported(ctx, p.exA)
		Expect(err).NotTo(HaveOccurred())
		if !netem {
			Expect(f.Mechanism()).To(Equal("nfqueue"))
			Expect(snap(ctx, p.exA).ruleset).To(MatchRegexp(`table ip mangle \{(?s:.*)queue num \d+ bypass`))
		}
		with := rtt(ctx, addrB)
		AddReportEntry("delay 20 ms out ("+f.Mechanism()+")", fmt.Sprintf("added median RTT %.2f ms (error %+.2f ms); without: %s; with: %s",
			added(with, base), added(with, base)-20, base, with))
		Expect(added(with, base)).To(BeNumerically("~", 20, 4))
		if st, ok := f.QueueStats(); ok {
			Expect(st.Received).To(BeNumerically(">=", probes))
			Expect(st.Released).To(Equal(st.Received))
		}

		Expect(f.Heal(ctx)).To(Succeed())
		Expect(f.Heal(ctx)).To(Succeed(), "healing twice")
		after := snap(ctx, p.exA)
		Expect(after).To(Equal(before))
		Expect(after.ruleset).NotTo(ContainSubstring("mangle"))
		Expect(after.qdiscs).NotTo(ContainSubstring("fa17:"))
		again := rtt(ctx, addrB)
		Expect(added(again, base)).To(BeNumerically("<", 3), "RTT after heal: %s", again)
	}, FlakeAttempts(2), SpecTimeout(60*time.Second))

	It("runs in a process of its own, which the heal ends, and keeps its time while the applying process is busy", func(ctx SpecContext) {
		base := rtt(ctx, addrB)
		f := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out})
		Expect(f.Apply(ctx)).To(Succeed())
		if f.Mechanism() != "nfqueue" {
			Skip("the kernel has netem: no delay line")
		}
		Expect(delayLineProcs()).To(HaveLen(1), "one child process with the delay line")

		// Every P of this process kept busy, allocating (the garbage collector runs too): a consumer in this
		// process would wait for a P behind these goroutines at every wake-up.
		stop := make(chan struct{})
		var sink atomic.Int64
		for range 4 * runtime.GOMAXPROCS(0) {
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					b := make([]byte, 64<<10)
					sink.Add(int64(len(b)))
				}
			}()
		}
		with := rtt(ctx, addrB)
		close(stop)
		AddReportEntry("delay 20 ms out, applying process busy", fmt.Sprintf("added median RTT %.2f ms; p90 %.2f ms; without: %s",
			added(with, base), float64(with.p90-base.median)/1000, base))
		Expect(added(with, base)).To(BeNumerically("~", 20, 4))

		Expect(f.Heal(ctx)).To(Succeed())
		Expect(delayLineProcs()).To(BeEmpty(), "the heal ended the delay line's process")
	}, FlakeAttempts(2), SpecTimeout(60*time.Second))

	It("adds little of its own at the smallest delay, and keeps up with a few thousand packets per second", func(ctx SpecContext) {
		base := rtt(ctx, addrB)
		f := delayAt(netfault.Delay{Delay: time.Microsecond, Direction: netfault.Out, Peers: peer(addrB)})
		Expect(f.Apply(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(f.Heal(ctx)).To(Succeed()) })
		with := rtt(ctx, addrB)
		AddReportEntry("delay line overhead (1 µs configured)", fmt.Sprintf("added median RTT %.3f ms, spread p10–p90 %.3f ms (without %.3f ms); without: %s; with: %s",
			added(with, base), float64(with.spread())/1000, float64(base.spread())/1000, base, with))
		Expect(added(with, base)).To(BeNumerically("<", 2))

		// Bulk: 100-byte datagrams for 1 s at a packet rate; count what went
		// through the queue (the rest passed undelayed: the queue is fail-open).
		for _, pps := range []int{1000, 5000, 20000, 50000} {
			st0, _ := f.QueueStats()
			tag := "bulk" + p.tag()
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", p.nsA, p.helperBinary,
				addrB+":"+echoPort, tag, strconv.Itoa(pps*800), "1s", "100")
			cmd.Env = append(os.Environ(), helperEnv+"=bulk")
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "%s", out)
			sent, _ := strconv.Atoi(strings.TrimSpace(string(out)))
			time.Sleep(300 * time.Millisecond)
			st1, _ := f.QueueStats()
			queued := st1.Received - st0.Received
			got := len(p.srvB.received(tag))
			AddReportEntry(fmt.Sprintf("delay line at %d packets/s offered", pps),
				fmt.Sprintf("sent %d in 1 s, %d went through the queue (%.0f %%, the rest bypassed it), B received %d, queue errors %d",
					sent, queued, 100*float64(queued)/float64(max(sent, 1)), got, st1.Errors-st0.Errors))
			if pps == 1000 {
				Expect(sent).To(BeNumerically(">", 900))
				Expect(queued).To(BeNumerically(">=", sent), "every datagram was delayed")
				Expect(got).To(Equal(sent))
			}
		}
	}, SpecTimeout(90*time.Second))

	It("costs little CPU: an idle line sleeps, a carrying one pays per packet", func(ctx SpecContext) {
		f := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrB)})
		Expect(f.Apply(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(f.Heal(ctx)).To(Succeed()) })
		if f.Mechanism() != "nfqueue" {
			Skip("the kernel has netem: no delay line")
		}
		pids := delayLineProcs()
		Expect(pids).To(HaveLen(1))
		cpu := func() (time.Duration, time.Duration) { return procCPU(pids[0]) }
		u0, s0 := cpu()
		time.Sleep(10 * time.Second)
		u1, s1 := cpu()
		idle := u1 - u0 + s1 - s0

		const pps, secs = 500, 10
		st0, _ := f.QueueStats()
		u2, s2 := cpu()
		tag := "cpu" + p.tag()
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", p.nsA, p.helperBinary,
			addrB+":"+echoPort, tag, strconv.Itoa(pps*800), fmt.Sprintf("%ds", secs), "100")
		cmd.Env = append(os.Environ(), helperEnv+"=bulk")
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		time.Sleep(300 * time.Millisecond)
		u3, s3 := cpu()
		busyUser, busySys := u3-u2, s3-s2
		busy := busyUser + busySys
		st1, _ := f.QueueStats()
		n := st1.Received - st0.Received
		AddReportEntry("delay line CPU (its process, /proc/<pid>/stat)", fmt.Sprintf("idle for 10 s: %.2f CPU-s (%.2f %% of "+
			"a core); %d packets/s offered for %d s (%d through the queue): %.2f CPU-s (user %.2f, system %.2f; %.2f %% of a "+
			"core, %.0f µs a packet)", idle.Seconds(), 100*idle.Seconds()/10, pps, secs, n, busy.Seconds(),
			busyUser.Seconds(), busySys.Seconds(), 100*busy.Seconds()/secs, float64(busy.Microseconds())/float64(max(n, 1))))
		Expect(n).To(BeNumerically(">=", pps*secs*9/10), "the datagrams went through the queue")
		Expect(idle).To(BeNumerically("<=", 100*time.Millisecond), "an idle line uses under 1 %% of a core")
		Expect(busy).To(BeNumerically("<", secs*time.Second/2), "a line carrying %d packets/s uses under half a core", pps)
	}, SpecTimeout(60*time.Second))

	It("jitter widens the spread of the round trips around the same median", func(ctx SpecContext) {
		base := rtt(ctx, addrB)
		f := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrB)})
		Expect(f.Apply(ctx)).To(Succeed())
		flat := rtt(ctx, addrB)
		Expect(f.Heal(ctx)).To(Succeed())
		g := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Jitter: 10 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrB)})
		Expect(g.Apply(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(g.Heal(ctx)).To(Succeed()) })
		jit := rtt(ctx, addrB)
		AddReportEntry("delay 20 ms ± 10 ms", fmt.Sprintf("interquartile range %.2f ms (uniform ±10 ms: 10 ms expected), without jitter %.2f ms; p10 %.2f ms (12 ms expected), without jitter %.2f ms; added median %.2f ms; with: %s",
			float64(jit.iqr())/1000, float64(flat.iqr())/1000, float64(jit.p10-base.median)/1000, float64(flat.p10-base.median)/1000, added(jit, base), jit))
		Expect(added(jit, base)).To(BeNumerically("~", 20, 4))
		Expect(jit.iqr()).To(BeNumerically(">", 5000), "half the 10 ms of a uniform ±10 ms at least")
		// Load only ever lengthens a round trip: packets faster than the
		// flat delay are the jitter's.
		Expect(jit.p10).To(BeNumerically("<", flat.p10-4000), "a tenth of the packets at least 4 ms faster than without jitter")
		Expect(jit.p10).To(BeNumerically(">=", base.p10+8000), "and none much faster than 20 − 10 ms")
	}, FlakeAttempts(2), SpecTimeout(60*time.Second))

	It("Peers limits the delay to those destinations: a third address is not delayed", func(ctx SpecContext) {
		baseB, baseC := rtt(ctx, addrB), rtt(ctx, addrC)
		f := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrB)})
		Expect(f.Apply(ctx)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(f.Heal(ctx)).To(Succeed()) })
		withB, withC := rtt(ctx, addrB), rtt(ctx, addrC)
		AddReportEntry("delay 20 ms to one peer", fmt.Sprintf("to the peer +%.2f ms, to the third address +%.2f ms", added(withB, baseB), added(withC, baseC)))
		Expect(added(withB, baseB)).To(BeNumerically("~", 20, 4))
		Expect(added(withC, baseC)).To(BeNumerically("<", 3))
	}, FlakeAttempts(2), SpecTimeout(60*time.Second))

	It("Direction In delays what arrives, Both each way", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		base := rtt(ctx, addrB)
		in := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.In, Peers: peer(addrB)})
		Expect(in.Apply(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA).ruleset).To(ContainSubstring("hook prerouting"))
		withIn := rtt(ctx, addrB)
		Expect(in.Heal(ctx)).To(Succeed())
		both := delayAt(netfault.Delay{Delay: 20 * time.Millisecond})
		Expect(both.Apply(ctx)).To(Succeed())
		withBoth := rtt(ctx, addrB)
		Expect(both.Heal(ctx)).To(Succeed())
		AddReportEntry("delay 20 ms in / both", fmt.Sprintf("in: +%.2f ms, both: +%.2f ms", added(withIn, base), added(withBoth, base)))
		Expect(added(withIn, base)).To(BeNumerically("~", 20, 4))
		Expect(added(withBoth, base)).To(BeNumerically("~", 40, 8))
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, FlakeAttempts(2), SpecTimeout(60*time.Second))

	It("two delays in one namespace coexist, heal in any order, and keep someone else's mangle rule", func(ctx SpecContext) {
		run(ctx, "ip", "netns", "exec", p.nsA, "iptables-nft", "-t", "mangle", "-A", "PREROUTING", "-p", "udp", "--dport", "9", "-j", "ACCEPT")
		before := snap(ctx, p.exA)
		baseB, baseC := rtt(ctx, addrB), rtt(ctx, addrC)
		f := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrB)})
		g := delayAt(netfault.Delay{Delay: 40 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrC)})
		Expect(f.Apply(ctx)).To(Succeed())
		Expect(g.Apply(ctx)).To(Succeed())
		sf, _ := f.QueueStats()
		sg, _ := g.QueueStats()
		Expect(sf.Queue).NotTo(Equal(sg.Queue))
		withB, withC := rtt(ctx, addrB), rtt(ctx, addrC)
		AddReportEntry("two delays", fmt.Sprintf("to B (20 ms): %s (base %s); to C (40 ms): %s (base %s)", withB, baseB, withC, baseC))
		Expect(added(withB, baseB)).To(BeNumerically("~", 20, 4))
		Expect(added(withC, baseC)).To(BeNumerically("~", 40, 8))
		// The same parameters twice in one namespace are refused, not stacked.
		h := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrB)})
		Expect(errors.Is(h.Apply(ctx), netfault.ErrBusy)).To(BeTrue())
		Expect(f.Heal(ctx)).To(Succeed(), "the first healed while the second is applied")
		Expect(added(rtt(ctx, addrB), baseB)).To(BeNumerically("<", 3))
		Expect(added(rtt(ctx, addrC), baseC)).To(BeNumerically("~", 40, 8))
		Expect(g.Heal(ctx)).To(Succeed())
		after := snap(ctx, p.exA)
		Expect(after).To(Equal(before))
		Expect(after.ruleset).To(ContainSubstring("udp dport 9"))
	}, FlakeAttempts(2), SpecTimeout(60*time.Second))

	It("applies and heals several delays concurrently and leaves the namespace as it was", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		specs := []netfault.Delay{
			{Delay: 5 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrB)},
			{Delay: 6 * time.Millisecond, Direction: netfault.In, Peers: peer(addrB)},
			{Delay: 7 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrC)},
			{Delay: 8 * time.Millisecond},
		}
		faults := make([]*netfault.Fault, len(specs))
		for i, s := range specs {
			faults[i] = delayAt(s)
		}
		each := func(op func(*netfault.Fault) error) []error {
			errs := make([]error, len(faults))
			done := make(chan int)
			for i, f := range faults {
				go func() { errs[i] = op(f); done <- i }()
			}
			for range faults {
				<-done
			}
			return errs
		}
		for _, err := range each(func(f *netfault.Fault) error { return f.Apply(ctx) }) {
			Expect(err).NotTo(HaveOccurred())
		}
		queues := map[uint16]bool{}
		for _, f := range faults {
			st, ok := f.QueueStats()
			Expect(ok).To(BeTrue())
			queues[st.Queue] = true
		}
		Expect(queues).To(HaveLen(len(faults)), "one queue each")
		Expect(p.probe(ctx, p.nsA, addrB, 10, 5*time.Millisecond, 300*time.Millisecond).Recv).To(Equal(10), "traffic flows through the queues")
		for _, err := range each(func(f *netfault.Fault) error { return f.Heal(ctx) }) {
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(60*time.Second))

	It("Clean removes the rules a crashed run left and the table they were in", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		// A crashed run: its rule stays, its consumer is gone (bypass: traffic flows).
		run(ctx, "ip", "netns", "exec", p.nsA, "iptables-nft", "-t", "mangle", "-A", "OUTPUT", "!", "-o", "lo",
			"-m", "comment", "--comment", "imslab_fault_delay_deadbeef", "-j", "NFQUEUE", "--queue-num", "17999", "--queue-bypass")
		// And a live one that a Clean run elsewhere sweeps away.
		f := delayAt(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.In})
		Expect(f.Apply(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).NotTo(Equal(before))
		removed, err := netfault.Clean(ctx, p.exA)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(ContainElement(ContainSubstring("imslab_fault_delay_deadbeef")))
		Expect(removed).To(ContainElement("nft table ip mangle"))
		Expect(snap(ctx, p.exA)).To(Equal(before))
		Expect(f.Heal(ctx)).To(Succeed(), "healing after Clean stops the consumer")
		Expect(snap(ctx, p.exA)).To(Equal(before))
		removed, err = netfault.Clean(ctx, p.exA)
		Expect(err).NotTo(HaveOccurred())
		Expect(removed).To(BeEmpty())
	}, SpecTimeout(60*time.Second))

	It("needs the namespace file when it cannot use netem, and says so", func(ctx SpecContext) {
		before := snap(ctx, p.exA)
		f, err := netfault.New(p.exA, netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out, Peers: peer(addrB)})
		Expect(err).NotTo(HaveOccurred())
		err = f.Apply(ctx)
		Expect(errors.Is(err, netfault.ErrInvalid)).To(BeTrue(), "err = %v", err)
		Expect(err.Error()).To(ContainSubstring("NewAt"))
		Expect(f.Applied()).To(BeFalse())
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(30*time.Second))

	It("rate on Device \"\" puts one tbf on every device but lo, healed together", func(ctx SpecContext) {
		run(ctx, "ip", "-n", p.nsA, "link", "add", "nfx1", "type", "veth", "peer", "name", "nfx2")
		before := snap(ctx, p.exA)
		f := mustFault(p.exA, netfault.Rate{Rate: "10mbit"})
		Expect(f.Apply(ctx)).To(Succeed())
		Expect(f.Apply(ctx)).To(Succeed(), "applying twice")
		q := snap(ctx, p.exA).qdiscs
		for _, dev := range []string{p.devA, "nfx1", "nfx2"} {
			Expect(q).To(MatchRegexp(`qdisc tbf fa17: dev %s root`, dev))
		}
		Expect(q).NotTo(MatchRegexp(`fa17: dev lo `))
		// A second rate on one of those devices is refused.
		Expect(errors.Is(mustFault(p.exA, netfault.Rate{Device: "nfx1", Rate: "1mbit"}).Apply(ctx), netfault.ErrBusy)).To(BeTrue())
		Expect(f.Heal(ctx)).To(Succeed())
		Expect(snap(ctx, p.exA)).To(Equal(before))
	}, SpecTimeout(30*time.Second))
})

// delayLineProcs returns the PIDs of this process's children that run a delay line (their environment has
// IMSLAB_NETFAULT_DELAY_LINE).
func delayLineProcs() []int {
	GinkgoHelper()
	var out []int
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	Expect(err).NotTo(HaveOccurred())
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(st), "environ"))
		if err != nil || !strings.Contains(string(env), "IMSLAB_NETFAULT_DELAY_LINE=") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
		out = append(out, pid)
	}
	return out
}

// procCPU is the user and the system CPU time of process pid so far (/proc/<pid>/stat, in clock ticks of 10 ms).
func procCPU(pid int) (user, sys time.Duration) {
	GinkgoHelper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	Expect(err).NotTo(HaveOccurred())
	// After "(comm)": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	Expect(len(f)).To(BeNumerically(">", 12))
	u, err := strconv.ParseInt(f[11], 10, 64)
	Expect(err).NotTo(HaveOccurred())
	s, err := strconv.ParseInt(f[12], 10, 64)
	Expect(err).NotTo(HaveOccurred())
	return time.Duration(u) * 10 * time.Millisecond, time.Duration(s) * 10 * time.Millisecond
}
