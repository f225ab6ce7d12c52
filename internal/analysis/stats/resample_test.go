package stats_test

import (
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/stats"
)

var _ = Describe("resampling runs", Label("unit"), func() {
	It("draws the runs as the summaries' bootstrap does: the same interval of the median", func() {
		vals := []float64{3, 9, 4, 1, 7, 2}
		want, err := stats.PerRun(vals, 42)
		Expect(err).NotTo(HaveOccurred())
		var medians []float64
		stats.Resample(len(vals), 42, stats.Resamples, func(idx []int) {
			Expect(idx).To(HaveLen(len(vals)))
			var pool []float64
			for _, i := range idx {
				Expect(i).To(BeNumerically(">=", 0))
				Expect(i).To(BeNumerically("<", len(vals)))
				pool = append(pool, vals[i])
			}
			slices.Sort(pool)
			medians = append(medians, stats.Median(pool))
		})
		Expect(medians).To(HaveLen(stats.Resamples))
		Expect(stats.PercentileBand(medians)).To(Equal(*want.MedianCI))
	})

	It("is reproducible from its seed and calls nothing without runs", func() {
		draw := func(seed uint64) (out []int) {
			stats.Resample(5, seed, 3, func(idx []int) { out = append(out, idx...) })
			return out
		}
		Expect(draw(7)).To(Equal(draw(7)))
		Expect(draw(7)).NotTo(Equal(draw(8)))
		called := false
		stats.Resample(0, 1, 10, func([]int) { called = true })
		Expect(called).To(BeFalse())
		Expect(stats.PercentileBand(nil)).To(Equal(stats.Interval{}))
	})
})
