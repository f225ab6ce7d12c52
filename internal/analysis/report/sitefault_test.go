package report_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("a site fault", Label("unit"), func() {
	It("affects the users of every node of the site, is detected per node, and counts calls during and after it", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "site-loss", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30,
			"faults": [{"kind": "site-down", "target": "site:south", "at_s": 10, "for_s": 10, "nodes": ["pcscf3", "scscf3"]}]}`)
		r.register(1, 1, "initial", "pcscf1", "scscf1", "ok")
		r.register(2, 1, "initial", "pcscf3", "scscf1", "ok")
		r.register(3, 1, "initial", "pcscf1", "scscf3", "ok")
		r.event("lab", "fault", 10.2, map[string]any{"fault": "site-down", "target": "site:south", "nodes": []string{"pcscf3", "scscf3"}})
		r.event("lab", "fault", 10.21, map[string]any{"fault": "kill", "target": "pcscf3"})
		r.event("lab", "fault_heal", 20.3, map[string]any{"fault": "site-down", "target": "site:south"})
		r.event("lab", "links_not_applied", 0.1, map[string]any{"reason": "run with --netns", "links": 1})
		r.event("bac", "peer_state", 11.7, map[string]any{"peer": "pcscf3.ims.test", "state": "down"})
		r.event("icscf", "peer_state", 12.0, map[string]any{"peer": "scscf3.ims.test", "state": "down"})
		r.event("pcscf1", "peer_state", 21.0, map[string]any{"peer": "scscf3.ims.test", "state": "down"}) // in flight at the heal: counts
		r.event("pcscf2", "peer_state", 26.0, map[string]any{"peer": "pcscf3.ims.test", "state": "down"}) // long after it: another story
		r.call("c1", 1, 2, 5, "ok", 100, true)
		r.call("c2", 2, 3, 11, "408", 0, false)
		r.call("c3", 2, 3, 15, "ok", 100, true)
		r.call("c4", 3, 1, 25, "ok", 100, true)
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		f := s.Faults[0]
		Expect(f.T0S).To(Equal(10.2))
		Expect(f.Nodes).To(Equal([]string{"pcscf3", "scscf3"}))
		Expect(*f.HealS).To(Equal(20.3))
		Expect(s.AffectedIMPUs).To(ConsistOf(impu(2), impu(3)))
		Expect(f.TimeToDetectS).To(Equal(map[string]float64{"bac": 1.5, "icscf": 1.8, "pcscf1": 10.8}),
			"down events up to 1 s after the heal count, not later ones")
		Expect(*f.During).To(Equal(report.Window{FromS: 10.2, ToS: 20.2, Calls: 2, Answered: 1, Failed: 1, AnsweredInWindow: 1}))
		Expect(*f.AfterHeal).To(Equal(report.Window{FromS: 20.3, ToS: 30, Calls: 1, Answered: 1, AnsweredInWindow: 1}))
		Expect(lookup(s, "faults.0.during.answered")).To(Equal(1.0))
		Expect(s.Warnings).To(ContainElement(ContainSubstring("site links (delay, loss, rate between sites) were not applied: run with --netns")))
	})
})

var _ = Describe("a network fault", Label("unit"), func() {
	It("shows its parameters with its instant and heal in the summary and report.md", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "partition-bac-pcscf", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30,
			"faults": [{"kind": "partition", "target": "pcscf1", "at_s": 10, "for_s": 10, "peers": ["bac"]},
			{"kind": "loss", "target": "pcscf2", "at_s": 22, "for_s": 5, "loss_percent": 5, "direction": "in"}]}`)
		r.register(1, 1, "initial", "pcscf1", "scscf1", "ok")
		r.event("lab", "fault", 10.1, map[string]any{"fault": "partition", "target": "pcscf1", "peers": []string{"bac"}})
		r.event("lab", "fault_heal", 20.2, map[string]any{"fault": "partition", "target": "pcscf1"})
		r.event("lab", "fault", 22.1, map[string]any{"fault": "loss", "target": "pcscf2", "loss_percent": 5})
		r.event("lab", "fault_heal", 27.1, map[string]any{"fault": "loss", "target": "pcscf2"})
		r.call("c1", 1, 1, 5, "ok", 100, true)
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Faults[0].Params).To(Equal("peers bac, silent drop"))
		Expect(*s.Faults[0].HealS).To(Equal(20.2))
		Expect(s.Faults[1].Params).To(Equal("5 % loss, direction in"))
		b, err := os.ReadFile(filepath.Join(dir, "report.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(And(ContainSubstring("partition pcscf1 at 10.100 s (peers bac, silent drop)"),
			ContainSubstring("loss pcscf2 at 22.100 s (5 % loss, direction in)")))
	})
})
