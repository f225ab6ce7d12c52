package report_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("the storm after a fault and the shed load", Label("unit"), func() {
	It("profiles registrations and Cx per second, counts failures and times every affected user's return", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "storm", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 10,
			"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 4, "for_s": 0}]}`)
		r.register(1, -3, "initial", "pcscf1", "scscf1", "ok") // before t0: neither baseline nor storm
		r.register(2, -3, "initial", "pcscf1", "scscf1", "ok")
		r.register(3, -3, "initial", "pcscf2", "scscf1", "ok")
		r.register(3, 1.5, "refresh", "pcscf2", "scscf1", "ok") // baseline: 1 in 4 s
		r.event("lab", "fault", 4, map[string]any{"fault": "kill", "target": "pcscf1"})
		r.call("c1", 1, 3, 4.2, "504", 0, false)                                        // the restoration 504 …
		r.register(1, 4.3, "restoration", "pcscf2", "scscf1", "ok")                     // … and the re-registration
		r.register(2, 4.5, "restoration", "pcscf2", "scscf1", "500")                    // failed …
		r.register(2, 4.9, "restoration", "pcscf3", "scscf1", "ok")                     // … and again
		r.register(1, 9.9, "deregister", "pcscf2", "scscf1", "ok")                      // the end of the run: not counted
		r.register(2, 10.2, "refresh", "pcscf3", "scscf1", "ok")                        // after the run's end: not counted
		r.event("hss", "cx_answer", 10.3, map[string]any{"cmd": "SAR", "result": 2001}) // the phones stopping
		for i, t := range []float64{1, 4.3, 4.4, 4.9, 5.5} {
			r.event("hss", "cx_answer", t, map[string]any{"cmd": []string{"SAR", "MAR", "SAR", "MAR", "UAR"}[i], "result": 2001})
		}
		r.event("bac", "overload", 5, map[string]any{"shed": 7, "admitted": 20, "shed_total": 7, "shed_share": 0, "lag_ms": 3.5})
		r.event("bac", "overload", 6, map[string]any{"shed": 2, "admitted": 20, "shed_total": 9, "shed_share": 0.1, "lag_ms": 160.0})
		r.event("bac", "overload", 7, map[string]any{"shed": 0, "admitted": 0, "shed_total": 9, "shed_share": 0, "lag_ms": 1.0})
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())

		st := s.Storm
		Expect(st).NotTo(BeNil())
		Expect(st.FromS).To(Equal(4.0))
		Expect(st.Register.BaselinePerS).To(Equal(0.25))
		Expect(st.Register.PerS).To(Equal([]int{3, 0, 0, 0, 0, 0}), "from the fault to the end, one bin a second")
		Expect(st.Register.PeakPerS).To(Equal(3))
		Expect(st.Register.PeakAtS).To(Equal(4.0))
		Expect(st.Register.Total).To(Equal(3))
		Expect(st.Cx["MAR"].PerS).To(Equal([]int{2, 0, 0, 0, 0, 0}))
		Expect(st.Cx["SAR"].BaselinePerS).To(Equal(0.25))
		Expect(st.Cx["total"].PeakPerS).To(Equal(3))
		Expect(st.Cx["total"].Total).To(Equal(4))
		Expect(st.RegistrationsFailed).To(Equal(1))
		Expect(st.CallsFailed).To(Equal(1))
		Expect(st.AffectedUsers).To(Equal(2))
		Expect(st.UsersBack).To(Equal(2))
		Expect(st.AllBackS).NotTo(BeNil())
		Expect(*st.AllBackS).To(BeNumerically("~", 0.9, 1e-6), "user0002 back at 4.9 s")
		Expect(lookup(s, "storm.register.peak_per_s")).To(Equal(3.0))

		Expect(s.Overload).To(HaveKey("bac"))
		Expect(*s.Overload["bac"]).To(Equal(report.NodeOverload{Shed: 9, Admitted: 40, PeakShedPerS: 7, FirstS: 5, LastS: 6,
			MaxShedShare: 0.1, MaxLagMs: 160}))
		Expect(lookup(s, "overload.bac.shed")).To(Equal(9.0))

		md, err := os.ReadFile(filepath.Join(dir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## Storm"))
		Expect(string(md)).To(ContainSubstring("| registrations (phones) | 0.25 | 3 | 4 | 3 |"))
		Expect(string(md)).To(ContainSubstring("every affected user back after 0.9 s"))
		Expect(string(md)).To(ContainSubstring("## Shed load"))
		Expect(string(md)).To(ContainSubstring("| bac | 9 | 40 | 7 | 5.0 | 6.0 | 0.10 | 160.0 |"))
		page, err := os.ReadFile(filepath.Join(dir, report.FileHTML))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(page)).To(ContainSubstring(`<h2 id="storm">Storm</h2>`))
		Expect(string(page)).To(ContainSubstring("<tr><td>registrations (phones)</td><td>0.25</td><td>3</td><td>4</td><td>3</td></tr>"))
		Expect(string(page)).To(ContainSubstring("<tr><td>bac</td><td>9</td><td>40</td>"))
	})

	It("has no storm without a fault, and no shed-load table when no node shed", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "calm", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 5, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.call("c1", 1, 1, 1, "ok", 100, true)
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Storm).To(BeNil())
		Expect(s.Overload).To(BeNil())
		md, err := os.ReadFile(filepath.Join(dir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).NotTo(ContainSubstring("## Storm"))
	})
})
