package stats_test

import (
	"math"
	"math/rand/v2"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/imslab/quasipool/internal/analysis/stats"
)

var _ = Describe("intervals of a mean at small n", Label("unit"), func() {
	It("gives Student's t, not a bootstrap, for one value per run", func() {
		// redundancy-mutual's five peak ratios: a percentile bootstrap at n = 5 reads them as [above 1.8].
		s, err := stats.PerRun([]float64{1.7, 2.4, 2.3, 1.9, 2.1}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Method).To(Equal(stats.MethodT))
		// mean 2.08, sd 0.2864, t(4) = 2.7764: ± 0.3556.
		Expect(s.MeanCI.Low).To(BeNumerically("~", 2.08-0.3556, 1e-3))
		Expect(s.MeanCI.High).To(BeNumerically("~", 2.08+0.3556, 1e-3))
	})

	It("covers the truth at 5 runs at least 92 % of the time", func() {
		rng := rand.New(rand.NewPCG(3, 4))
		covered := 0
		const studies = 300
		for range studies {
			v := make([]float64, 5)
			for i := range v {
				v[i] = 2 + 0.4*rng.NormFloat64()
			}
			s, err := stats.PerRun(v, 1)
			Expect(err).NotTo(HaveOccurred())
			if s.MeanCI.Contains(2) {
				covered++
			}
		}
		AddReportEntry("t coverage at n = 5", covered)
		Expect(float64(covered) / studies).To(BeNumerically(">=", 0.92))
	})
})

// clusteredStudy draws one study of runs runs: run r's share p_r is Beta-distributed around p (concentration
// kappa: the run effect), and each of its users (lo to hi) is restored with probability p_r.
func clusteredStudy(rng *rand.Rand, runs int, p, kappa float64, lo, hi int) (values, users []float64) {
	b := distuv.Beta{Alpha: p * kappa, Beta: (1 - p) * kappa, Src: rng}
	for range runs {
		pr := b.Rand()
		m := lo + rng.IntN(hi-lo+1)
		k := 0
		for range m {
			if rng.Float64() < pr {
				k++
			}
		}
		values = append(values, float64(k)/float64(m))
		users = append(users, float64(m))
	}
	return values, users
}

