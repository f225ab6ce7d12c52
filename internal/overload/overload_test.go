package overload_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/overload"
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
