package report_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("datagrams the host dropped (udp_drops)", Label("unit"), func() {
	It("sums each node's drops and warns that the timings around them include the loss", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "burst", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.event("bac", "udp_drops", 21, map[string]any{"drops": 300, "drops_total": 300})
		r.event("bac", "udp_drops", 22, map[string]any{"drops": 12, "drops_total": 312})
		r.event("ue", "udp_drops", 21, map[string]any{"drops": 5, "drops_total": 5})
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.UDPDrops).To(HaveLen(2))
		Expect(*s.UDPDrops["bac"]).To(Equal(report.UDPDrops{Drops: 312, FirstS: 21, LastS: 22}))
		Expect(s.UDPDrops["ue"].Drops).To(Equal(5))
		Expect(s.Warnings).To(ContainElement(And(ContainSubstring("the host dropped datagrams"),
			ContainSubstring("bac 312 (21.0–22.0 s); ue 5 (21.0–21.0 s)"))))
	})

	It("has nothing to say about a run without drops", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "calm", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.UDPDrops).To(BeNil())
		Expect(s.Warnings).NotTo(ContainElement(ContainSubstring("dropped datagrams")))
	})
})
