package pool_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/pool"
)

var _ = Describe("Health, fast failure detection", Label("unit"), func() {
	cfg := pool.HealthConfig{Interval: time.Second, Timeout: 500 * time.Millisecond, FailuresToDown: 2, SuccessesToUp: 1}
	a := pcscf1.Addr

	It("counts an INVITE without a provisional answer as a missed probe: two misses in a row take the member down", func() {
		r := newRig(cfg)
		r.h.Watch(pcscf1)
		r.run()
		r.settle(a, 1, 1)

		r.h.ProvisionalMissed(pcscf1, r.h.Now())
		Expect(r.h.IsDown(a)).To(BeFalse(), "one miss: a slow member keeps its users")
		By("an answered probe in between clears the count")
		r.tick(a, 2)
		r.h.ProvisionalMissed(pcscf1, r.h.Now())
		Expect(r.h.IsDown(a)).To(BeFalse())

		By("a second miss in a row does not")
		r.h.ProvisionalMissed(pcscf1, r.h.Now())
		Expect(r.h.IsDown(a)).To(BeTrue())
		s := r.h.Snapshot()[0]
		Expect(s.Reason).To(Equal(pool.ReasonNoProvisional))
		Expect(s.ProvisionalMisses).To(BeEquivalentTo(3))
		Expect(r.events.PeerStates()).To(Equal([]map[string]string{peerEvent("pcscf1.ims.test", a, "down", "no_provisional")}))

		By("only probes bring it back")
		r.tick(a, 3)
		Expect(r.h.IsDown(a)).To(BeFalse())
	})

	It("adds a missed INVITE to the failed probes", func() {
		r := newRig(cfg)
		r.h.Watch(pcscf1)
		r.run()
		r.settle(a, 1, 1)
		r.prober.Set(a, probeTimeout)
		r.tick(a, 2)
		Expect(r.h.IsDown(a)).To(BeFalse(), "one failed probe")
		r.h.ProvisionalMissed(pcscf1, r.h.Now())
		Expect(r.h.IsDown(a)).To(BeTrue(), "and a missed INVITE: two misses")
	})

	It("spreads the probes of a peer by the jitter, the same way for the same seed", func() {
		intervals := func(seed uint64) []time.Duration {
			r := newRig(pool.HealthConfig{Interval: 100 * time.Millisecond, Timeout: 50 * time.Millisecond,
				Jitter: 30 * time.Millisecond}, pool.WithSeed(seed))
			r.h.Watch(pcscf1)
			r.run()
			Eventually(r.clk.Waiters).Should(Equal(1)) // the phase
			r.clk.Advance(r.clk.NextAt().Sub(r.clk.Now()))
			r.settle(a, 1, 1)
			var out []time.Duration
			for i := range 12 {
				next := r.clk.NextAt()
				out = append(out, next.Sub(r.clk.Now()))
				r.clk.Advance(next.Sub(r.clk.Now()))
				r.settle(a, i+2, 1)
			}
			return out
		}
		got := intervals(7)
		for _, d := range got {
			Expect(d).To(BeNumerically(">=", 70*time.Millisecond))
			Expect(d).To(BeNumerically("<=", 130*time.Millisecond))
		}
		Expect(len(uniq(got))).To(BeNumerically(">", 6), "spread, not in step: %v", got)
		Expect(intervals(7)).To(Equal(got), "reproducible from the seed")
	})

	It("names a bad jitter", func() {
		_, err := pool.NewHealth(pool.HealthConfig{Interval: 100 * time.Millisecond, Jitter: 100 * time.Millisecond}, newFakeProber())
		Expect(err).To(MatchError(ContainSubstring("jitter")))
		_, err = pool.NewHealth(pool.HealthConfig{Interval: time.Second, Jitter: -time.Millisecond}, newFakeProber())
		Expect(err).To(MatchError(ContainSubstring("jitter: must not be negative")))
	})
})

func uniq(ds []time.Duration) map[time.Duration]bool {
	m := map[time.Duration]bool{}
	for _, d := range ds {
		m[d] = true
	}
	return m
}
