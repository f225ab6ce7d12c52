package study_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
	"github.com/imslab/quasipool/internal/analysis/study"
)

var _ = Describe("a taken-over share's interval", Label("unit"), func() {
	// Five runs in which none of the 10 affected users tested was served before re-registering: the users are the
	// trials (over the design effect between runs), as for the restoration shares, not the 5 runs.
	runs := func(tested int) []*report.Summary {
		var sums []*report.Summary
		for range 5 {
			s := &report.Summary{}
			s.MO.UsersTested, s.MT.UsersTested = tested, tested
			sums = append(sums, s)
		}
		return sums
	}
	zeros := []float64{0, 0, 0, 0, 0}

	It("counts the users tested as its trials: 0 of 50 gives an interval a ≤ 0.25 claim can be read against", func() {
		for _, kpi := range []string{"mo_taken_over", "mt_taken_over"} {
			s, err := study.Summarise(kpi, "share", zeros, runs(10), 1)
			Expect(err).NotTo(HaveOccurred())
			Expect(s.Method).To(Equal(stats.MethodSharesUsers), kpi)
			Expect(s.MeanCI).NotTo(BeNil())
			Expect(s.MeanCI.Low).To(BeZero())
			Expect(s.MeanCI.High).To(BeNumerically(">", 0), "no zero-width interval")
			Expect(s.MeanCI.High).To(BeNumerically("<", 0.25), kpi)
		}
	})

	It("falls back to the runs as trials when a run has no users tested", func() {
		sums := runs(10)
		sums[2].MO.UsersTested = 0
		s, err := study.Summarise("mo_taken_over", "share", zeros, sums, 1)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Method).To(Equal(stats.MethodSharesRuns))
		Expect(s.MeanCI.High).To(BeNumerically("~", 0.522, 1e-3))
	})
})
