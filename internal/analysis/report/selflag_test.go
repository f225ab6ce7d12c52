package report_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("nodes that ran late (self_lag)", Label("unit"), func() {
	It("sums each node's self_lag events and warns that the run's timings then include the wait for the CPU", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "busy", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.event("bac", "self_lag", 10, map[string]any{"lag_ms": 300})
		r.event("bac", "self_lag", 12, map[string]any{"lag_ms": 2500})
		r.event("pcscf2", "self_lag", 11, map[string]any{"lag_ms": 260})
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.SelfLag).To(HaveLen(2))
		Expect(*s.SelfLag["bac"]).To(Equal(report.SelfLag{Events: 2, MaxLagMs: 2500, FirstS: 10, LastS: 12}))
		Expect(s.SelfLag["pcscf2"].Events).To(Equal(1))
		Expect(s.Warnings).To(ContainElement(And(ContainSubstring("nodes ran late"),
			ContainSubstring("bac up to 2500 ms (2 s with late timers, 10.0–12.0 s)"))))
	})

	It("has nothing to say about a run whose nodes never ran late", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "calm", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.SelfLag).To(BeNil())
		Expect(s.Warnings).NotTo(ContainElement(ContainSubstring("ran late")))
	})
})
