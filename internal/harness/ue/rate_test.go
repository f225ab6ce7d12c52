package ue_test

import (
	"math"
	"runtime"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/ue"
)

var _ = Describe("Call generator", func() {
	It("draws Poisson arrivals at the asked rate from the seed", Label("unit"), func() {
		// 10^6 arrivals: the count's relative standard deviation is 0.1 %, so 0.5 % is five of them.
		const rate = 200.0
		d := time.Duration(1e6 / rate * float64(time.Second))
		n := ue.ArrivalsDue(7, rate, d)
		Expect(float64(n)).To(BeNumerically("~", 1e6, 5e3))
		Expect(ue.ArrivalsDue(7, rate, d)).To(Equal(n), "the schedule is a function of the seed")
		Expect(ue.ArrivalsDue(8, rate, d)).NotTo(Equal(n))
	})

	// 100 calls/s: with the race detector a call costs the process about 1.7 ms of CPU, so this needs under a
	// fifth of a core, well within what the test gets on a shared machine (a process starved of CPU falls behind
	// any schedule, which is not what this spec is about).
	It("places the calls its schedule owes at 100/s for 10 s, and reports the rate placed and its CPU share", Label("integration"), func(ctx SpecContext) {
		fake := startFakeBAC(600)
		const rate, seed = 100.0, 42
		cfg := ue.DefaultConfig()
		cfg.Proxy = fake.addr
		cfg.Users.Count = 300
		cfg.RegisterRate = 3000
		cfg.CallRate = rate
		// The callees are a range the fake does not serve: it answers each INVITE 404 at once, so a call ends in
		// one round trip and its caller is free again, and what is measured is the generator, not the fake's
		// capacity to relay calls under the race detector on a shared core.
		cfg.CalleeFrom, cfg.CalleeCount = 9001, 100
		cfg.CallTimeout = 2 * time.Second
		cfg.Seed = seed
		u := startUE(cfg)
		Expect(u.Summary().InitialOK).To(BeEquivalentTo(300))
		time.Sleep(10 * time.Second) // the run's length is what is measured: nothing to wait for instead
		u.stop()
		res := map[string]int{}
		for _, r := range readRecords(u.records) {
			res[r.Direction+" "+r.Result]++
		}
		GinkgoWriter.Printf("results: %v\n", res)

		s := u.Summary()
		GinkgoWriter.Printf("summary: %+v\n", s)
		Expect(s.CallRateAsked).To(Equal(rate))
		Expect(s.GeneratorSeconds).To(BeNumerically("~", 10, 1))
		// What the seed's schedule has due over the generator's run: every arrival came due and was handled,
		// not the 10-15 % fewer of a clock that does not catch up.
		due := ue.ArrivalsDue(seed, rate, time.Duration(s.GeneratorSeconds*float64(time.Second)))
		Expect(float64(s.CallsOffered)).To(BeNumerically("~", float64(due), 0.02*float64(due)))
		Expect(float64(s.CallsPlaced)).To(BeNumerically(">=", 0.98*float64(due)), "%d arrivals skipped", s.CallsOffered-s.CallsPlaced)
		Expect(s.CallsOK+s.CallsFailed).To(Equal(s.CallsPlaced), "every placed call was counted")
		Expect(res["mo not_found"] + res["mo 404"]).To(BeNumerically(">", 0))
		// The schedule itself has the asked rate, up to the Poisson count's own spread (4 standard deviations:
		// sqrt(1000) ≈ 32 calls, 3.2 %, for 10 s at 100/s; the arrivals' rate is checked closely above).
		mean := rate * s.GeneratorSeconds
		Expect(float64(due)).To(BeNumerically("~", mean, 4*math.Sqrt(mean)))
		Expect(s.CallRatePlaced).To(BeNumerically("~", float64(s.CallsPlaced)/s.GeneratorSeconds, 1e-9))
		Expect(s.CPUSeconds).To(BeNumerically(">", 0))
		Expect(s.CPUShare).To(BeNumerically(">", 0))
		Expect(s.CPUShare).To(BeNumerically("<=", float64(runtime.NumCPU())*1.05))
		Expect(s.WallSeconds).To(BeNumerically(">=", s.GeneratorSeconds))
	}, SpecTimeout(60*time.Second))
})
