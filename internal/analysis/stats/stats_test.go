package stats_test

import (
	"math"
	"math/rand/v2"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/onsi/gomega/gstruct"

	"github.com/imslab/quasipool/internal/analysis/stats"
)

var _ = Describe("summaries over runs", Label("unit"), func() {
	It("gives the exact median, mean, min and max, and no p95 below 20 values", func() {
		s, err := stats.PerRun([]float64{4, 1, 3, 2}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Runs).To(Equal(4))
		Expect(s.Values).To(Equal(4))
		Expect(s.Median).To(Equal(2.5))
		Expect(s.Mean).To(Equal(2.5))
		Expect(s.Min).To(Equal(1.0))
		Expect(s.Max).To(Equal(4.0))
		Expect(s.P95).To(BeNil())
		Expect(s.PerRun).To(HaveExactElements(gstruct.PointTo(Equal(4.0)), gstruct.PointTo(Equal(1.0)), gstruct.PointTo(Equal(3.0)), gstruct.PointTo(Equal(2.0))))

		s, err = stats.PerRun([]float64{5, math.NaN(), 1, 9}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Runs).To(Equal(3), "a run without a value does not count")
		Expect(s.Median).To(Equal(5.0))
		Expect(s.Mean).To(Equal(5.0))
		Expect(s.PerRun[1]).To(BeNil())
	})

	It("pools the users of every run for median and mean, and counts runs and users", func() {
		s, err := stats.Clustered([][]float64{{1, 2, 3}, {10}, {}}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Runs).To(Equal(2))
		Expect(s.Values).To(Equal(4))
		Expect(s.Median).To(Equal(2.5))
		Expect(s.Mean).To(Equal(4.0))
		Expect(s.PerRun).To(HaveExactElements(gstruct.PointTo(Equal(2.0)), gstruct.PointTo(Equal(10.0)), BeNil()))
		Expect(s.MeanCI).NotTo(BeNil())
		Expect(s.Method).To(Equal(stats.MethodClusterT))
		// Cluster-robust: the runs' residual sums are −6 and 6 around 4; V = 2/1 · 72 / 16 = 9, t(1) = 12.706.
		Expect(s.MeanCI.Low).To(BeNumerically("~", 4-12.7062*3, 1e-3))
		Expect(s.MeanCI.High).To(BeNumerically("~", 4+12.7062*3, 1e-3))
		// Only two runs: the resampled pools are {1,2,3}×2, {10}×2 or one of each.
		Expect(s.MedianCI.Low).To(Equal(2.0))
		Expect(s.MedianCI.High).To(Equal(10.0))
	})

	It("gives p95 from 20 values on", func() {
		v := make([]float64, 20)
		for i := range v {
			v[i] = float64(i + 1)
		}
		s, err := stats.PerRun(v, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.P95).NotTo(BeNil())
		Expect(*s.P95).To(Equal(19.0), "the empirical 95th percentile of 1..20")
	})

	It("has no interval with one run and fails without values", func() {
		s, err := stats.Clustered([][]float64{{1, 2, 3}}, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.MeanCI).To(BeNil())
		_, err = stats.PerRun([]float64{math.NaN()}, 1)
		Expect(err).To(MatchError(stats.ErrNoValues))
	})

	It("is reproducible: the same seed gives the same interval", func() {
		g := [][]float64{{1, 5}, {2}, {8, 9, 1}, {4}}
		a, _ := stats.Clustered(g, 7)
		b, _ := stats.Clustered(g, 7)
		Expect(*a.MeanCI).To(Equal(*b.MeanCI))
		Expect(*a.MedianCI).To(Equal(*b.MedianCI))
	})

	It("covers the true mean of a clustered distribution about 95 % of the time", func() {
		// 100 synthetic experiments of 20 runs, each run with its own offset (a run effect, sd 1) and 10 users
		// (sd 1 around it): the true mean is 3. An interval that treated users as independent would be far too
		// narrow and cover much less often.
		rng := rand.New(rand.NewPCG(1, 2))
		const experiments, runs, users, truth = 100, 20, 10, 3.0
		covered, naiveCovered := 0, 0
		for e := range experiments {
			groups := make([][]float64, runs)
			var flat [][]float64
			for r := range groups {
				off := truth + rng.NormFloat64()
				for range users {
					v := off + rng.NormFloat64()
					groups[r] = append(groups[r], v)
					flat = append(flat, []float64{v})
				}
			}
			s, err := stats.ClusteredN(groups, uint64(e), 500)
			Expect(err).NotTo(HaveOccurred())
			Expect(s.Runs).To(Equal(runs))
			Expect(s.Values).To(Equal(runs * users))
			if s.MeanCI.Contains(truth) {
				covered++
			}
			naive, _ := stats.ClusteredN(flat, uint64(e), 500) // every user taken for a run
			if naive.MeanCI.Contains(truth) {
				naiveCovered++
			}
		}
		AddReportEntry("coverage", map[string]int{"clustered": covered, "naive": naiveCovered, "of": experiments})
		// The cluster-robust t is nominal at 20 clusters; binomial sd at 0.95 of 100 is 2.2 %.
		Expect(float64(covered) / experiments).To(BeNumerically(">=", 0.9))
		Expect(float64(naiveCovered)/experiments).To(BeNumerically("<", 0.75), "users are not independent")
	})
})
