package report_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("the run's health record", Label("unit"), func() {
	// quiet writes a run whose nodes and machine were quiet for 10 s, with the given extra events.
	build := func(extra func(r *runDir)) *report.Summary {
		GinkgoHelper()
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "h", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 10, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		for t := 1.0; t <= 10; t++ {
			r.event("lab", "machine", t, map[string]any{"load1": 0.5 + t/10, "procs_running": 1, "cpus": 2,
				"steal_ratio": 0.0, "other_labs": 0})
		}
		for _, n := range []string{"bac", "pcscf1", "scscf1"} {
			r.event(n, "lag_stats", 5, map[string]any{"max_ms": 3.5, "interval_s": 5})
			r.event(n, "lag_stats", 10, map[string]any{"max_ms": 12, "interval_s": 5})
		}
		if extra != nil {
			extra(r)
		}
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		md, err := os.ReadFile(filepath.Join(dir, "report.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("| run health | " + strings.ReplaceAll(s.Health.Describe(), "|", "\\|")))
		return s
	}

	It("says a quiet run is valid, with each node's worst stall and the machine's load", func() {
		s := build(nil)
		h := s.Health
		Expect(h.Valid).To(BeTrue(), "%v", h.Reasons)
		Expect(h.NodeStallMs).To(Equal(map[string]float64{"bac": 12, "pcscf1": 12, "scscf1": 12}))
		Expect(h.Samples).To(Equal(10))
		Expect(h.CPUs).To(Equal(2))
		Expect(h.Load1Max).To(Equal(1.5))
		Expect(h.Load1Median).To(BeNumerically("~", 1.05, 1e-9))
		v, ok := s.Lookup("health.valid")
		Expect(ok).To(BeTrue())
		Expect(v).To(Equal(1.0))
	})

	It("says a run is invalid when a node stalled more than 100 ms, naming it", func() {
		s := build(func(r *runDir) {
			r.event("pcscf1", "lag_stats", 8, map[string]any{"max_ms": 270, "interval_s": 5})
		})
		Expect(s.Health.Valid).To(BeFalse())
		Expect(s.Health.MaxStallNode).To(Equal("pcscf1"))
		Expect(s.Health.Reasons).To(ConsistOf(ContainSubstring("pcscf1 stalled 270 ms")))
		v, _ := s.Lookup("health.valid")
		Expect(v).To(BeZero())
	})

	It("does not hold a stall against a node a fault starved on purpose", func() {
		s := build(func(r *runDir) {
			r.event("lab", "fault", 4, map[string]any{"fault": "pause", "target": "pcscf1"})
			r.event("pcscf1", "lag_stats", 8, map[string]any{"max_ms": 4000, "interval_s": 5})
		})
		Expect(s.Health.Valid).To(BeTrue(), "%v", s.Health.Reasons)
		Expect(s.Health.Excused).To(Equal([]string{"pcscf1"}))
		Expect(s.Health.NodeStallMs).NotTo(HaveKey("pcscf1"))
	})

	It("says a run is invalid when another lab ran beside it", func() {
		s := build(func(r *runDir) {
			for t := 1.1; t <= 10; t += 0.5 { // most of the samples
				r.event("lab", "machine", t, map[string]any{"load1": 1.5, "procs_running": 1, "cpus": 2, "other_labs": 10})
			}
		})
		Expect(s.Health.Valid).To(BeFalse())
		Expect(s.Health.Reasons).To(ConsistOf(ContainSubstring("another lab ran beside this one")))
	})

	It("records more runnable threads than CPUs at the sampled instants without holding it against the run", func() {
		s := build(func(r *runDir) {
			for t := 1.1; t <= 10; t += 0.5 {
				r.event("lab", "machine", t, map[string]any{"load1": 1.8, "procs_running": 4, "cpus": 2, "other_labs": 0})
			}
		})
		Expect(s.Health.Valid).To(BeTrue(), "%v", s.Health.Reasons)
		Expect(s.Health.Overcommitted).To(BeTrue())
		Expect(s.Health.Describe()).To(ContainSubstring("runnable median 4, more than the CPUs"))
	})

	It("says a run is invalid when the machine's load over the run exceeded its CPUs, though no node stalled", func() {
		s := build(func(r *runDir) {
			for t := 1.1; t <= 10; t += 0.5 {
				r.event("lab", "machine", t, map[string]any{"load1": 2.08, "procs_running": 2, "cpus": 2, "other_labs": 0})
			}
		})
		Expect(s.Health.MaxStallMs).To(BeNumerically("<=", report.MaxStallMs))
		Expect(s.Health.Load1Median).To(Equal(2.08))
		Expect(s.Health.Valid).To(BeFalse())
		Expect(s.Health.Reasons).To(ConsistOf(ContainSubstring("load average median 2.08 on 2 CPUs")))
		v, _ := s.Lookup("health.valid")
		Expect(v).To(BeZero())
	})

	It("does not call a run without samples valid", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "old", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 10, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Health.Valid).To(BeFalse())
		Expect(s.Health.Reasons).To(ContainElement(ContainSubstring("no machine samples")))
	})
})
