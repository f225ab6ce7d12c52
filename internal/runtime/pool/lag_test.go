package pool_test

import (
	"context"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// fakeLag is a LagSource whose process "runs late" from lateFrom on (zero: never), by lag.
type fakeLag struct {
	mu       sync.Mutex
	lateFrom time.Time
	lag      time.Duration
}

func (f *fakeLag) set(from time.Time, lag time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lateFrom, f.lag = from, lag
}

func (f *fakeLag) MaxLagSince(t time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lateFrom.IsZero() {
		return 0
	}
	return f.lag
}

var _ = Describe("a node that itself runs late (LagExcuse)", Label("unit"), func() {
	cfg := pool.HealthConfig{Interval: time.Second, Timeout: 500 * time.Millisecond, FailuresToDown: 2, SuccessesToUp: 1}
	a := pcscf1.Addr

	rig := func(c pool.HealthConfig, lag *fakeLag) *healthRig { return newRig(c, pool.WithLag(lag)) }

	It("does not count probe timeouts while the process runs more than half the probe timeout late, and counts them again after", func() {
		lag := &fakeLag{}
		r := rig(cfg, lag)
		r.h.Watch(pcscf1)
		r.run()
		r.settle(a, 1, 1)

		lag.set(r.clk.Now(), 400*time.Millisecond) // over the default excuse, 250 ms
		r.prober.Set(a, probeTimeout)
		for n := 2; n <= 5; n++ {
			r.tick(a, n)
		}
		Expect(r.h.IsDown(a)).To(BeFalse(), "four timeouts, all while this node was starved")
		Expect(r.h.Snapshot()).To(ConsistOf(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
			"LagExcused": BeEquivalentTo(4), "ProbeFailures": BeZero(), "ConsecutiveFailures": BeZero()})))

		By("still counting a refusal: an answer is not lost to a late reader")
		r.prober.Set(a, &pool.StatusError{Code: 503, Reason: "Service Unavailable"})
		r.tick(a, 6)
		r.tick(a, 7)
		Expect(r.h.IsDown(a)).To(BeTrue())
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{peerEvent("pcscf1.ims.test", a, "down", "503")}))

		By("and timeouts once the lateness is below the excuse")
		r.prober.Set(a, nil)
		r.tick(a, 8)
		Expect(r.h.IsDown(a)).To(BeFalse())
		lag.set(r.clk.Now(), 100*time.Millisecond)
		r.prober.Set(a, probeTimeout)
		r.tick(a, 9)
		r.tick(a, 10)
		Expect(r.h.IsDown(a)).To(BeTrue())
	})

	It("does not take a peer down on a transaction timeout while the process runs late", func() {
		lag := &fakeLag{}
		r := rig(cfg, lag)
		sent := r.h.Now()
		lag.set(sent, time.Second)
		r.h.TransactionTimedOut(pcscf2, sent)
		Expect(r.h.IsDown(pcscf2.Addr)).To(BeFalse())
		lag.set(time.Time{}, 0)
		r.h.TransactionTimedOut(pcscf2, r.h.Now())
		Expect(r.h.IsDown(pcscf2.Addr)).To(BeTrue())
	})

	It("holds every timeout against the peer when the excuse is off (negative)", func() {
		lag := &fakeLag{}
		c := cfg
		c.LagExcuse = -1
		r := rig(c, lag)
		r.h.Watch(pcscf1)
		r.run()
		r.settle(a, 1, 1)
		lag.set(r.clk.Now(), time.Second)
		r.prober.Set(a, probeTimeout)
		r.tick(a, 2)
		r.tick(a, 3)
		Expect(r.h.IsDown(a)).To(BeTrue())
	})
})

var _ = Describe("LagMonitor", Label("unit"), func() {
	It("reports the largest lateness of the wake-ups since an instant, within its window", func() {
		m := pool.NewLagMonitor(50*time.Millisecond, nil, 0)
		t0 := time.Now()
		Expect(m.MaxLagSince(t0)).To(BeZero(), "no sample yet, not running")
		m.Record(t0, 10*time.Millisecond)
		m.Record(t0.Add(time.Second), 300*time.Millisecond)
		m.Record(t0.Add(2*time.Second), 20*time.Millisecond)
		Expect(m.MaxLagSince(t0)).To(Equal(300 * time.Millisecond))
		Expect(m.MaxLagSince(t0.Add(1500 * time.Millisecond))).To(Equal(20 * time.Millisecond))
		By("forgetting samples older than the window once the ring wraps")
		for i := range int(pool.LagWindow/(50*time.Millisecond)) + 1 {
			m.Record(t0.Add(3*time.Second+time.Duration(i)*time.Millisecond), time.Millisecond)
		}
		Expect(m.MaxLagSince(t0)).To(Equal(time.Millisecond))
	})

	It("records a self_lag event when a wake-up is later than its threshold, at most once a second", func() {
		ev := &eventLog{}
		m := pool.NewLagMonitor(50*time.Millisecond, obs.NewRecorder(ev, "pcscf1"), 250*time.Millisecond)
		t0 := time.Now()
		m.Record(t0, 100*time.Millisecond)
		m.Record(t0.Add(100*time.Millisecond), 400*time.Millisecond)
		m.Record(t0.Add(200*time.Millisecond), 600*time.Millisecond)
		m.Record(t0.Add(1500*time.Millisecond), 300*time.Millisecond)
		Expect(ev.Kinds()).To(Equal([]string{"self_lag", "self_lag"}))
	})

	It("records its worst lateness every 5 s in a lag_stats event, however small (the run's health record)", func() {
		ev := &eventLog{}
		m := pool.NewLagMonitor(50*time.Millisecond, obs.NewRecorder(ev, "pcscf1"), 250*time.Millisecond)
		t0 := time.Now()
		for i := 0; i <= 220; i++ { // 11 s of wake-ups every 50 ms, one 80 ms late at 2 s and one 30 ms late at 7 s
			lag := time.Millisecond
			switch i {
			case 40:
				lag = 80 * time.Millisecond
			case 140:
				lag = 30 * time.Millisecond
			}
			m.Record(t0.Add(time.Duration(i)*50*time.Millisecond), lag)
		}
		var stats []obs.LagStats
		for _, line := range strings.Split(strings.TrimSpace(ev.buf.String()), "\n") {
			_, e, err := obs.DecodeEvent([]byte(line))
			Expect(err).NotTo(HaveOccurred())
			if s, ok := e.(obs.LagStats); ok {
				stats = append(stats, s)
			}
		}
		Expect(stats).To(Equal([]obs.LagStats{{MaxMs: 80, IntervalS: 5}, {MaxMs: 30, IntervalS: 5}}))
	})

	It("measures nothing on an idle process", func() {
		m := pool.NewLagMonitor(20*time.Millisecond, nil, 0)
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		go m.Run(ctx)
		t0 := time.Now()
		time.Sleep(300 * time.Millisecond)
		Expect(m.MaxLagSince(t0)).To(BeNumerically("<", pool.DefaultProbeTimeout/2), "below the default excuse")
	})
})
