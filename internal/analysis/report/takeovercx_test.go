package report_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("the takeover's Cx cost per call and per user", Label("unit"), func() {
	It("counts the affected users' Cx against their calls, the probes' included, and subtracts the other users'", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "takeover-cx", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 10,
			"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 4, "for_s": 0}]}`)
		r.register(1, -3, "initial", "pcscf1", "scscf1", "ok")
		r.register(2, -3, "initial", "pcscf1", "scscf1", "ok")
		r.register(3, -3, "initial", "pcscf2", "scscf1", "ok")
		r.register(4, -3, "initial", "pcscf2", "scscf1", "ok")
		r.register(9, -3, "initial", "pcscf2", "scscf1", "ok") // the prober
		cx := func(t float64, cmd string, user int, f map[string]any) {
			m := map[string]any{"cmd": cmd, "impu": impu(user), "result": 2001}
			for k, v := range f {
				m[k] = v
			}
			r.event("hss", "cx_answer", t, m)
		}
		r.call("c0", 1, 3, 2, "ok", 100, true) // before the fault: not counted
		cx(2, "LIR", 3, map[string]any{"uat": 0})
		r.event("lab", "fault", 4, map[string]any{"fault": "kill", "target": "pcscf1"})
		r.call("c1", 1, 3, 5, "ok", 100, true) // affected MO: restore=1, LIR with UAT 2 about the caller
		cx(5, "LIR", 1, map[string]any{"uat": 2})
		cx(5, "LIR", 3, map[string]any{"uat": 0})
		r.records = append(r.records, // a reachability probe to user 1 (MT)
			map[string]any{"type": "call", "impu": impu(9), "call_id": "p1", "t_ns": at(5.5), "result": "ok", "status": 200,
				"direction": "mo", "from": impu(9), "to": impu(1), "duration_ms": 100.0, "probe": "prober", "probe_user": impu(1)},
			map[string]any{"type": "call", "impu": impu(1), "call_id": "p1", "t_ns": at(5.5), "result": "ok", "status": 200,
				"direction": "mt", "from": impu(9), "to": impu(1), "duration_ms": 100.0, "probe": "mt"})
		cx(5.5, "LIR", 1, map[string]any{"uat": 0})
		r.call("c2", 4, 2, 6, "ok", 100, true) // affected MT
		cx(6, "LIR", 2, map[string]any{"uat": 0})
		cx(6, "SAR", 2, map[string]any{"sat": 3}) // a new S-CSCF fetching user 2's restoration data
		r.call("c3", 3, 4, 7, "ok", 100, true)    // between other users
		cx(7, "LIR", 4, map[string]any{"uat": 0})
		cx(10.5, "SAR", 1, map[string]any{"sat": 5}) // the phones stopping after the run: not counted
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())

		tc := s.TakeoverCx
		Expect(tc).NotTo(BeNil())
		Expect(tc.WindowS).To(Equal(6.0))
		Expect(tc.Affected).To(Equal(report.CxParty{Users: 2, MOCalls: 1, MTCalls: 2, LIR: 3, LIRUAT2: 1, SAR: 1,
			SARSAT3: 1, LIRPerCall: 0.333333, RegCxPerUser: 0.5}))
		Expect(tc.Other).To(Equal(report.CxParty{Users: 3, MOCalls: 3, MTCalls: 2, LIR: 2}), "users 3, 4 and the prober")
		Expect(tc.ExtraLIRPerCall).To(Equal(0.333333))
		Expect(tc.ExtraRegCxPerUser).To(Equal(0.5))
		Expect(lookup(s, "takeover_cx.extra_lir_per_call")).To(Equal(0.333333))
	})

	It("is absent without a fault", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "steady", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 10, "faults": []}`)
		r.register(1, -3, "initial", "pcscf1", "scscf1", "ok")
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.TakeoverCx).To(BeNil())
	})
})
