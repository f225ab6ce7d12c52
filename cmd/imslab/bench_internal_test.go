package main

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("bench arithmetic", Label("unit"), func() {
	It("pairs each lab step with the nearest Kamailio step at the same rate and takes medians", func() {
		rep := benchReport{Steps: []benchResult{
			{Proxy: benchKamailio, Rate: 100, Calls: 10, CPUMsCall: 1},
			{Proxy: benchLab, Rate: 100, Calls: 10, CPUMsCall: 2},
			{Proxy: benchLabBare, Rate: 100, Calls: 10, CPUMsCall: 1.5},
			{Proxy: benchKamailio, Rate: 100, Calls: 10, CPUMsCall: 0.5},
			{Proxy: benchLab, Rate: 100, Calls: 10, CPUMsCall: 2},
			// a new rate: its lab step must not be paired with the Kamailio step of the rate before
			{Proxy: benchLab, Rate: 300, Calls: 10, CPUMsCall: 3},
			{Proxy: benchKamailio, Rate: 300, Calls: 10, CPUMsCall: 1},
			{Proxy: benchLab, Rate: 300, Calls: 0, CPUMsCall: 0}, // no calls: no ratio
		}}
		benchRatios(&rep)
		Expect(rep.Steps[1].Ratio).To(Equal(2.0))
		Expect(rep.Steps[2].Ratio).To(Equal(3.0)) // lab-bare: the Kamailio step right after it is nearer
		Expect(rep.Steps[4].Ratio).To(Equal(4.0))
		Expect(rep.Steps[5].Ratio).To(Equal(3.0))
		Expect(rep.Steps[7].Ratio).To(BeZero())
		Expect(rep.MedianRatio).To(Equal(3.0)) // median of 2, 4, 3
		Expect(rep.ByRate).To(HaveLen(2))
		Expect(rep.ByRate[0].Rate).To(Equal(100.0))
		Expect(rep.ByRate[0].Pairs).To(Equal(2))
		Expect(rep.ByRate[0].MedianRatio).To(Equal(3.0))
		Expect(rep.ByRate[0].MedianCPUMsCall).To(HaveKeyWithValue(benchKamailio, 0.75))
		Expect(rep.ByRate[1].MedianRatios).To(HaveKeyWithValue(benchLab, 3.0))
	})

	It("reads SIPp's cumulative counters from the last line of its statistics file", func() {
		p := filepath.Join(GinkgoT().TempDir(), "stat.csv")
		Expect(os.WriteFile(p, []byte("StartTime;SuccessfulCall(P);SuccessfulCall(C);FailedCall(C);Warnings(C);\n"+
			"t0;1;1;0;0;\nt1;5;1998;2;3;\n"), 0o644)).To(Succeed())
		ok, failed, warn, err := sippCounts(p)
		Expect(err).NotTo(HaveOccurred())
		Expect([]int{ok, failed, warn}).To(Equal([]int{1998, 2, 3}))

		Expect(os.WriteFile(p, []byte("StartTime;SuccessfulCall(C)\nt0;1\n"), 0o644)).To(Succeed())
		_, _, _, err = sippCounts(p)
		Expect(err).To(MatchError(ContainSubstring("no column FailedCall(C)")))
	})

	It("takes percentiles by rank", func() {
		v := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
		Expect(percentile(v, 0.5)).To(Equal(5.0))
		Expect(percentile(v, 0.95)).To(Equal(10.0))
		Expect(percentile(nil, 0.5)).To(BeZero())
		Expect(median([]float64{4, 1, 3, 2})).To(Equal(2.5))
	})
})
