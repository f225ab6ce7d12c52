package report_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// steadyRun writes a run of 10 phones registered before t0 and pcscf1 killed at 40 s. Inside [0, 40) s: every
// phone refreshes once (UAR twice, MAR, SAR at the HSS, and two replication messages of 300 bytes to the peers),
// 5 calls (one LIR each); two P-CSCFs use 0.05 s of CPU per s, the HSS 0.02, the phones' process 0.5. After the
// kill, an LIR, a replication message and the de-registrations, which the steady cost must not count.
func steadyRun(dir string) {
	r := newRunDir(dir)
	r.file("scenario.json", `{"name": "steady", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 60,
		"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 40, "for_s": 0}]}`)
	for _, n := range []string{"pcscf1", "pcscf2"} {
		r.file("config/"+n+".yaml", "name: "+n+"\nkind: pcscf\nfqdn: "+n+".ims.test\nlisten: 127.0.0.1:5061\n")
	}
	// The HSS's configuration names no kind: its CPU is counted under its name.
	r.file("config/hss.yaml", "origin_host: hss.ims.test\ndiameter_listen: 127.0.0.1:3868\n")
	r.event("lab", "fault", 40, map[string]any{"target": "pcscf1", "fault": "kill"})
	cx := func(t float64, cmd string, user int) {
		r.event("hss", "cx_answer", t, map[string]any{"cmd": cmd, "impu": impu(user), "result": 2001})
	}
	for u := 1; u <= 10; u++ {
		r.register(u, -3, "initial", "pcscf1", "scscf1", "ok")
		cx(-3, "UAR", u) // before t0: the initial registrations are not the steady cost
		t := 9 + float64(u)
		r.register(u, t, "refresh", "pcscf1", "scscf1", "ok")
		for _, cmd := range []string{"UAR", "UAR", "MAR", "SAR"} {
			cx(t+0.01, cmd, u)
		}
		for _, peer := range []string{"pcscf2", "pcscf3"} {
			r.event("pcscf1", "repl_send", t+0.02, map[string]any{"peer": peer, "bytes": 300, "op": "put"})
		}
		r.register(u, 61, "deregister", "pcscf1", "scscf1", "ok")
	}
	for i := 1; i <= 5; i++ {
		t := 20 + float64(i)
		r.call(fmt.Sprintf("call-%d", i), i, i+5, t, "ok", 100, true)
		cx(t+0.01, "LIR", i+5)
	}
	cx(41, "LIR", 3)
	r.event("pcscf2", "repl_send", 41, map[string]any{"peer": "pcscf1", "bytes": 300, "op": "put"})
	for s := 0; s <= 60; s++ {
		for node, rate := range map[string]float64{"pcscf1": 0.05, "pcscf2": 0.05, "hss": 0.02, "phones": 0.5} {
			r.event("lab", "resource", float64(s)+0.5, map[string]any{"target": node, "pid": 100,
				"cpu_s": rate * float64(s), "rss_bytes": 30 << 20})
		}
	}
	r.write()
}

var _ = Describe("steady-state cost (Table 1's data-sync and cost rows)", Label("unit"), func() {
	It("counts Cx, replication and CPU from t0 to the first fault, per subscriber-hour and per procedure", func() {
		dir := GinkgoT().TempDir()
		steadyRun(dir)
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		c := s.Cost
		Expect(c).NotTo(BeNil())
		Expect(c.WindowS).To(Equal([2]float64{0, 40}))
		Expect(c.Subscribers).To(Equal(10))
		Expect(c.Registrations).To(Equal(10), "the refreshes; not the initial registrations nor the de-registrations")
		Expect(c.Calls).To(Equal(5))
		Expect(c.Cx).To(Equal(map[string]int{"UAR": 20, "MAR": 10, "SAR": 10, "LIR": 5, "total": 45}))
		Expect(c.ReplMessages).To(Equal(20))
		Expect(c.ReplBytes).To(Equal(6000))
		Expect(*c.CxPerRegistration).To(BeNumerically("==", 4))
		Expect(*c.CxPerCall).To(BeNumerically("==", 1))
		Expect(*c.ReplPerRegistration).To(BeNumerically("==", 2))

		subHours := 10 * 40.0 / 3600
		Expect(c.PerSubscriberHour["cx"]).To(BeNumerically("~", 45/subHours, 0.01))
		Expect(c.PerSubscriberHour["cx_LIR"]).To(BeNumerically("~", 5/subHours, 0.01))
		Expect(c.PerSubscriberHour["repl_messages"]).To(BeNumerically("~", 20/subHours, 0.01))
		Expect(c.PerSubscriberHour["repl_bytes"]).To(BeNumerically("~", 6000/subHours, 0.1))

		By("scaling each node's CPU between its samples to the window, summed by kind, the phones' process left out")
		Expect(c.CPUS).To(HaveKey("pcscf"))
		Expect(c.CPUS).To(HaveKey("hss"))
		Expect(c.CPUS).NotTo(HaveKey("phones"))
		Expect(c.CPUS["pcscf"]).To(BeNumerically("~", 2*0.05*40, 0.001))
		Expect(c.CPUS["hss"]).To(BeNumerically("~", 0.02*40, 0.001))
		Expect(c.CPUS["total"]).To(BeNumerically("~", 4.8, 0.001))
		Expect(c.PerSubscriberHour["cpu_ms"]).To(BeNumerically("~", 4800/subHours, 0.1))
		Expect(c.PerSubscriberHour["cpu_ms_hss"]).To(BeNumerically("~", 800/subHours, 0.1))
		Expect(lookup(s, "cost.per_subscriber_hour.cx")).To(BeNumerically("~", 405, 0.01))
	})

	It("has no cost when the fault leaves less than 10 s of steady state", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "early", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 60,
			"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 5, "for_s": 0}]}`)
		r.event("lab", "fault", 5, map[string]any{"target": "pcscf1", "fault": "kill"})
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Cost).To(BeNil())
	})
})
