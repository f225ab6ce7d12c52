package overload_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/imslab/quasipool/internal/runtime/overload"
)

var _ = Describe("the overload controller", func() {
	// A controller whose probe never fires on its own (a long interval): the spec feeds the lag.
	manual := func(cfg overload.Config) *overload.Controller {
		cfg.Interval = time.Hour
		c := overload.New(cfg, 7)
		DeferCleanup(c.Close)
		return c
	}

	It("admits everything while the node keeps up", func() {
		c := manual(overload.Config{})
		for range 100 {
			c.Observe(time.Millisecond)
		}
		for range 1000 {
			ok, _ := c.Admit()
			Expect(ok).To(BeTrue())
			c.Done()
		}
		Expect(c.Stats()).To(MatchAllFieldsOf(1000, 0))
	})

	It("sheds a growing share while the lag stays above the target, and admits everything again once it is gone", func() {
		c := manual(overload.Config{Target: 20 * time.Millisecond, Step: 0.05, MaxShed: 0.9})
		for range 100 {
			c.Observe(200 * time.Millisecond)
		}
		Expect(c.ShedShare()).To(BeNumerically("~", 0.9, 1e-9), "capped at MaxShed")
		shed := 0
		for range 2000 {
			ok, ra := c.Admit()
			if ok {
				c.Done()
			} else {
				shed++
				Expect(ra).To(BeNumerically(">=", time.Second))
				Expect(ra).To(BeNumerically("<=", 2*time.Second))
			}
		}
		Expect(shed).To(BeNumerically("~", 1800, 80), "about 90 %% of 2000 shed")
		Expect(c.Stats().ShedLag).To(BeEquivalentTo(shed), "counted as shed on lag")

		for range 200 {
			c.Observe(0)
		}
		Expect(c.ShedShare()).To(BeZero())
		ok, _ := c.Admit()
		Expect(ok).To(BeTrue())
	})

	It("keeps its share between target/2 and target (hysteresis)", func() {
		c := manual(overload.Config{Target: 20 * time.Millisecond})
		for range 100 {
			c.Observe(100 * time.Millisecond)
		}
		before := c.ShedShare()
		Expect(before).To(BeNumerically(">", 0))
		// The smoothed lag decays towards 15 ms: at first it is still above the target (the share grows), then it
		// sits between 10 and 20 ms, where the share must not move.
		for range 100 {
			c.Observe(15 * time.Millisecond)
		}
		held := c.ShedShare()
		for range 100 {
			c.Observe(15 * time.Millisecond)
		}
		Expect(c.ShedShare()).To(Equal(held))
	})

	It("rejects every request beyond MaxInFlight, whatever the lag", func() {
		c := manual(overload.Config{MaxInFlight: 3})
		for range 3 {
			ok, _ := c.Admit()
			Expect(ok).To(BeTrue())
		}
		ok, ra := c.Admit()
		Expect(ok).To(BeFalse())
		Expect(ra).To(BeNumerically(">=", time.Second))
		c.Done()
		ok, _ = c.Admit()
		Expect(ok).To(BeTrue(), "room again after one finished")
		Expect(c.Stats().InFlight).To(BeEquivalentTo(3))
	})

	It("admits everything when disabled, and a nil controller too", func() {
		c := manual(overload.Config{Disabled: true, MaxInFlight: 1})
		for range 100 {
			c.Observe(time.Second)
		}
		for range 10 {
			ok, _ := c.Admit()
			Expect(ok).To(BeTrue())
		}
		var nilc *overload.Controller
		ok, _ := nilc.Admit()
		Expect(ok).To(BeTrue())
		nilc.Done()
	})

	It("admits phones' new requests at MaxRate, with a bucket of one second's worth, and the trust domain's at any rate", func() {
		c := manual(overload.Config{MaxRate: 10})
		t := time.Unix(1000, 0)
		admitted := 0
		for range 30 { // a burst: the full bucket passes, the rest is shed
			if ok, ra := c.AdmitAccessAt(t); ok {
				admitted++
				c.Done()
			} else {
				Expect(ra).To(BeNumerically(">=", time.Second))
			}
		}
		Expect(admitted).To(Equal(10))
		for range 50 { // between the lab's nodes: not rate-limited
			ok, _ := c.Admit()
			Expect(ok).To(BeTrue())
			c.Done()
		}
		// 20 s offered at 2× the rate, evenly: the bucket refills at 10/s and admits that much.
		admitted = 0
		for i := range 400 {
			if ok, _ := c.AdmitAccessAt(t.Add(time.Duration(i+1) * 50 * time.Millisecond)); ok {
				admitted++
				c.Done()
			}
		}
		Expect(admitted).To(BeNumerically("~", 200, 1))
		st := c.Stats()
		Expect(st.ShedRate).To(Equal(st.Shed))
		Expect(st.Shed).To(BeEquivalentTo(20 + 400 - admitted))
		Expect(st.ShedInFlight).To(BeZero())
		// A clock that goes back (another goroutine stamped later) does not refill or break the bucket.
		ok, _ := c.AdmitAccessAt(t)
		Expect(ok).To(BeFalse())
		// After a pause at under the rate, everything passes again.
		later := t.Add(time.Minute)
		for i := range 50 {
			ok, _ := c.AdmitAccessAt(later.Add(time.Duration(i) * 200 * time.Millisecond))
			Expect(ok).To(BeTrue())
			c.Done()
		}
	})

	Context("the core's answer time (ObserveChain, the BAC)", func() {
		slow, fast := 110*time.Millisecond, 10*time.Millisecond // slow: just above the 100 ms target
		many := func(d time.Duration, n int) []time.Duration {
			out := make([]time.Duration, n)
			for i := range out {
				out[i] = d
			}
			return out
		}
		// window offers phones' new requests at rate per second for 200 ms (admitting what the controller
		// admits), feeds the answer times and ends the window; it returns how many were admitted.
		window := func(c *overload.Controller, t *time.Time, rate float64, samples ...time.Duration) (admitted int) {
			n := int(rate / 5)
			for i := range n {
				if ok, _ := c.AdmitAccessAt(t.Add(time.Duration(i) * 200 * time.Millisecond / time.Duration(n))); ok {
					admitted++
					c.Done()
				}
			}
			for _, d := range samples {
				c.ObserveChain(d)
			}
			*t = t.Add(200 * time.Millisecond)
			c.EvalChain(*t)
			return admitted
		}

		It("caps phones' new requests at 85 % of the rate admitted when the core answers slowly, cuts again only after ChainHold, and lifts the cap once the core is fast", func() {
			c := manual(overload.Config{ChainTarget: 100 * time.Millisecond})
			t := time.Unix(1000, 0)
			c.EvalChain(t) // the first window starts
			Expect(window(c, &t, 300, many(fast, 20)...)).To(Equal(60), "no cap while the core is fast")
			Expect(c.ChainLimit()).To(BeZero())
			window(c, &t, 300, many(slow, 20)...)
			Expect(c.ChainLimit()).To(BeNumerically("~", 255, 1), "85 %% of the 300/s admitted (a cut of at most 85 %%)")
			Expect(c.Stats().Chain).To(Equal(slow))
			Expect(c.ShedShare()).To(BeZero(), "the node's own lag is fine")
			for range 4 { // within the hold: no further cut, though still slow
				window(c, &t, 500, many(slow, 20)...)
			}
			Expect(c.ChainLimit()).To(BeNumerically("~", 255, 1))

			By("the cap admits about its rate of what phones offer, and never holds back the trust domain")
			admitted := 0
			for range 5 {
				admitted += window(c, &t, 500) // too few answers: the cap stays
			}
			Expect(c.ChainLimit()).To(BeNumerically("~", 255, 1))
			Expect(admitted).To(BeNumerically("~", 265, 30), "about the cap's rate over 1 s of 500/s offered")
			Expect(c.Stats().ShedChain).To(BeNumerically(">=", 500-admitted))
			for range 200 {
				ok, _ := c.Admit()
				Expect(ok).To(BeTrue(), "requests between the lab's nodes are not held to the cap")
				c.Done()
			}

			By("a fast core grows the cap by 5 %% a window; once well above what phones offer it is lifted")
			before := c.ChainLimit()
			window(c, &t, 100, many(fast, 20)...)
			Expect(c.ChainLimit()).To(BeNumerically("~", before*1.05, 1))
			for range 30 {
				window(c, &t, 100, many(fast, 20)...)
			}
			Expect(c.ChainLimit()).To(BeZero())
			Expect(window(c, &t, 500)).To(Equal(100), "no cap any more")
		})

		It("cuts deeper the slower the core: target/median of the admitted rate, at least half of it", func() {
			c := manual(overload.Config{ChainTarget: 100 * time.Millisecond})
			t := time.Unix(1000, 0)
			c.EvalChain(t)
			window(c, &t, 300, many(fast, 20)...)
			window(c, &t, 300, many(150*time.Millisecond, 20)...)
			Expect(c.ChainLimit()).To(BeNumerically("~", 300*100.0/150, 1), "100/150 of 300/s")
			for range 5 { // 1 s past the hold, offering the cap's 200/s (too few answers: the cap stays)
				window(c, &t, 200)
			}
			window(c, &t, 200, many(2*time.Second, 20)...)
			Expect(c.ChainLimit()).To(BeNumerically("~", 100, 5), "half of the ~200/s admitted: no deeper than half")
		})

		It("is not moved by a minority of slow answers", func() {
			c := manual(overload.Config{ChainTarget: 100 * time.Millisecond})
			t := time.Unix(1000, 0)
			c.EvalChain(t)
			samples := append(many(fast, 12), many(2*time.Second, 8)...) // 40 % of the answers 2 s late
			for range 20 {
				window(c, &t, 300, samples...)
			}
			Expect(c.ChainLimit()).To(BeZero())
			Expect(c.Stats().Chain).To(Equal(fast), "the median")
		})

		It("holds the cap between target/2 and target, and does not move it on fewer than 3 answers", func() {
			c := manual(overload.Config{ChainTarget: 100 * time.Millisecond})
			t := time.Unix(1000, 0)
			c.EvalChain(t)
			window(c, &t, 300, many(fast, 20)...)
			window(c, &t, 300, many(slow, 20)...)
			held := c.ChainLimit()
			Expect(held).To(BeNumerically(">", 0))
			for range 10 {
				window(c, &t, 300, many(70*time.Millisecond, 20)...)
			}
			Expect(c.ChainLimit()).To(Equal(held), "70 ms: between 50 and 100 ms")
			window(c, &t, 300, slow, slow)
			Expect(c.ChainLimit()).To(Equal(held), "two answers are no evidence either way: the cap stays")
		})

		It("is not watched with a negative target, nor by a nil controller", func() {
			c := manual(overload.Config{ChainTarget: -1})
			t := time.Unix(1000, 0)
			c.EvalChain(t)
			for range 10 {
				window(c, &t, 300, many(10*time.Second, 20)...)
			}
			Expect(c.ChainLimit()).To(BeZero())
			var none *overload.Controller
			none.ObserveChain(time.Second)
			none.EvalChain(t)
			Expect(none.ChainLimit()).To(BeZero())
		})
	})

	It("counts what it shed by reason in its Prometheus metrics", func() {
		c := manual(overload.Config{MaxRate: 1, MaxInFlight: 2})
		now := time.Unix(1000, 0)
		ok, _ := c.AdmitAccessAt(now) // the one token
		Expect(ok).To(BeTrue())
		ok, _ = c.AdmitAccessAt(now) // no token left
		Expect(ok).To(BeFalse())
		ok, _ = c.Admit() // in flight: 2
		Expect(ok).To(BeTrue())
		ok, _ = c.Admit() // beyond MaxInFlight
		Expect(ok).To(BeFalse())
		reg := prometheus.NewPedanticRegistry()
		for _, col := range c.Collectors() {
			Expect(reg.Register(col)).To(Succeed())
		}
		mfs, err := reg.Gather()
		Expect(err).NotTo(HaveOccurred())
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				name := mf.GetName()
				for _, l := range m.GetLabel() {
					name += "{" + l.GetName() + "=" + l.GetValue() + "}"
				}
				got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		Expect(got).To(HaveKeyWithValue("overload_requests_admitted_total", 2.0))
		Expect(got).To(HaveKeyWithValue("overload_requests_shed_total{reason=in_flight}", 1.0))
		Expect(got).To(HaveKeyWithValue("overload_requests_shed_total{reason=rate}", 1.0))
		Expect(got).To(HaveKeyWithValue("overload_requests_shed_total{reason=lag}", 0.0))
		Expect(got).To(HaveKeyWithValue("overload_requests_shed_total{reason=chain}", 0.0))
		Expect(got).To(HaveKeyWithValue("overload_chain_limit", 0.0))
		Expect(got).To(HaveKeyWithValue("overload_in_flight", 2.0))
		Expect(got).To(HaveKey("overload_lag_seconds"))
	})

	It("sees a saturated scheduler through its own probe", func() {
		prev := runtime.GOMAXPROCS(1)
		DeferCleanup(func() { runtime.GOMAXPROCS(prev) })
		c := overload.New(overload.Config{Target: 20 * time.Millisecond}, 1)
		DeferCleanup(c.Close)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 32 { // CPU-bound goroutines: the probe waits its turn behind them
			wg.Add(1)
			go func() {
				defer wg.Done()
				x := 0
				for !stop.Load() {
					x++
				}
				_ = x
			}()
		}
		Eventually(c.ShedShare, 20*time.Second, 50*time.Millisecond).Should(BeNumerically(">", 0))
		Expect(c.Stats().Lag).To(BeNumerically(">", 20*time.Millisecond))
		stop.Store(true)
		wg.Wait()
		Eventually(c.ShedShare, 20*time.Second, 50*time.Millisecond).Should(BeZero())
	})
})

// MatchAllFieldsOf matches Stats with the given admitted and shed counts.
func MatchAllFieldsOf(admitted, shed uint64) OmegaMatcher {
	return And(
		WithTransform(func(s overload.Stats) uint64 { return s.Admitted }, Equal(admitted)),
		WithTransform(func(s overload.Stats) uint64 { return s.Shed }, Equal(shed)),
	)
}
