package report_test

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

const (
	ueAddr     = "127.0.0.1:5101"
	bacAddr    = "127.0.0.1:5060"
	pcscf1Addr = "127.0.0.1:5061"
	pcscf2Addr = "127.0.0.1:5062"
	icscfAddr  = "127.0.0.1:5070"
	scscf1Addr = "127.0.0.1:5081"
	scscf2Addr = "127.0.0.1:5082"
	hssAddr    = "127.0.0.1:3868"
	icscfCx    = "127.0.0.1:40001" // the I-CSCF's side of its Cx connection
)

// pcscfKill writes the synthetic run of a kill of pcscf1 at 10 s: six users (1–3 via pcscf1), user 3 re-registers
// at 20 s, calls before and after, detection at bac (1.5 s) and scscf1 (2 s), and the trace of user 1's MO takeover
// call (Call-ID call-mo-1 at 12 s) through pcscf2 with an LIR UAT 2.
func pcscfKill(dir string) {
	r := newRunDir(dir)
	r.file("scenario.json", `{"name": "pcscf1-kill", "description": "kill pcscf1 under call load", "seed": 42,
		"start_ns": 1767000000000000000, "duration_s": 40,
		"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 10, "for_s": 0}],
		"expectations": [{"kpi": "mo.taken_over_before_reregistration", "min": 0.9}], "traffic": {"phones": 6},
		"something_new": {"x": 1}}`)
	for node, cfg := range map[string]string{
		"bac": bacAddr, "pcscf1": pcscf1Addr, "pcscf2": pcscf2Addr, "icscf": icscfAddr, "scscf1": scscf1Addr, "scscf2": scscf2Addr,
	} {
		r.file("config/"+node+".yaml", "name: "+node+"\nkind: x\nfqdn: "+node+".ims.test\nlisten: "+cfg+"\n")
	}
	r.file("config/hss.yaml", "name: hss\nkind: hss\nlisten: "+hssAddr+"\nhss:\n  diameter_listen: "+hssAddr+"\n  http_listen: 127.0.0.1:8090\n")

	// Registrations: 1–3 via pcscf1/scscf1, 4–6 via pcscf2/scscf2; user 6 also has a failed refresh.
	for n := 1; n <= 6; n++ {
		if n <= 3 {
			r.register(n, 0.5+float64(n)*0.1, "initial", "pcscf1", "scscf1", "ok")
		} else {
			r.register(n, 0.5+float64(n)*0.1, "initial", "pcscf2", "scscf2", "ok")
		}
	}
	r.register(6, 5, "refresh", "pcscf2", "scscf2", "timeout")
	r.register(3, 20, "refresh", "pcscf2", "scscf1", "ok")

	r.call("c0", 4, 1, 2, "ok", 110, true)
	r.call("c1", 1, 5, 11, "timeout", 0, false)
	r.call("call-mo-1", 1, 5, 12, "ok", 120, true)
	r.call("c3", 2, 6, 13, "ok", 130, true)
	r.call("c4", 4, 2, 14, "ok", 140, true)
	r.call("c5", 5, 1, 15, "408", 0, false)
	r.call("c6", 6, 1, 16, "ok", 150, true)
	r.call("c7a", 3, 4, 18, "503", 0, false)
	r.call("c7", 3, 4, 21, "ok", 100, true)
	r.call("c8", 5, 3, 22, "ok", 105, true)
	r.call("c9", 6, 4, 25, "ok", 90, true)

	r.event("lab", "fault", 10, map[string]any{"target": "pcscf1", "fault": "kill"})
	r.event("lab", "node_exit", 10.01, map[string]any{"target": "pcscf1", "signal": "SIGKILL", "expected": true})
	r.event("bac", "peer_state", 11.5, map[string]any{"peer": "pcscf1.ims.test", "addr": pcscf1Addr, "state": "down", "reason": "timeout"})
	r.event("bac", "peer_state", 13, map[string]any{"peer": "pcscf1.ims.test", "addr": pcscf1Addr, "state": "down", "reason": "probe_timeout"})
	r.event("scscf1", "peer_state", 12, map[string]any{"peer": "pcscf1.ims.test", "addr": pcscf1Addr, "state": "down", "reason": "probe_timeout"})
	r.event("icscf", "peer_state", 12.5, map[string]any{"peer": "scscf2.ims.test", "addr": scscf2Addr, "state": "down", "reason": "timeout"})
	r.event("scscf1", "peer_state", 30, map[string]any{"peer": "pcscf1.ims.test", "addr": pcscf1Addr, "state": "up", "reason": "probe_ok"})

	cxa := func(t float64, f map[string]any) {
		f["result"], f["experimental"] = 2001, false
		r.event("hss", "cx_answer", t, f)
	}
	for n := 1; n <= 6; n++ {
		cxa(0.5+float64(n)*0.1, map[string]any{"cmd": "UAR", "uat": 0, "impu": impu(n)})
		cxa(0.51+float64(n)*0.1, map[string]any{"cmd": "MAR", "impu": impu(n)})
		cxa(0.52+float64(n)*0.1, map[string]any{"cmd": "SAR", "sat": 1, "impu": impu(n)})
	}
	cxa(2.01, map[string]any{"cmd": "LIR", "impu": impu(1)})
	cxa(12.005, map[string]any{"cmd": "LIR", "uat": 2, "impu": impu(1)})
	cxa(12.008, map[string]any{"cmd": "LIR", "impu": impu(5)})
	cxa(12.05, map[string]any{"cmd": "LIR", "impu": impu(9)})
	cxa(20.01, map[string]any{"cmd": "UAR", "uat": 0, "impu": impu(3)})
	cxa(20.02, map[string]any{"cmd": "SAR", "sat": 2, "impu": impu(3)})
	r.event("hss", "cx_answer", 21, map[string]any{"cmd": "SAR", "sat": 3, "result": 5001, "experimental": true, "impu": impu(7)})

	// The trace of call-mo-1. Phones do not trace; every node does.
	inv, try := sipMsg("INVITE sip:user0005@ims.test SIP/2.0", "call-mo-1", "1 INVITE"), sipMsg("SIP/2.0 100 Trying", "call-mo-1", "1 INVITE")
	ring, ok := sipMsg("SIP/2.0 180 Ringing", "call-mo-1", "1 INVITE"), sipMsg("SIP/2.0 200 OK", "call-mo-1", "1 INVITE")
	r.sipHop("", "bac", ueAddr, bacAddr, 12.000, inv)
	r.sipHop("bac", "", bacAddr, ueAddr, 12.001, try)
	r.sipHop("bac", "pcscf2", bacAddr, pcscf2Addr, 12.002, inv)
	r.sipHop("pcscf2", "bac", pcscf2Addr, bacAddr, 12.003, try)
	r.sipHop("pcscf2", "icscf", pcscf2Addr, icscfAddr, 12.004, inv)
	r.sipHop("icscf", "pcscf2", icscfAddr, pcscf2Addr, 12.0045, try)
	req, ans := lir(impu(1), 2, 1001, 5001)
	r.traceMsg("hss", "diameter", "in", icscfCx, hssAddr, 12.005, req)
	r.traceMsg("hss", "diameter", "out", hssAddr, icscfCx, 12.006, ans)
	r.sipHop("icscf", "scscf1", icscfAddr, scscf1Addr, 12.007, inv)
	req, ans = lir(impu(5), -1, 1002, 5002)
	r.traceMsg("hss", "diameter", "in", icscfCx, hssAddr, 12.008, req)
	r.traceMsg("hss", "diameter", "out", hssAddr, icscfCx, 12.009, ans)
	req, ans = lir(impu(9), -1, 1003, 5003) // another user's: in the capture, not in the ladder
	r.traceMsg("hss", "diameter", "in", icscfCx, hssAddr, 12.05, req)
	r.traceMsg("hss", "diameter", "out", hssAddr, icscfCx, 12.051, ans)
	r.sipHop("scscf1", "icscf", scscf1Addr, icscfAddr, 12.060, ring)
	r.sipHop("icscf", "pcscf2", icscfAddr, pcscf2Addr, 12.061, ring)
	r.sipHop("pcscf2", "bac", pcscf2Addr, bacAddr, 12.062, ring)
	r.sipHop("bac", "", bacAddr, ueAddr, 12.063, ring)
	r.sipHop("scscf1", "icscf", scscf1Addr, icscfAddr, 12.120, ok)
	r.sipHop("icscf", "pcscf2", icscfAddr, pcscf2Addr, 12.121, ok)
	r.sipHop("pcscf2", "bac", pcscf2Addr, bacAddr, 12.122, ok)
	r.sipHop("bac", "", bacAddr, ueAddr, 12.123, ok)
	r.sipHop("", "bac", ueAddr, bacAddr, 12.130, sipMsg("ACK sip:user0005@ims.test SIP/2.0", "call-mo-1", "1 ACK"))
	// A probe, unrelated to any call.
	r.sipHop("bac", "pcscf2", bacAddr, pcscf2Addr, 5, sipMsg("OPTIONS sip:pcscf2.ims.test SIP/2.0", "probe-1", "1 OPTIONS"))
	r.sipHop("pcscf2", "bac", pcscf2Addr, bacAddr, 5.001, sipMsg("SIP/2.0 200 OK", "probe-1", "1 OPTIONS"))
	r.write()
	// A torn last line, as a SIGKILL leaves it.
	f, err := os.OpenFile(filepath.Join(dir, "events", "bac.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	Expect(err).NotTo(HaveOccurred())
	_, err = f.WriteString(`{"t_ns": 1767000030000000000, "node": "bac", "ki`)
	Expect(err).NotTo(HaveOccurred())
	Expect(f.Close()).To(Succeed())
}

// Unique messages of the trace: 18 SIP datagrams (16 of call-mo-1, the probe and its answer) and 6 Diameter
// messages (3 LIR/LIA pairs).
const sipMessages, diameterMessages = 18, 6

func lookup(s *report.Summary, path string) float64 {
	GinkgoHelper()
	v, ok := s.Lookup(path)
	Expect(ok).To(BeTrue(), "Lookup(%q)", path)
	return v
}

var _ = Describe("Build", Label("unit"), func() {
	var (
		dir string
		s   *report.Summary
	)

	Context("a P-CSCF killed at 10 s", Ordered, func() {
		BeforeAll(func() {
			dir = GinkgoT().TempDir()
			pcscfKill(dir)
			var err error
			s, err = report.Build(dir, report.WithPcap())
			Expect(err).NotTo(HaveOccurred())
		})

		It("keeps one copy of the events, and a rebuild from it gives the same summary", func() {
			Expect(filepath.Join(dir, "events.jsonl")).To(BeAnExistingFile())
			Expect(filepath.Join(dir, "events")).NotTo(BeADirectory(), "the per-node files are merged away")
			// The same summary, but for where the event errors are: the torn line of events/bac.jsonl is kept at
			// the end of events.jsonl.
			read := func(dir string) map[string]any {
				var m map[string]any
				b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
				Expect(err).NotTo(HaveOccurred())
				Expect(json.Unmarshal(b, &m)).To(Succeed())
				return m
			}
			first := read(dir)
			cp := filepath.Join(GinkgoT().TempDir(), "run") // the rebuild on a copy: the other specs read dir
			Expect(os.CopyFS(cp, os.DirFS(dir))).To(Succeed())
			again, err := report.Build(cp, report.WithPcap())
			Expect(err).NotTo(HaveOccurred())
			Expect(again.Files).To(Equal(s.Files))
			second := read(cp)
			Expect(second["events"]).To(HaveKeyWithValue("errors", first["events"].(map[string]any)["errors"]))
			Expect(second["events"]).To(HaveKeyWithValue("read", first["events"].(map[string]any)["read"]))
			for _, m := range []map[string]any{first, second} {
				delete(m, "events")
				delete(m, "warnings")
			}
			Expect(second).To(Equal(first))
		})

		It("describes the run and its fault at the lab's fault time", func() {
			Expect(s.Scenario).To(Equal("pcscf1-kill"))
			Expect(s.Seed).To(Equal(int64(42)))
			Expect(s.Faults).To(HaveLen(1))
			Expect(s.Faults[0].Kind).To(Equal("kill"))
			Expect(s.Faults[0].Target).To(Equal("pcscf1"))
			Expect(lookup(s, "faults.0.t0_s")).To(Equal(10.0))
			Expect(lookup(s, "faults.0.at_s")).To(Equal(10.0))
		})

		It("gives each affected user's interruption per direction and its time to the next re-registration", func() {
			Expect(s.Users).To(HaveLen(3))
			u1, u3 := s.Users[0], s.Users[2]
			Expect(u1.IMPU).To(Equal(impu(1)))
			Expect(u1.ReregS).To(BeNil())
			Expect(*u1.MOInterruptionS).To(BeNumerically("~", 2.12, 1e-6))
			Expect(*u1.MTInterruptionS).To(BeNumerically("~", 6.15, 1e-6))
			Expect(u1.MOTakenOver && u1.MTTakenOver).To(BeTrue())
			Expect(*u3.ReregS).To(BeNumerically("~", 10, 1e-6))
			Expect(*u3.MOInterruptionS).To(BeNumerically("~", 11.1, 1e-6))
			Expect(u3.MOTakenOver || u3.MTTakenOver).To(BeFalse())
			b, err := os.ReadFile(filepath.Join(dir, "users.csv"))
			Expect(err).NotTo(HaveOccurred())
			recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
			Expect(err).NotTo(HaveOccurred())
			Expect(recs).To(HaveLen(4))
			Expect(recs[3]).To(Equal([]string{impu(3), "pcscf1", "10", "10", "11.1", "12.105", "false", "false",
				"", "", "", "", ""}), "no reachability probes: no restore times")
		})

		It("counts the signalling per affected and per other user after the fault", func() {
			Expect(s.Signalling).NotTo(BeNil())
			Expect(s.Signalling.OtherUsers).To(Equal(3))
			Expect(s.MT.NotDelivered).To(Equal(1), "c5 to user 1 got 408 before reaching its phone")
			Expect(s.Signalling.SIPPerAffectedUser).To(BeNumerically(">", 0), "the MO takeover call's messages")
		})

		It("finds the users registered through pcscf1 at the fault", func() {
			Expect(lookup(s, "affected_users")).To(Equal(3.0))
			Expect(s.AffectedIMPUs).To(Equal([]string{impu(1), impu(2), impu(3)}))
		})

		It("measures the time to detect at each watching node from its first down event", func() {
			Expect(s.TimeToDetectS).To(Equal(map[string]float64{"bac": 1.5, "scscf1": 2.0}))
			Expect(lookup(s, "time_to_detect_s.bac")).To(Equal(1.5))
		})

		DescribeTable("MO and MT KPIs of the affected users",
			func(path string, want float64) { Expect(lookup(s, path)).To(BeNumerically("~", want, 1e-6)) },
			// MO: user1 timeout 11 s, ok 12 s; user2 ok 13 s; user3 503 18 s, ok 21 s (after its re-registration at 20 s).
			Entry(nil, "mo.attempts", 5.0),
			Entry(nil, "mo.succeeded", 3.0),
			Entry(nil, "mo.attempts_after_detection", 4.0),
			Entry(nil, "mo.success_ratio_after_detection", 0.75),
			Entry(nil, "mo.users_attempted", 3.0),
			Entry(nil, "mo.affected_users_with_success", 2.0),
			Entry(nil, "mo.taken_over_before_reregistration", 0.666667),
			Entry(nil, "mo.interruption_s.count", 3.0),
			Entry(nil, "mo.interruption_s.p50", 3.13), // answered: start + setup to 200
			Entry(nil, "mo.interruption_s.p95", 11.1),
			Entry(nil, "mo.interruption_s.max", 11.1),
			// MT: user2 ok 14 s, user1 ok 16 s (the 408 at 15 s never reached it), user3 ok 22 s.
			Entry(nil, "mt.attempts", 3.0),
			Entry(nil, "mt.succeeded", 3.0),
			Entry(nil, "mt.success_ratio_after_detection", 1.0),
			Entry(nil, "mt.affected_users_with_success", 2.0),
			// user3's periodic refresh at 20 s came before any call to it: no test of the MT takeover.
			Entry(nil, "mt.refreshed_first", 1.0),
			Entry(nil, "mt.users_tested", 2.0),
			Entry(nil, "mt.taken_over_before_reregistration", 1.0),
			// MO: user3's 503 at 18 s came after the detection and before its refresh: tested, not taken over.
			Entry(nil, "mo.refreshed_first", 0.0),
			Entry(nil, "mo.users_tested", 3.0),
			Entry(nil, "mt.interruption_s.p50", 6.15),
			Entry(nil, "mt.interruption_s.p95", 12.105),
			Entry(nil, "mt.interruption_s.max", 12.105),
			// Cx by command and UAT/SAT, from the HSS's cx_answer events.
			Entry(nil, "cx.UAR.total", 7.0),
			Entry(nil, "cx.UAR.uat0", 7.0),
			Entry(nil, "cx.LIR.total", 4.0),
			Entry(nil, "cx.LIR.uat2", 1.0),
			Entry(nil, "cx.SAR.sat1", 6.0),
			Entry(nil, "cx.SAR.sat2", 1.0),
			Entry(nil, "cx.SAR.sat3", 1.0),
			Entry(nil, "cx.SAR.failed", 1.0),
			Entry(nil, "cx.MAR.total", 6.0),
			Entry(nil, "cx_after_fault.LIR.total", 3.0),
			// Setup latency: takeover = an affected party after the fault (120, 130, 140, 150, 100, 105 ms).
			Entry(nil, "setup_latency_ms.takeover.count", 6.0),
			Entry(nil, "setup_latency_ms.takeover.p50", 120.0),
			Entry(nil, "setup_latency_ms.takeover.p95", 150.0),
			Entry(nil, "setup_latency_ms.takeover.p50_180", 60.0),
			Entry(nil, "setup_latency_ms.normal.count", 2.0),
			Entry(nil, "setup_latency_ms.normal.p50", 90.0),
			Entry(nil, "setup_latency_ms.normal.p95", 110.0),
			Entry(nil, "calls.total", 11.0),
			Entry(nil, "calls.answered", 8.0),
			Entry(nil, "calls.failed", 3.0),
			Entry(nil, "calls.by_cause.timeout", 1.0),
			Entry(nil, "calls.by_cause.408", 1.0),
			Entry(nil, "calls.by_cause.503", 1.0),
			Entry(nil, "registrations.total", 8.0),
			Entry(nil, "registrations.failed", 1.0),
			Entry(nil, "pcap.packets", float64(sipMessages+diameterMessages)),
		)

		It("returns false for what is not a number or absent", func() {
			for _, p := range []string{"scenario", "mo.nope", "time_to_detect_s.icscf", "cx.LIR.uat7", "faults.3.t0_s", "mo"} {
				_, ok := s.Lookup(p)
				Expect(ok).To(BeFalse(), p)
			}
		})

		It("writes summary.json with the same content and reports the torn event line as an error", func() {
			b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
			Expect(err).NotTo(HaveOccurred())
			var back report.Summary
			Expect(json.Unmarshal(b, &back)).To(Succeed())
			Expect(lookup(&back, "mo.taken_over_before_reregistration")).To(Equal(0.666667))
			Expect(back.Events.Errors).To(Equal(1))
			Expect(back.Events.ErrorLines).To(ConsistOf(HavePrefix("events/bac.jsonl:3: malformed event: unexpected end")))
			md, err := os.ReadFile(filepath.Join(dir, "report.md"))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(md)).To(ContainSubstring("## Event errors\n\n1 of"))
		})

		It("bins call success over time for affected and other users", func() {
			Expect(s.Bins).To(HaveLen(20))
			b := s.Bins[5] // 10–12 s: user1's timeout (the 12 s call falls in the next bin)
			Expect(b.AffectedAttempts).To(Equal(1))
			Expect(b.AffectedSucceeded).To(Equal(0))
			b = s.Bins[6] // 12–14 s: call-mo-1 mo (user1) and mt (user5), c3 mo (user2) and mt (user6)
			Expect([]int{b.AffectedAttempts, b.AffectedSucceeded, b.OthersAttempts, b.OthersSucceeded}).To(Equal([]int{2, 2, 2, 2}))
		})

		It("writes one calls.csv row per call record", func() {
			f, err := os.Open(filepath.Join(dir, "calls.csv"))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(f.Close)
			rows, err := csv.NewReader(f).ReadAll()
			Expect(err).NotTo(HaveOccurred())
			Expect(rows[0]).To(Equal([]string{"call_id", "direction", "impu", "peer", "start_s", "result", "status",
				"setup_ms_180", "setup_ms_200", "pcscf", "scscf", "affected", "after_fault"}))
			Expect(rows).To(HaveLen(1 + 11 + 8))
			Expect(rows).To(ContainElements(
				[]string{"call-mo-1", "mo", impu(1), impu(5), "12", "ok", "200", "60", "120", "", "", "true", "true"},
				[]string{"call-mo-1", "mt", impu(5), impu(1), "12", "ok", "200", "60", "120", "", "", "false", "true"},
				[]string{"c0", "mt", impu(1), impu(4), "2", "ok", "200", "55", "110", "", "", "true", "false"},
				[]string{"c5", "mo", impu(5), impu(1), "15", "408", "408", "", "", "", "", "false", "true"},
			))
		})

		It("draws the ladder of the MO takeover call with one lane per node and each message once", func() {
			Expect(s.Ladders).To(HaveLen(1)) // the MT takeover calls are not in the trace
			l := s.Ladders[0]
			Expect(l.Direction).To(Equal("mo"))
			Expect(l.CallID).To(Equal("call-mo-1"))
			Expect(l.Lanes).To(Equal([]string{"ue", "bac", "pcscf2", "icscf", "scscf1", "hss"}))
			Expect(l.Messages).To(Equal(16 + 4)) // the SIP of the call, LIR/LIA for caller and callee
			svg, err := os.ReadFile(filepath.Join(dir, l.File))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(svg)).To(HavePrefix("<svg"))
			Expect(strings.Count(string(svg), `class="msg">INVITE<`)).To(Equal(4))
			Expect(strings.Count(string(svg), `class="msg">100 Trying<`)).To(Equal(3))
			Expect(string(svg)).To(ContainSubstring(`class="msg">LIR (UAT 2)<`))
			Expect(string(svg)).To(ContainSubstring(`class="msg">LIA 2001<`))
			Expect(string(svg)).To(ContainSubstring(`class="msg">180 Ringing<`))
			Expect(string(svg)).To(ContainSubstring(`class="msg">ACK<`))
			Expect(string(svg)).NotTo(ContainSubstring("OPTIONS"))
		})

		It("draws the same ladder as a PNG at 2 pixels per SVG point, with the SIP and the Cx arrows in their colours", func() {
			l := s.Ladders[0]
			Expect(l.PNG).To(Equal("plots/ladder_mo.png"))
			f, err := os.Open(filepath.Join(dir, l.PNG))
			Expect(err).NotTo(HaveOccurred())
			defer f.Close()
			img, err := png.Decode(f)
			Expect(err).NotTo(HaveOccurred())
			svg, err := os.ReadFile(filepath.Join(dir, l.File))
			Expect(err).NotTo(HaveOccurred())
			var w, h int
			_, err = fmt.Sscanf(string(svg), `<svg xmlns="http://www.w3.org/2000/svg" class="ladder" width="%d" height="%d"`, &w, &h)
			Expect(err).NotTo(HaveOccurred())
			Expect(img.Bounds().Dx()).To(Equal(2 * w))
			Expect(img.Bounds().Dy()).To(Equal(2 * h))
			// Count the pixels of the SIP blue and the Cx orange: 16 SIP arrows, 4 Diameter ones.
			var sip, cx int
			for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
				for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
					r, g, b, _ := img.At(x, y).RGBA()
					switch [3]uint32{r >> 8, g >> 8, b >> 8} {
					case [3]uint32{0x1f, 0x5f, 0xa8}:
						sip++
					case [3]uint32{0xb3, 0x59, 0x00}:
						cx++
					}
				}
			}
			Expect(sip).To(BeNumerically(">", 16*100)) // each arrow is ≥ 300 px long and 3 px wide
			Expect(cx).To(BeNumerically(">", 4*100))
			Expect(sip).To(BeNumerically(">", cx))
		})

		It("writes a self-contained report.html with the plot and the ladder inline", func() {
			b, err := os.ReadFile(filepath.Join(dir, "report.html"))
			Expect(err).NotTo(HaveOccurred())
			h := string(b)
			Expect(strings.Count(h, "<svg")).To(BeNumerically(">=", 3)) // two plots, one ladder
			Expect(h).To(ContainSubstring("Call success over time"))
			Expect(h).To(ContainSubstring(`class="ladder"`))
			for _, lane := range []string{"ue", "bac", "pcscf2", "icscf", "scscf1", "hss"} {
				Expect(h).To(ContainSubstring(`class="lane">` + lane + `<`))
			}
			Expect(h).To(ContainSubstring(`class="msg">LIR (UAT 2)<`))
			Expect(h).NotTo(ContainSubstring("<?xml"))
			Expect(h).NotTo(MatchRegexp(`(src|href)="https?:`))
			Expect(h).NotTo(ContainSubstring("<script"))
		})

		It("writes report.md with the KPI table and links to the plots and the ladder", func() {
			b, err := os.ReadFile(filepath.Join(dir, "report.md"))
			Expect(err).NotTo(HaveOccurred())
			md := string(b)
			Expect(md).To(ContainSubstring("| affected users | 3 |"))
			Expect(md).To(ContainSubstring("| MO taken over before re-registration | 66.7 % (2 of 3 users tested; 0 more refreshed their " +
				"registration before any test) |"))
			Expect(md).To(ContainSubstring("(plots/call_success.svg)"))
			Expect(md).To(ContainSubstring("(plots/ladder_mo.svg) ([PNG](plots/ladder_mo.png))"))
			for _, f := range []string{"plots/call_success.svg", "plots/call_attempts.svg"} {
				svg, err := os.ReadFile(filepath.Join(dir, f))
				Expect(err).NotTo(HaveOccurred())
				Expect(string(svg)).To(ContainSubstring("<svg"))
			}
		})

		It("writes every message once to trace.pcap in time order, SIP over UDP and Diameter over TCP", func() {
			f, err := os.Open(filepath.Join(dir, "trace.pcap"))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(f.Close)
			rd, err := pcapgo.NewReader(f)
			Expect(err).NotTo(HaveOccurred())
			Expect(rd.LinkType()).To(Equal(layers.LinkTypeEthernet))
			var udp, tcp int
			var last int64
			for {
				data, ci, err := rd.ReadPacketData()
				if errors.Is(err, io.EOF) {
					break
				}
				Expect(err).NotTo(HaveOccurred())
				Expect(ci.Timestamp.UnixNano()).To(BeNumerically(">=", last))
				last = ci.Timestamp.UnixNano()
				p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
				Expect(p.ErrorLayer()).To(BeNil())
				if l := p.Layer(layers.LayerTypeUDP); l != nil {
					udp++
				}
				if l := p.Layer(layers.LayerTypeTCP); l != nil {
					t := l.(*layers.TCP)
					Expect(t.PSH && t.ACK).To(BeTrue())
					tcp++
				}
			}
			Expect(udp).To(Equal(sipMessages))
			Expect(tcp).To(Equal(diameterMessages))
		})

		It("writes a capture tshark decodes as SIP and Diameter", func() {
			tshark, err := exec.LookPath("tshark")
			if err != nil {
				if os.Getenv("IMSLAB_REQUIRE_TSHARK") != "" {
					Fail("tshark not found and IMSLAB_REQUIRE_TSHARK is set")
				}
				Skip("tshark not installed")
			}
			run := func(args ...string) []string {
				out, err := exec.Command(tshark, append([]string{"-n", "-r", filepath.Join(dir, "trace.pcap")}, args...)...).Output()
				Expect(err).NotTo(HaveOccurred())
				return strings.Fields(string(out))
			}
			Expect(run("-Y", "sip", "-T", "fields", "-e", "frame.number")).To(HaveLen(sipMessages))
			Expect(run("-Y", "sip.Method == \"INVITE\"", "-T", "fields", "-e", "sip.Call-ID")).To(HaveEach("call-mo-1"))
			codes := run("-d", "tcp.port==3868,diameter", "-Y", "diameter", "-T", "fields", "-e", "diameter.cmd.code")
			Expect(codes).To(HaveLen(diameterMessages))
			Expect(codes).To(HaveEach("302"))
			Expect(run("-d", "tcp.port==3868,diameter", "-Y", "diameter.flags.request == 1 && diameter.User-Authorization-Type == 2",
				"-T", "fields", "-e", "frame.number")).To(HaveLen(1))
		})
	})

	Context("a baseline run without faults", func() {
		It("reports no affected users and describes every user in the MO and MT blocks", func() {
			dir := GinkgoT().TempDir()
			r := newRunDir(dir)
			r.file("scenario.json", `{"name": "baseline", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 10, "faults": []}`)
			r.register(1, 0.1, "initial", "pcscf1", "scscf1", "ok")
			r.register(2, 0.2, "initial", "pcscf2", "scscf2", "ok")
			r.call("b1", 1, 2, 1, "ok", 100, true)
			r.call("b2", 2, 1, 2, "486", 0, false)
			r.call("b3", 2, 1, 3, "ok", 80, true)
			r.write()
			s, err := report.Build(dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(lookup(s, "affected_users")).To(Equal(0.0))
			Expect(s.AffectedIMPUs).To(BeEmpty())
			Expect(lookup(s, "mo.attempts")).To(Equal(3.0))
			Expect(lookup(s, "mo.succeeded")).To(Equal(2.0))
			Expect(lookup(s, "mo.success_ratio_after_detection")).To(Equal(0.666667))
			Expect(lookup(s, "mt.attempts")).To(Equal(2.0))
			Expect(lookup(s, "mt.success_ratio_after_detection")).To(Equal(1.0))
			_, ok := s.Lookup("mo.taken_over_before_reregistration")
			Expect(ok).To(BeFalse())
			_, ok = s.Lookup("mo.interruption_s.p50")
			Expect(ok).To(BeFalse())
			Expect(s.TimeToDetectS).To(BeEmpty())
			Expect(s.Ladders).To(BeEmpty())
			Expect(filepath.Join(dir, "trace.pcap")).NotTo(BeAnExistingFile())
			Expect(filepath.Join(dir, "report.html")).To(BeAnExistingFile())
			Expect(lookup(s, "setup_latency_ms.normal.p50")).To(Equal(80.0))
		})
	})

	It("fails on a run directory whose scenario.json is not JSON", func() {
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "scenario.json"), []byte("{"), 0o644)).To(Succeed())
		_, err := report.Build(dir)
		Expect(err).To(MatchError(ContainSubstring("scenario.json")))
	})
})
