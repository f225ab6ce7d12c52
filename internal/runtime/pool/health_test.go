package pool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// healthRig is a Health on a fake clock with a fake prober, its events and its Run loop.
type healthRig struct {
	h      *pool.Health
	clk    *fakeClock
	prober *fakeProber
	events *eventLog
}

func newRig(cfg pool.HealthConfig, opts ...pool.HealthOption) *healthRig {
	r := &healthRig{clk: newFakeClock(), prober: newFakeProber(), events: &eventLog{}}
	var prober pool.Prober
	if cfg.Interval > 0 {
		prober = r.prober
	}
	h, err := pool.NewHealth(cfg, prober, append([]pool.HealthOption{
		pool.WithClock(r.clk),
		pool.WithEvents(obs.NewRecorder(r.events, "bac")),
		pool.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil)))}, opts...)...)
	Expect(err).NotTo(HaveOccurred())
	r.h = h
	return r
}

// run starts h.Run and stops it at the end of the spec, checking that it returns nil.
func (r *healthRig) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.h.Run(ctx) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done).Should(Receive(BeNil()))
	})
}

// settle waits until the probe loops have made n probes of addr in total and are all parked until their next
// interval (loops peers in all), so the results are applied.
func (r *healthRig) settle(addr string, n, loops int) {
	GinkgoHelper()
	Eventually(func() int { return r.prober.Calls(addr) }).Should(Equal(n))
	Eventually(r.clk.Waiters).Should(Equal(loops))
	Consistently(func() int { return r.prober.Calls(addr) }, 20*time.Millisecond).Should(Equal(n))
}

// tick advances the fake clock by one interval and waits for the next probe of addr.
func (r *healthRig) tick(addr string, n int) {
	GinkgoHelper()
	r.clk.Advance(time.Second)
	r.settle(addr, n, 1)
}

var probeTimeout = fmt.Errorf("pool: probe: %w", pool.ErrProbeTimeout)

