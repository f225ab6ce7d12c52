package ue_test

import (
	"math"
	"math/rand/v2"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/ue"
)

var _ = Describe("Traffic model", Label("unit"), func() {
	rng := func(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

	It("draws exponential inter-arrival times with mean 3600 s / BHCA", func() {
		m := ue.Model{BHCA: 3, Holding: ue.HoldingExponential, HoldingMean: 90 * time.Second}
		r := rng(1)
		const n = 20000
		var sum, sumSq float64
		for range n {
			g := m.NextGap(r).Seconds()
			Expect(g).To(BeNumerically(">=", 0))
			sum += g
			sumSq += g * g
		}
		mean := sum / n
		sd := math.Sqrt(sumSq/n - mean*mean)
		// The mean of 20000 exponential draws is within 3 standard errors (1200 s / √20000 ≈ 8.5 s) of 1200 s,
		// and an exponential's standard deviation equals its mean.
		Expect(mean).To(BeNumerically("~", 1200, 3*1200/math.Sqrt(n)))
		Expect(sd).To(BeNumerically("~", 1200, 0.05*1200))
	})

	It("draws exponential holding times with the configured mean, or exactly the fixed value", func() {
		m := ue.Model{BHCA: 1, Holding: ue.HoldingExponential, HoldingMean: 90 * time.Second}
		r := rng(2)
		const n = 20000
		var sum float64
		for range n {
			sum += m.HoldTime(r).Seconds()
		}
		Expect(sum / n).To(BeNumerically("~", 90, 3*90/math.Sqrt(n)))
		m.Holding = ue.HoldingFixed
		for range 100 {
			Expect(m.HoldTime(r)).To(Equal(90 * time.Second))
		}
	})

	It("gives exact shares of idle and MT-only users for a population, the positions depending on the seed", func() {
		count := func(roles []ue.Role) map[ue.Role]int {
			c := map[ue.Role]int{}
			for _, x := range roles {
				c[x]++
			}
			return c
		}
		a := ue.AssignRoles(200, 0.2, 0.2, rng(3))
		Expect(count(a)).To(Equal(map[ue.Role]int{ue.RoleIdle: 40, ue.RoleMTOnly: 40, ue.RoleCaller: 120}))
		Expect(ue.AssignRoles(200, 0.2, 0.2, rng(3))).To(Equal(a), "same seed, same roles")
		Expect(ue.AssignRoles(200, 0.2, 0.2, rng(4))).NotTo(Equal(a), "another seed, other positions")
		Expect(count(ue.AssignRoles(7, 0.5, 0.5, rng(5)))).To(Equal(map[ue.Role]int{ue.RoleIdle: 4, ue.RoleMTOnly: 3}))
		Expect(count(ue.AssignRoles(10, 0, 0, rng(5)))).To(Equal(map[ue.Role]int{ue.RoleCaller: 10}))
	})

	It("refreshes as TS 24.229 §5.1.1.4.1: at half the period up to 1200 s, else 600 s before expiry", func() {
		Expect(ue.RefreshAfter(120 * time.Second)).To(Equal(60 * time.Second))
		Expect(ue.RefreshAfter(600 * time.Second)).To(Equal(300 * time.Second))
		Expect(ue.RefreshAfter(1200 * time.Second)).To(Equal(600 * time.Second))
		Expect(ue.RefreshAfter(3600 * time.Second)).To(Equal(3000 * time.Second))
	})

	DescribeTable("Validate names the bad field",
		func(m ue.Model, field string) {
			Expect(m.Validate("model")).To(MatchError(ContainSubstring("model." + field)))
		},
		Entry("no BHCA", ue.Model{Holding: "fixed"}, "bhca"),
		Entry("unknown distribution", ue.Model{BHCA: 1, Holding: "normal"}, "holding"),
		Entry("share above 1", ue.Model{BHCA: 1, Holding: "fixed", IdleShare: 1.5}, "idle_share"),
		Entry("shares above 1 together", ue.Model{BHCA: 1, Holding: "fixed", IdleShare: 0.6, MTOnlyShare: 0.6}, "mt_only_share"),
	)

	It("assigns the model's roles to the phones from the seed", func() {
		cfg := ue.DefaultConfig()
		cfg.Users.Count = 50
		cfg.Seed = 11
		cfg.Model = &ue.Model{BHCA: 3, IdleShare: 0.2, MTOnlyShare: 0.1}
		u, err := ue.New(cfg)
		Expect(err).NotTo(HaveOccurred())
		c := map[ue.Role]int{}
		for _, p := range u.Phones() {
			c[p.Role()]++
		}
		Expect(c).To(Equal(map[ue.Role]int{ue.RoleIdle: 10, ue.RoleMTOnly: 5, ue.RoleCaller: 35}))
		Expect(u.Probers()).To(BeEmpty())
		cfg.Reachability = ue.Reachability{Interval: 250 * time.Millisecond}
		u, err = ue.New(cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(u.Probers()).To(HaveLen(4))
		Expect(u.Probers()[0].User()).To(Equal("user0051"))
	})
})
