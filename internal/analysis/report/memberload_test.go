package report_test

import (
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// poolKill writes a run of three P-CSCFs and two S-CSCFs, pcscf1 killed at 20 s and detected by the BAC at
// 22 s: before the kill each P-CSCF receives 2 INVITEs/s and uses 0.1 s of CPU per s; after it pcscf2 and
// pcscf3 receive 3/s and use 0.15 s per s, as a survivor that takes over half of the victim's users does.
func poolKill(dir string, withResources bool) { poolKillAt(dir, withResources, 0.5) }

// poolKillAt is poolKill with one INVITE to each P-CSCF every step seconds before the kill (after it, 1.5× that
// rate to each survivor), and 200 probe calls to pcscf2 after it that must not count as load.
func poolKillAt(dir string, withResources bool, step float64) {
	r := newRunDir(dir)
	r.file("scenario.json", `{"name": "pool-kill", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 60,
		"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 20, "for_s": 0}],
		"provenance": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": true, "go_version": "go1.26.8",
			"cpu_model": "Test CPU", "cpus": 2, "kernel": "6.1.0", "os": "linux/amd64",
			"command_line": ["imslab", "run", "x.yaml"]}}`)
	addr := map[string]string{"bac": "127.0.0.1:5060", "pcscf1": "127.0.0.1:5061", "pcscf2": "127.0.0.1:5062",
		"pcscf3": "127.0.0.1:5063", "scscf1": "127.0.0.1:5071", "scscf2": "127.0.0.1:5072"}
	for node, a := range addr {
		kind := node
		if len(node) > 5 {
			kind = node[:5]
		}
		r.file("config/"+node+".yaml", "name: "+node+"\nkind: "+kind+"\nfqdn: "+node+".ims.test\nlisten: "+a+"\n")
	}
	r.event("lab", "fault", 20, map[string]any{"target": "pcscf1", "fault": "kill"})
	r.event("bac", "peer_state", 22, map[string]any{"peer": "pcscf1.ims.test", "addr": addr["pcscf1"], "state": "down", "reason": "probe_timeout"})
	n := 0
	invite := func(to string, t float64) {
		n++
		id := fmt.Sprintf("c%d", n)
		r.sipHop("bac", to, addr["bac"], addr[to], t, sipMsg("INVITE sip:user0005@ims.test SIP/2.0", id, "1 INVITE"))
		// Answers and keepalives are not requests of users: not counted.
		r.sipHop(to, "bac", addr[to], addr["bac"], t+0.01, sipMsg("SIP/2.0 200 OK", id, "1 INVITE"))
		r.sipHop("bac", to, addr["bac"], addr[to], t+0.02, sipMsg("OPTIONS sip:"+to+".ims.test SIP/2.0", "o"+id, "1 OPTIONS"))
	}
	for t := 0.0; t < 20; t += step {
		for _, p := range []string{"pcscf1", "pcscf2", "pcscf3"} {
			invite(p, t)
		}
	}
	for t := 24.0; t < 60; t += step / 1.5 {
		invite("pcscf2", t)
		invite("pcscf3", t+0.001)
	}
	for i := 0; i < 200; i++ { // reachability probes: the measurement's calls, not the users'
		id := fmt.Sprintf("probe-%d", i)
		r.records = append(r.records, map[string]any{"type": "call", "impu": impu(1), "call_id": id, "t_ns": at(30),
			"result": "ok", "status": 200, "direction": "mt", "probe": "mt", "from": impu(9), "to": impu(1)})
		r.sipHop("bac", "pcscf2", addr["bac"], addr["pcscf2"], 30+float64(i)*0.01,
			sipMsg("INVITE sip:user0001@ims.test SIP/2.0", id, "1 INVITE"))
	}
	if withResources {
		for _, p := range []string{"pcscf1", "pcscf2", "pcscf3", "scscf1", "scscf2"} {
			for s := 0; s < 60; s++ {
				if p == "pcscf1" && s >= 20 {
					break
				}
				cpu := 0.1 * float64(s)
				if s > 20 && p != "pcscf1" {
					cpu = 2 + 0.15*float64(s-20)
				}
				r.event("lab", "resource", float64(s)+0.3, map[string]any{"target": p, "pid": 100, "cpu_s": cpu,
					"rss_bytes": 30 << 20})
			}
		}
	}
	r.write()
}

var _ = Describe("member load (Table 1's redundancy row)", Label("unit"), func() {
	It("measures each member's requests and CPU before the fault and after the takeover, and the survivors' peak ratio", func() {
		dir := GinkgoT().TempDir()
		poolKill(dir, true)
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		m := s.MemberLoad
		Expect(m).NotTo(BeNil())
		Expect(m.BeforeS).To(Equal([2]float64{0, 20}))
		Expect(m.AfterS).To(Equal([2]float64{24, 60}), "from detection (2 s after the kill) + 2 s to the end")
		Expect(m.Members).To(HaveLen(5))
		byNode := map[string]report.MemberLoadRow{}
		for _, r := range m.Members {
			byNode[r.Node] = r
		}
		Expect(byNode["pcscf1"].Faulted).To(BeTrue())
		Expect(byNode["pcscf1"].ReqPerSBefore).To(BeNumerically("~", 2, 0.01))
		Expect(byNode["pcscf1"].ReqPerSAfter).To(BeZero())
		Expect(byNode["pcscf2"].ReqPerSAfter).To(BeNumerically("~", 3, 0.05))
		Expect(*byNode["pcscf2"].CPUBefore).To(BeNumerically("~", 0.1, 0.001))
		Expect(*byNode["pcscf2"].CPUAfter).To(BeNumerically("~", 0.15, 0.001))
		Expect(*byNode["pcscf2"].RSSMaxMiB).To(BeNumerically("==", 30))
		p := m.Pools["pcscf"]
		Expect(p.ActiveBefore).To(Equal(3))
		Expect(p.Survivors).To(Equal(2))
		Expect(*p.PeakLoadRatio).To(BeNumerically("~", 1.5, 0.03), "a survivor serves half as much again: 1/(N-1) headroom")
		Expect(*p.CPUPeakRatio).To(BeNumerically("~", 1.5, 0.02))
		Expect(lookup(s, "member_load.pools.pcscf.peak_load_ratio")).To(BeNumerically("~", 1.5, 0.03))

		md, err := os.ReadFile(filepath.Join(dir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## Member load before the fault and after the takeover"))
		Expect(string(md)).To(ContainSubstring("| pcscf1 (faulted) | 2.00 | 0.00 |"))

		By("carrying the run's provenance from scenario.json into summary.json and report.md")
		Expect(s.Provenance).NotTo(BeNil())
		Expect(s.Provenance.Short()).To(Equal("0123456789ab+dirty"))
		Expect(string(md)).To(ContainSubstring("| code | commit 0123456789abcdef0123456789abcdef01234567 with uncommitted changes; go1.26.8 |"))
		Expect(string(md)).To(ContainSubstring("| machine | Test CPU, 2 cores, kernel 6.1.0 (linux/amd64) |"))
	})

	It("gives no ratio when the members received too little traffic before the fault to compare", func() {
		dir := GinkgoT().TempDir()
		poolKillAt(dir, true, 2) // 0.5 INVITEs/s per member before the kill
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		p := s.MemberLoad.Pools["pcscf"]
		Expect(p.ReqPerSBefore).To(BeNumerically("~", 1.5, 0.01))
		Expect(p.PeakLoadRatio).To(BeNil())
		Expect(p.CPUPeakRatio).To(BeNil())
	})

	It("gives requests without CPU when the lab recorded no resource samples", func() {
		dir := GinkgoT().TempDir()
		poolKill(dir, false)
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(*s.MemberLoad.Pools["pcscf"].PeakLoadRatio).To(BeNumerically("~", 1.5, 0.03))
		Expect(s.MemberLoad.Pools["pcscf"].CPUPeakRatio).To(BeNil())
		Expect(s.MemberLoad.Members[0].CPUBefore).To(BeNil())
	})
})