var _ = Describe("Health", Label("unit"), func() {
	cfg := pool.HealthConfig{Interval: time.Second, Timeout: 500 * time.Millisecond, FailuresToDown: 3, SuccessesToUp: 2}
	a := pcscf1.Addr

	It("takes a peer down after FailuresToDown failed probes and up after SuccessesToUp answered ones", func() {
		r := newRig(cfg)
		r.h.Watch(pcscf1)
		r.run()
		r.settle(a, 1, 1) // first probe at once
		Expect(r.h.IsDown(a)).To(BeFalse())

		r.prober.Set(a, probeTimeout)
		r.tick(a, 2)
		r.tick(a, 3)
		Expect(r.h.IsDown(a)).To(BeFalse(), "2 failures of 3")
		Expect(r.events.PeerStates()).To(BeEmpty())
		r.tick(a, 4)
		Expect(r.h.IsDown(a)).To(BeTrue())
		r.tick(a, 5)
		r.tick(a, 6)
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{
			peerEvent("pcscf1.ims.test", a, "down", "probe_timeout"),
		}), "one event per change")

		r.prober.Set(a, nil)
		r.tick(a, 7)
		Expect(r.h.IsDown(a)).To(BeTrue(), "1 success of 2")
		r.tick(a, 8)
		Expect(r.h.IsDown(a)).To(BeFalse())
		r.tick(a, 9)
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{
			peerEvent("pcscf1.ims.test", a, "down", "probe_timeout"),
			peerEvent("pcscf1.ims.test", a, "up", "probe_ok"),
		}))
		s := r.h.Snapshot()
		Expect(s).To(HaveLen(1))
		Expect(s[0]).To(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
			"Name": Equal("pcscf1.ims.test"), "Addr": Equal(a), "Down": BeFalse(), "Reason": Equal("probe_ok"),
			"Watched": BeTrue(), "Probes": BeEquivalentTo(9), "ProbeFailures": BeEquivalentTo(5),
			"Since": Equal(r.clk.Now().Add(-time.Second)),
		}))
		Expect(s[0].State()).To(Equal("up"))
	})

	It("counts consecutive failures only", func() {
		r := newRig(pool.HealthConfig{Interval: time.Second, FailuresToDown: 2})
		r.h.Watch(pcscf1)
		r.prober.Set(a, probeTimeout)
		r.run()
		r.settle(a, 1, 1)
		r.prober.Set(a, nil)
		r.tick(a, 2)
		r.prober.Set(a, probeTimeout)
		r.tick(a, 3)
		Expect(r.h.IsDown(a)).To(BeFalse())
		r.tick(a, 4)
		Expect(r.h.IsDown(a)).To(BeTrue())
	})

	It("treats an answered transaction as proof of life while the peer is up", func() {
		r := failedOnceThenAnswered(20 * time.Millisecond)
		Expect(r.h.IsDown(a)).To(BeFalse(), "the failure count was reset in between")
		r.tick(a, 3)
		Expect(r.h.IsDown(a)).To(BeTrue())
	})

	It("does not let answers later than the probe timeout reset the failures: a starved peer still goes down", func() {
		// A gray failure: the peer is alive and answers everything, late. Its late answers prove it alive, not
		// healthy; the probes that time out take it down as they would if it had been silent.
		r := failedOnceThenAnswered(1500 * time.Millisecond)
		Expect(r.h.IsDown(a)).To(BeTrue(), "two failed probes in a row, a late answer in between")
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{
			peerEvent("pcscf1.ims.test", a, "down", "probe_timeout")}))
		Expect(r.h.Snapshot()).To(ConsistOf(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
			"Addr": Equal(a), "LateAnswers": BeEquivalentTo(1), "ConsecutiveFailures": Equal(2)})))

		// An answer exactly at the timeout still counts as prompt.
		Expect(failedOnceThenAnswered(500 * time.Millisecond).h.IsDown(a)).To(BeFalse())
	})

	It("does not take down a peer that timed out on one request but answered a probe after it was sent", func() {
		// The cascade it prevents: pcscf1 dies; a BYE to a user behind it waits at the S-CSCF, which answers nothing
		// until its own timer fires, and every proxy upstream times out at the same moment. The P-CSCF before it
		// answered its probes all along: it is alive, the silence is downstream.
		r := newRig(pool.HealthConfig{Interval: time.Second, FailuresToDown: 2})
		r.h.Watch(pcscf1)
		r.prober.Set(a, nil)
		r.run()
		r.settle(a, 1, 1)
		sent := r.h.Now()
		r.tick(a, 2) // answered 1 s after the request was sent
		r.h.TransactionTimedOut(pcscf1, sent)
		Expect(r.h.IsDown(a)).To(BeFalse())
		Expect(r.events.PeerStates()).To(BeEmpty())
		Expect(r.h.Snapshot()).To(ConsistOf(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
			"Addr": Equal(a), "Down": BeFalse(), "ExcusedTimeouts": BeEquivalentTo(1)})))

		// A provisional response (Heard) counts as much as a probe.
		sent = r.h.Now()
		r.clk.Advance(100 * time.Millisecond)
		r.h.Heard(pcscf1)
		r.h.TransactionTimedOut(pcscf1, sent)
		Expect(r.h.IsDown(a)).To(BeFalse())

		// Silent since the request was sent: down at once, as a failed transaction.
		r.clk.Advance(100 * time.Millisecond)
		r.h.TransactionTimedOut(pcscf1, r.h.Now())
		Expect(r.h.IsDown(a)).To(BeTrue())
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{peerEvent("pcscf1.ims.test", a, "down", "timeout")}))
	})

	It("takes down a peer it never heard from when a request to it times out", func() {
		r := newRig(pool.HealthConfig{})
		r.h.TransactionTimedOut(pcscf2, r.h.Now())
		Expect(r.h.IsDown(pcscf2.Addr)).To(BeTrue())
		r.h.Heard(pool.Target{Name: "x.ims.test", Addr: "192.0.2.1:5060"}) // unknown peers stay unknown
		Expect(r.h.Snapshot()).To(HaveLen(1))
	})

	It("takes a peer down at once on a failed transaction; only probes bring it back", func() {
		r := newRig(pool.HealthConfig{Interval: time.Second, FailuresToDown: 3, SuccessesToUp: 1})
		r.h.Watch(pcscf1)
		r.prober.Set(a, probeTimeout)
		r.run()
		r.settle(a, 1, 1)

		r.h.TransactionFailed(pcscf1, pool.StatusReason(503))
		Expect(r.h.IsDown(a)).To(BeTrue())
		r.h.TransactionFailed(pcscf1, pool.ReasonTimeout)
		r.h.TransactionSucceeded(pcscf1, 10*time.Millisecond) // an answer to an older transaction
		Expect(r.h.IsDown(a)).To(BeTrue())
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{
			peerEvent("pcscf1.ims.test", a, "down", "503"),
		}))

		r.prober.Set(a, nil)
		r.tick(a, 2)
		Expect(r.h.IsDown(a)).To(BeFalse())
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{
			peerEvent("pcscf1.ims.test", a, "down", "503"),
			peerEvent("pcscf1.ims.test", a, "up", "probe_ok"),
		}))
	})

	It("starts probing a peer nobody watched when a transaction to it fails", func() {
		r := newRig(cfg)
		r.run()
		r.h.TransactionFailed(pcscf2, pool.ReasonTransportError)
		Expect(r.h.IsDown(pcscf2.Addr)).To(BeTrue())
		r.settle(pcscf2.Addr, 1, 1)
		r.tick(pcscf2.Addr, 2)
		Expect(r.h.IsDown(pcscf2.Addr)).To(BeFalse())
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{
			peerEvent("pcscf2.ims.test", pcscf2.Addr, "down", "transport_error"),
			peerEvent("pcscf2.ims.test", pcscf2.Addr, "up", "probe_ok"),
		}))
	})

	It("starts probing peers watched while Run runs, each in its own loop", func() {
		r := newRig(cfg)
		r.run()
		r.h.Watch(pcscf1)
		r.h.Watch(pcscf1) // idempotent
		r.h.Watch(pcscf2)
		Eventually(r.clk.Waiters).Should(Equal(2))
		Expect(r.prober.Calls(pcscf1.Addr)).To(Equal(1))
		Expect(r.prober.Calls(pcscf2.Addr)).To(Equal(1))
		r.clk.Advance(time.Second)
		Eventually(func() int { return r.prober.Calls(pcscf1.Addr) + r.prober.Calls(pcscf2.Addr) }).Should(Equal(4))
	})

	It("holds a passive down state for DownHold when probing is disabled", func() {
		r := newRig(pool.HealthConfig{DownHold: 5 * time.Second, Panic: false}) // a lone member: no panic routing
		r.h.TransactionFailed(pcscf3, pool.StatusReason(504))
		Expect(r.h.IsDown(pcscf3.Addr)).To(BeTrue())
		r.clk.Advance(5*time.Second - time.Millisecond)
		Expect(r.h.Candidates([]pool.Target{pcscf3}, seeded(1), nil)).To(BeEmpty())
		r.clk.Advance(time.Millisecond)
		Expect(r.h.Candidates([]pool.Target{pcscf3}, seeded(1), nil)).To(Equal([]pool.Target{pcscf3}))
		Expect(r.h.IsDown(pcscf3.Addr)).To(BeFalse())

		r.h.TransactionFailed(pcscf3, pool.ReasonTimeout)
		r.h.TransactionSucceeded(pcscf3, 10*time.Millisecond)
		Expect(r.h.IsDown(pcscf3.Addr)).To(BeFalse())
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{
			peerEvent("pcscf3.ims.test", pcscf3.Addr, "down", "504"),
			peerEvent("pcscf3.ims.test", pcscf3.Addr, "up", "hold_expired"),
			peerEvent("pcscf3.ims.test", pcscf3.Addr, "down", "timeout"),
			peerEvent("pcscf3.ims.test", pcscf3.Addr, "up", "transaction_ok"),
		}))
	})

	It("treats unknown peers as up and does not learn them from answers", func() {
		r := newRig(cfg)
		Expect(r.h.IsDown("192.0.2.1:5060")).To(BeFalse())
		r.h.TransactionSucceeded(pool.Target{Name: "x.ims.test", Addr: "192.0.2.1:5060"}, 10*time.Millisecond)
		Expect(r.h.Snapshot()).To(BeEmpty())
	})

	DescribeTable("names the reason of a probe failure",
		func(err error, reason string) {
			r := newRig(pool.HealthConfig{Interval: time.Second, FailuresToDown: 1})
			r.h.Watch(pcscf1)
			r.prober.Set(a, err)
			r.run()
			r.settle(a, 1, 1)
			Expect(r.events.PeerStates()).To(Equal([]map[string]string{peerEvent("pcscf1.ims.test", a, "down", reason)}))
		},
		Entry("timeout", probeTimeout, "probe_timeout"),
		Entry("context deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "probe_timeout"),
		Entry("transport", fmt.Errorf("x: %w", pool.ErrTransport), "transport_error"),
		Entry("503", fmt.Errorf("x: %w", &pool.StatusError{Code: 503, Reason: "Service Unavailable"}), "503"),
		Entry("anything else", errors.New("boom"), "probe_error"),
	)

	It("bounds each probe by Timeout through its context", func() {
		deadline := make(chan time.Duration, 1)
		h, err := pool.NewHealth(pool.HealthConfig{Interval: time.Hour, Timeout: 300 * time.Millisecond},
			pool.ProberFunc(func(ctx context.Context, _ pool.Target) error {
				dl, ok := ctx.Deadline()
				Expect(ok).To(BeTrue())
				deadline <- time.Until(dl)
				<-ctx.Done()
				return ctx.Err()
			}), pool.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		h.Watch(pcscf1)
		var left time.Duration
		Eventually(deadline).Should(Receive(&left))
		Expect(left).To(BeNumerically("~", 300*time.Millisecond, 100*time.Millisecond))
		Eventually(func() bool { return h.IsDown(pcscf1.Addr) }).Should(BeFalse())
		Eventually(func() []pool.PeerState { return h.Snapshot() }).Should(ContainElement(
			HaveField("LastProbeError", ContainSubstring("deadline exceeded"))))
		cancel()
		Eventually(done).Should(Receive(BeNil()))
	})

	It("measures each answered probe's round trip, per peer, in windows TakeRTTs hands out", func() {
		h, err := pool.NewHealth(pool.HealthConfig{Interval: 20 * time.Millisecond, Timeout: 500 * time.Millisecond, FailuresToDown: 1000},
			pool.ProberFunc(func(ctx context.Context, t pool.Target) error {
				switch t.Addr {
				case pcscf1.Addr: // 30 ms away
					time.Sleep(30 * time.Millisecond)
				case pcscf3.Addr:
					return probeTimeout // never answers: no round trip
				}
				return nil
			}), pool.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		DeferCleanup(cancel)
		h.Watch(pcscf3)
		h.Watch(pcscf2)
		h.Watch(pcscf1)
		var w []pool.RTTs
		Eventually(func(g Gomega) {
			w = append(w, h.TakeRTTs()...)
			n := map[string]int{}
			for _, p := range w {
				n[p.Name] += len(p.RTTs)
			}
			g.Expect(n["pcscf1.ims.test"]).To(BeNumerically(">=", 5))
			g.Expect(n["pcscf2.ims.test"]).To(BeNumerically(">=", 5))
		}).WithPolling(50 * time.Millisecond).Should(Succeed())
		var slow, fast []time.Duration
		for _, p := range w {
			Expect(p.Name).NotTo(Equal("pcscf3.ims.test"), "a peer that never answered has no round trip")
			if p.Name == "pcscf1.ims.test" {
				slow = append(slow, p.RTTs...)
			} else {
				fast = append(fast, p.RTTs...)
			}
		}
		Expect(slow).To(HaveEach(BeNumerically(">=", 30*time.Millisecond)))
		slices.Sort(fast)
		Expect(fast[len(fast)/2]).To(BeNumerically("<", 30*time.Millisecond), "the median of a peer that answers at once")
		Expect(h.Snapshot()).To(ContainElement(SatisfyAll(HaveField("Name", "pcscf1.ims.test"),
			HaveField("LastProbeRTT", BeNumerically(">=", 30*time.Millisecond)))))

		By("a window holds only what came after the last TakeRTTs")
		cancel()
		Eventually(done).Should(Receive(BeNil()))
		h.TakeRTTs()
		Expect(h.TakeRTTs()).To(BeEmpty(), "nothing probed since")
	})

	It("refuses a second Run while one runs", func() {
		r := newRig(cfg)
		r.h.Watch(pcscf1)
		r.run()
		r.settle(a, 1, 1) // probing, so Run runs
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		Expect(r.h.Run(ctx)).To(MatchError(ContainSubstring("already running")))
	})

	DescribeTable("Validate names the bad field",
		func(c pool.HealthConfig, field string) {
			Expect(c.Validate()).To(MatchError(ContainSubstring(field + ":")))
			_, err := pool.NewHealth(c, newFakeProber())
			Expect(err).To(MatchError(ContainSubstring(field + ":")))
		},
		Entry(nil, pool.HealthConfig{Interval: -1}, "interval"),
		Entry(nil, pool.HealthConfig{Timeout: -1}, "timeout"),
		Entry(nil, pool.HealthConfig{FailuresToDown: -1}, "failures_to_down"),
		Entry(nil, pool.HealthConfig{SuccessesToUp: -1}, "successes_to_up"),
		Entry(nil, pool.HealthConfig{DownHold: -1}, "down_hold"),
	)

	It("needs a prober only when probing", func() {
		_, err := pool.NewHealth(pool.HealthConfig{Interval: time.Second}, nil)
		Expect(err).To(MatchError(ContainSubstring("prober:")))
		h, err := pool.NewHealth(pool.HealthConfig{}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(h.Config()).To(Equal(pool.HealthConfig{Timeout: 500 * time.Millisecond, FailuresToDown: 2,
			SuccessesToUp: 1, DownHold: 10 * time.Second, LagExcuse: 250 * time.Millisecond}))
		Expect(pool.DefaultHealthConfig()).To(Equal(pool.HealthConfig{Interval: time.Second,
			Timeout: 500 * time.Millisecond, FailuresToDown: 2, SuccessesToUp: 1, DownHold: 10 * time.Second,
			LagExcuse: 250 * time.Millisecond}))
	})
})

// failedOnceThenAnswered: pcscf1 (probe timeout 500 ms, 2 failures to down) has its probes time out; one failed,
// then a transaction answered after answeredIn, then the second probe.
func failedOnceThenAnswered(answeredIn time.Duration) *healthRig {
	GinkgoHelper()
	r := newRig(pool.HealthConfig{Interval: time.Second, Timeout: 500 * time.Millisecond, FailuresToDown: 2})
	r.h.Watch(pcscf1)
	a := pcscf1.Addr
	r.prober.Set(a, probeTimeout)
	r.run()
	r.settle(a, 1, 1)
	r.h.TransactionSucceeded(pcscf1, answeredIn)
	r.tick(a, 2)
	return r
}
