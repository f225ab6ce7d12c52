package pool_test

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/pool"
)

// faultProber answers at once until its fault is set; then every probe runs into its timeout, which it lets pass
// on the fake clock before it fails.
type faultProber struct {
	clk     *fakeClock
	timeout time.Duration
	dead    atomic.Bool
}

func (p *faultProber) Probe(context.Context, pool.Target) error {
	if !p.dead.Load() {
		return nil
	}
	p.clk.Advance(p.timeout)
	return probeTimeout
}

// detection runs one Health on a fake clock against a peer that dies faultAfter after it was first watched, and
// returns the time from the death until the peer is down (1 ms resolution).
func detection(cfg pool.HealthConfig, faultAfter time.Duration, opts ...pool.HealthOption) time.Duration {
	clk := newFakeClock()
	p := &faultProber{clk: clk, timeout: cfg.Timeout}
	h, err := pool.NewHealth(cfg, p, append(opts, pool.WithClock(clk))...)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() { cancel(); <-done }()
	Eventually(func() bool { h.Watch(pcscf1); return clk.Waiters() == 1 }).Should(BeTrue())
	watched := clk.Now()
	parked := func() { // the loop waits for its next probe
		for clk.Waiters() != 1 {
			runtime.Gosched()
		}
	}
	var fault time.Time
	for i := 0; i < 10000; i++ {
		if fault.IsZero() && !clk.Now().Before(watched.Add(faultAfter)) {
			p.dead.Store(true)
			fault = clk.Now()
		}
		if !fault.IsZero() && h.IsDown(pcscf1.Addr) {
			return clk.Now().Sub(fault)
		}
		clk.Advance(time.Millisecond)
		parked()
	}
	Fail("the peer was never taken down")
	return 0
}

var _ = Describe("Probe phase", Label("unit"), func() {
	It("is a pure function of seed and peer, uniform in [0, interval)", func() {
		const interval = time.Second
		Expect(pool.ProbePhase(7, "pcscf1.ims.test", interval)).To(Equal(pool.ProbePhase(7, "PCSCF1.ims.test.", interval)))
		var phases []time.Duration
		for seed := uint64(1); seed <= 400; seed++ {
			ph := pool.ProbePhase(seed, "pcscf1.ims.test", interval)
			Expect(ph).To(And(BeNumerically(">=", 0), BeNumerically("<", interval)))
			phases = append(phases, ph)
		}
		// 400 draws: each quarter of the interval holds about 100 (binomial sd 8.7).
		quarters := make([]int, 4)
		for _, ph := range phases {
			quarters[ph*4/interval]++
		}
		for q, n := range quarters {
			Expect(n).To(BeNumerically("~", 100, 35), "quarter %d", q)
		}
		Expect(pool.ProbePhase(7, "pcscf1.ims.test", 0)).To(BeZero())
	})

	It("spreads the time to detect a dead peer over one probe interval across seeds", func() {
		cfg := pool.HealthConfig{Interval: 200 * time.Millisecond, Timeout: 100 * time.Millisecond, FailuresToDown: 2}
		// The fault fires just before a whole number of intervals after the peer is watched: without a phase the
		// probes run in step with it, as they did in the lab (every run detected in timeout + interval).
		const early = 10 * time.Millisecond
		const faultAfter = time.Second - early
		lo := cfg.Timeout + time.Duration(cfg.FailuresToDown-1)*cfg.Interval // 300 ms
		hi := lo + cfg.Interval                                              // 500 ms

		seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		with := make([]time.Duration, len(seeds))
		without := make([]time.Duration, len(seeds))
		for i, s := range seeds {
			with[i] = detection(cfg, faultAfter, pool.WithSeed(s))
			without[i] = detection(cfg, faultAfter)
		}
		AddReportEntry("detection with seeded phase (ms)", ms(with))
		AddReportEntry("detection without phase (ms)", ms(without))
		for i, d := range with {
			Expect(d).To(And(BeNumerically(">=", lo), BeNumerically("<", hi)), "seed %d", seeds[i])
			// The phase says when the probes run: the first probe after the fault comes (phase − fault) mod
			// interval after it, and the peer is down lo after that probe.
			ph := pool.ProbePhase(seeds[i], pcscf1.Name, cfg.Interval)
			want := lo + ((ph-faultAfter)%cfg.Interval+cfg.Interval)%cfg.Interval
			Expect(d).To(BeNumerically("~", want, time.Millisecond), "seed %d (phase %s)", seeds[i], ph)
		}
		Expect(slices.Max(with)-slices.Min(with)).To(BeNumerically(">", cfg.Interval/2),
			"the phases of these seeds span more than half an interval")
		for _, d := range without {
			Expect(d).To(Equal(lo+early), "no phase: always the best case")
		}
	})
})

func ms(ds []time.Duration) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Milliseconds()
	}
	return out
}