var _ = Describe("intervals of a share", Label("unit"), func() {
	It("never has zero width with two or more runs, even when every user was restored", func() {
		ones := make([]float64, 20)
		users := make([]float64, 20)
		for i := range ones {
			ones[i], users[i] = 1, 65
		}
		s, err := stats.Share(ones, users, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Method).To(Equal(stats.MethodSharesUsers))
		Expect(s.MeanCI.High).To(Equal(1.0))
		// 1,300 users × (1.96/t(19))² = 1,140 effective trials: 0.025^(1/1140).
		Expect(s.MeanCI.Low).To(BeNumerically("~", 0.99677, 1e-4))
		Expect(*s.NEff).To(BeNumerically("~", 1140, 1))

		s, err = stats.Share([]float64{1, 1, 1, 1, 1}, nil, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Method).To(Equal(stats.MethodSharesRuns))
		Expect(s.MeanCI.Low).To(BeNumerically("~", 0.4782, 1e-3), "5 of 5 runs: 0.025^(1/5)")
		Expect(s.MeanCI.High).To(Equal(1.0))

		s, err = stats.Share([]float64{0, 0, 0}, []float64{10, 10, 10}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.MeanCI.Low).To(Equal(0.0))
		Expect(s.MeanCI.High).To(BeNumerically(">", 0))
	})

	It("takes the users as the trials, divided by the spread between runs", func() {
		// Runs between 0.47 and 0.52 of 60 users each: a tight share, not [0.185, 0.81] as 5 runs would say.
		v := []float64{0.47, 0.5, 0.52, 0.49, 0.5}
		u := []float64{60, 60, 60, 60, 60}
		s, err := stats.Share(v, u, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(*s.DesignEffect).To(Equal(1.0), "less spread than binomial: floored at 1")
		Expect(s.MeanCI.Low).To(BeNumerically(">", 0.4))
		Expect(s.MeanCI.High).To(BeNumerically("<", 0.6))
		byRuns, _ := stats.Share(v, nil, 1)
		Expect(byRuns.MeanCI.HalfWidth()).To(BeNumerically(">", 2*s.MeanCI.HalfWidth()))

		// Runs far apart: the design effect grows and the interval with it.
		w := []float64{0.1, 0.9, 0.2, 0.8, 0.5}
		s2, err := stats.Share(w, u, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(*s2.DesignEffect).To(BeNumerically(">", 10))
		Expect(s2.MeanCI.HalfWidth()).To(BeNumerically(">", 2*s.MeanCI.HalfWidth()))
	})

	It("falls back to the runs as trials when a run's users are unknown, and has no interval of one run", func() {
		s, err := stats.Share([]float64{0.5, 0.6}, []float64{10, 0}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Method).To(Equal(stats.MethodSharesRuns))
		s, err = stats.Share([]float64{0.5, math.NaN()}, []float64{10, 10}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.MeanCI).To(BeNil())
		Expect(s.Method).To(BeEmpty())
		_, err = stats.Share([]float64{0.5, 1.2}, nil, 1)
		Expect(err).To(MatchError(stats.ErrNotShare))
	})

	DescribeTable("covers the mean share of clustered users (300 studies of 5 runs, or 20)",
		func(p, kappa float64, lo, hi int, runs ...int) {
			n := 5
			if len(runs) > 0 {
				n = runs[0]
			}
			rng := rand.New(rand.NewPCG(uint64(p*1000), uint64(kappa)))
			const studies = 300
			byUsers, byRuns, naive := 0, 0, 0
			for range studies {
				v, u := clusteredStudy(rng, n, p, kappa, lo, hi)
				s, err := stats.Share(v, u, 1)
				Expect(err).NotTo(HaveOccurred())
				if s.MeanCI.Contains(p) {
					byUsers++
				}
				r, err := stats.Share(v, nil, 1)
				Expect(err).NotTo(HaveOccurred())
				if r.MeanCI.Contains(p) {
					byRuns++
				}
				var n float64
				for _, x := range u {
					n += x
				}
				if iv := stats.ClopperPearson(s.Mean*n, n); iv.Contains(p) { // every user independent
					naive++
				}
			}
			AddReportEntry("coverage", map[string]any{"p": p, "kappa": kappa, "runs": n, "users per run": []int{lo, hi}, "users": byUsers, "runs as trials": byRuns,
				"naive": naive, "of": studies})
			Expect(float64(byUsers) / studies).To(BeNumerically(">=", 0.92))
			Expect(float64(byRuns) / studies).To(BeNumerically(">=", 0.95))
		},
		Entry("a half, strong run effect", 0.5, 20.0, 20, 60),
		Entry("a half, weak run effect", 0.5, 200.0, 20, 60),
		Entry("most restored", 0.85, 30.0, 20, 60),
		Entry("nearly all restored", 0.95, 100.0, 20, 60),
		Entry("a sample of 6 probed users per run (scenarios/pcscf-kill.yaml)", 0.8, 20.0, 6, 6),
		Entry("a few users per run, a small share", 0.15, 30.0, 4, 10),
		Entry("20 runs, strong run effect (the published study's n)", 0.7, 20.0, 20, 60, 20),
		Entry("20 runs, nearly all restored", 0.97, 100.0, 40, 80, 20),
	)

	It("pays for the run effect: treating every user as independent covers too rarely", func() {
		rng := rand.New(rand.NewPCG(9, 9))
		naive := 0
		for range 300 {
			v, u := clusteredStudy(rng, 5, 0.5, 10, 20, 60)
			var n float64
			for _, x := range u {
				n += x
			}
			mean := (v[0] + v[1] + v[2] + v[3] + v[4]) / 5
			if stats.ClopperPearson(mean*n, n).Contains(0.5) {
				naive++
			}
		}
		Expect(float64(naive)/300).To(BeNumerically("<", 0.8), "the run effect is real in this data")
	})
})

var _ = Describe("paired differences of two schemes", Label("unit"), func() {
	It("compares seed by seed with a paired t", func() {
		a := []float64{10.1, 12.3, 9.8, 11.0, math.NaN()}
		b := []float64{9.9, 12.0, 9.7, 10.6, 8}
		s, err := stats.Paired(a, b, false, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Method).To(Equal(stats.MethodPairedT))
		Expect(s.Runs).To(Equal(4), "a seed without both is no pair")
		Expect(s.Mean).To(BeNumerically("~", 0.25, 1e-9))
		// Differences 0.2, 0.3, 0.1, 0.4: sd 0.1291, t(3) 3.1824: ± 0.2054; the schemes' own spread is far larger.
		Expect(s.MeanCI.Low).To(BeNumerically("~", 0.0446, 1e-3))
		Expect(s.MeanCI.High).To(BeNumerically("~", 0.4554, 1e-3))
	})

	It("gives shares Clopper–Pearson on (d+1)/2, never a zero-width [1, 1]", func() {
		s, err := stats.Paired([]float64{1, 1}, []float64{0, 0}, true, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Method).To(Equal(stats.MethodPairedShares))
		Expect(s.Mean).To(Equal(1.0))
		Expect(s.MeanCI.Low).To(BeNumerically("~", -0.684, 1e-3))
		Expect(s.MeanCI.High).To(Equal(1.0))
		_, err = stats.Paired([]float64{1}, []float64{0, 1}, true, 1)
		Expect(err).To(HaveOccurred())
	})
})
