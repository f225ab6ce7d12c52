package report_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("Takeover before re-registration", Label("unit"), func() {
	It("counts a call as taken over when it started before the re-registration, and leaves out users whose periodic refresh came before any test", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "takeover", "seed": 1, "start_ns": 1767000000000000000,
			"end_ns": 1767000030000000000, "duration_s": 30,
			"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 10, "for_s": 0}],
			"traffic": {"phones": 7}}`)
		for n := 1; n <= 6; n++ {
			r.register(n, 0.1*float64(n), "initial", "pcscf1", "scscf1", "ok")
		}
		r.register(20, 0.7, "initial", "pcscf2", "scscf2", "ok") // the callee, not affected
		r.event("lab", "fault", 10, map[string]any{"fault": "kill", "target": "pcscf1"})
		r.event("bac", "peer_state", 11.5, map[string]any{"peer": "pcscf1.ims.test", "state": "down"})
		// 1: served after the detection, never re-registered: taken over.
		r.call("c1", 1, 20, 12, "ok", 100, false)
		// 2: its periodic refresh at 10.5 came before any call: no evidence either way.
		r.register(2, 10.5, "refresh", "pcscf2", "scscf1", "ok")
		r.call("c2", 2, 20, 12, "ok", 100, false)
		// 3: refused after the detection, re-registered by the restoration 504, then served: tested, not taken over.
		r.call("c3", 3, 20, 12, "504", 0, false)
		r.register(3, 12.5, "restoration", "pcscf2", "scscf1", "ok")
		r.call("c3b", 3, 20, 13, "ok", 100, false)
		// 4: only a call before the detection failed (every scheme fails then), then its periodic refresh: no test.
		r.call("c4", 4, 20, 10.2, "408", 0, false)
		r.register(4, 11, "refresh", "pcscf2", "scscf1", "ok")
		r.call("c4b", 4, 20, 12, "ok", 100, false)
		// 5: a call started at 12 s and answered 1.5 s later, after a refresh at 12.8 s: taken over all the same.
		r.call("c5", 5, 20, 12, "ok", 1500, false)
		r.register(5, 12.8, "refresh", "pcscf2", "scscf1", "ok")
		// 6: a restoration 504 (to something else) re-registered it at 11 s before any call: the fault did that,
		// so it stays tested, and is not taken over.
		r.register(6, 11, "restoration", "pcscf2", "scscf1", "ok")
		r.call("c6", 6, 20, 12, "ok", 100, false)
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.AffectedUsers).To(Equal(6))
		mo := s.MO
		Expect(mo.UsersAttempted).To(Equal(6))
		Expect(mo.RefreshedFirst).To(Equal(2), "users 2 and 4")
		Expect(mo.UsersTested).To(Equal(4))
		Expect(mo.AffectedUsersWithSuccess).To(Equal(2), "users 1 and 5")
		Expect(*mo.TakenOverBeforeReregistration).To(Equal(0.5))
		taken := map[string]bool{}
		for _, u := range s.Users {
			taken[u.IMPU] = u.MOTakenOver
		}
		Expect(taken).To(Equal(map[string]bool{impu(1): true, impu(2): false, impu(3): false, impu(4): false,
			impu(5): true, impu(6): false}))
	})
})
