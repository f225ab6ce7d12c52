package report_test

import (
	"fmt"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// workloadRun writes a synthetic run of a kill of pcscf1 at 10 s with session timers: users 1–3 registered
// through pcscf1, 4–6 through pcscf2, calls up at the fault with every fate, calls after it to and from affected
// users, and the access side of the BAC's trace after the fault with probeMsgs of its 10 messages from a probe.
func workloadRun(dir string, probeMsgs int) {
	r := newRunDir(dir)
	r.file("scenario.json", `{"name": "pcscf1-kill", "seed": 42, "start_ns": 1767000000000000000, "duration_s": 40,
		"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 10, "for_s": 0}],
		"traffic": {"phones": 6, "session_expires_s": 4, "reachability_interval_s": 1, "reachability_sample": 2}}`)
	r.file("config/bac.yaml", "name: bac\nkind: bac\nfqdn: bac.ims.test\nlisten: "+bacAddr+"\n")
	r.file("config/pcscf2.yaml", "name: pcscf2\nkind: pcscf\nfqdn: pcscf2.ims.test\nlisten: "+pcscf2Addr+"\n")
	for n := 1; n <= 6; n++ {
		p, s := "pcscf1", "scscf1"
		if n > 3 {
			p, s = "pcscf2", "scscf2"
		}
		r.register(n, 0.5+float64(n)*0.1, "initial", p, s, "ok")
	}
	// leg adds one leg of an answered call: started at t, answered 100 ms later, over durS after the answer.
	leg := func(id, dir string, self, from, to int, t, durS float64, extra map[string]any) {
		m := map[string]any{"type": "call", "impu": impu(self), "call_id": id, "t_ns": at(t), "result": "ok",
			"status": 200, "direction": dir, "from": impu(from), "to": impu(to), "setup_ms_180": 50.0,
			"setup_ms_200": 100.0, "duration_ms": durS * 1000}
		for k, v := range extra {
			m[k] = v
		}
		r.records = append(r.records, m)
	}
	// Up at the fault (10 s):
	leg("cut", "mo", 4, 4, 5, 5, 7.5, map[string]any{"ended": "cut", "cut_ns": at(12), "refresh_result": "timeout",
		"bye_result": "408", "refreshes": 1, "last_refresh_ns": at(7.1)})
	leg("bye-failed", "mo", 1, 1, 4, 6, 8, map[string]any{"ended": "local", "bye_result": "timeout"}) // over at 14.1 s
	leg("refreshed", "mo", 2, 2, 5, 7, 13, map[string]any{"ended": "local", "bye_result": "ok", "refreshes": 3,
		"last_refresh_ns": at(11)})
	leg("peer-hung-up", "mo", 5, 5, 6, 7.5, 7, map[string]any{"ended": "remote"})
	leg("silent", "mo", 3, 3, 6, 8, 31.9, map[string]any{"ended": "shutdown", "bye_result": "aborted"})
	leg("callee-cut", "mo", 6, 6, 3, 9, 3.6, map[string]any{"ended": "remote"})
	leg("callee-cut", "mt", 3, 6, 3, 9, 3.5, map[string]any{"ended": "cut", "cut_ns": at(12.5),
		"refresh_result": "expired", "bye_result": "ok"})
	leg("over-before", "mo", 4, 4, 6, 2, 2, map[string]any{"ended": "local", "bye_result": "ok"})
	// Placed after the fault: two answered and one failed call of affected users, one call of unaffected users.
	r.call("pdd-1", 1, 4, 12, "ok", 150, true)
	r.call("pdd-2", 5, 2, 13, "ok", 2100, true)
	r.call("pdd-3", 3, 6, 11, "timeout", 0, false)
	r.call("other", 4, 5, 14, "ok", 90, true)
	r.call("before", 2, 5, 7, "ok", 95, true) // over at 9.1 s
	// A probe call (prober user0007 calls user0001) and its callee's leg.
	r.records = append(r.records,
		map[string]any{"type": "call", "impu": impu(7), "call_id": "probe-1", "t_ns": at(11), "result": "ok",
			"status": 200, "direction": "mo", "to": impu(1), "probe": "mt", "probe_user": impu(1), "duration_ms": 5.0},
		map[string]any{"type": "call", "impu": impu(1), "call_id": "probe-1", "t_ns": at(11.1), "result": "ok",
			"status": 200, "direction": "mt", "from": impu(7), "probe": "mt", "duration_ms": 5.0})
	r.event("lab", "fault", 10, map[string]any{"fault": "kill", "target": "pcscf1"})
	const phones = "127.0.0.1:5100"
	for i := range 10 {
		id := fmt.Sprintf("pdd-%d", 1+i%2)
		if i < probeMsgs {
			id = "probe-1"
		}
		r.sipHop("", "bac", phones, bacAddr, 11+0.1*float64(i), sipMsg("INVITE sip:x SIP/2.0", id, "1 INVITE"))
		// Inside the network: not the access side, not counted.
		r.sipHop("bac", "", bacAddr, pcscf2Addr, 11.05+0.1*float64(i), sipMsg("INVITE sip:y SIP/2.0", "probe-1", "1 INVITE"))
	}
	r.sipHop("", "bac", phones, bacAddr, 9, sipMsg("INVITE sip:x SIP/2.0", "probe-1", "1 INVITE")) // before the fault
	r.write()
}

var _ = Describe("Workload KPIs after the fault", Label("unit"), func() {
	var s *report.Summary

	build := func(probeMsgs int) {
		dir := GinkgoT().TempDir()
		workloadRun(dir, probeMsgs)
		var err error
		s, err = report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
	}

	Context("calls cut in progress", func() {
		BeforeEach(func() { build(2) })

		It("judges every call up at the fault from both legs: cut, survived or unknown, and when the cut was noticed", func() {
			c := s.CallsCut
			Expect(c).NotTo(BeNil())
			Expect(c.SessionTimers).To(BeTrue())
			Expect(c.InProgress).To(Equal(6), "every call answered before 10 s and not over by then")
			Expect(c.Cut).To(Equal(3), "a failed refresh, a failed BYE and a callee that heard no refresh")
			Expect(c.Survived).To(Equal(2), "a refresh after the fault, and the peer's BYE")
			Expect(c.Unknown).To(Equal(1), "no in-dialog request got through or failed after the fault")
			Expect(*c.Share).To(BeNumerically("~", 0.6, 1e-9))
			Expect(c.NoticedValuesS).To(ConsistOf(2.0, 2.5, 4.1))
			Expect(c.NoticedS.Max).To(Equal(4.1))
			Expect(lookup(s, "calls_cut.cut")).To(Equal(3.0))
		})
	})

	Context("post-dial delay", func() {
		BeforeEach(func() { build(2) })

		It("takes the calls to or from affected users placed after their fault, INVITE → 180 and → 200", func() {
			p := s.PostDialDelay
			Expect(p).NotTo(BeNil())
			Expect(p.Calls).To(Equal(3), "two answered and one that timed out; not the call between unaffected users")
			Expect(p.Answered).To(Equal(2))
			Expect(p.Answer.Values).To(Equal([]float64{150, 2100}))
			Expect(p.Ringing.Values).To(Equal([]float64{75, 1050}))
			Expect(p.Answer.P50).To(Equal(150.0))
			Expect(p.Answer.Max).To(Equal(2100.0))
			Expect(lookup(s, "post_dial_delay.invite_to_200_ms.count")).To(Equal(2.0))
		})
	})

	Context("probe share", func() {
		It("counts the probes' access-side messages after the fault and warns above 10 %", func() {
			build(2)
			pl := s.ProbeLoad
			Expect(pl).NotTo(BeNil())
			Expect(pl.CountedIn).To(Equal("access-side SIP messages"))
			Expect(pl.Total).To(Equal(10), "the phones' side of the BAC after the fault only")
			Expect(pl.Probe).To(Equal(2))
			Expect(pl.Share).To(Equal(0.2))
			Expect(pl.Sample).To(Equal(2))
			Expect(pl.ProbedUsers).To(Equal(1))
			Expect(pl.Over).To(BeTrue())
			Expect(s.Warnings).To(ContainElement(ContainSubstring("probes were 20.0 % of the phones' signalling")))
		})

		It("does not warn at 10 % or less", func() {
			build(1)
			Expect(s.ProbeLoad.Share).To(Equal(0.1))
			Expect(s.ProbeLoad.Over).To(BeFalse())
			Expect(s.Warnings).NotTo(ContainElement(ContainSubstring("probes were")))
		})
	})
})

var _ = Describe("Distribution", Label("unit"), func() {
	It("keeps every value up to 5,000 and thins evenly beyond, keeping the ends and the quantiles", func() {
		var xs []float64
		for i := range 12001 {
			xs = append(xs, float64((i*7919)%12001)) // 0…12000, shuffled
		}
		d := report.DistributionOf(xs)
		Expect(d.Count).To(Equal(12001))
		Expect(d.Thinned).To(BeTrue())
		Expect(d.Values).To(HaveLen(report.MaxDistValues))
		Expect(slices.IsSorted(d.Values)).To(BeTrue())
		Expect(d.Values[0]).To(Equal(0.0))
		Expect(d.Values[len(d.Values)-1]).To(Equal(12000.0))
		Expect(d.Values[2500]).To(BeNumerically("~", 6000, 3))
		Expect(d.P50).To(Equal(6000.0))
		Expect(d.P99).To(Equal(11880.0))
		Expect(d.Mean).To(Equal(6000.0))

		small := report.DistributionOf([]float64{3, 1, 2})
		Expect(small.Values).To(Equal([]float64{1, 2, 3}))
		Expect(small.Thinned).To(BeFalse())
		Expect(report.DistributionOf(nil)).To(BeNil())
	})
})
