package report_test

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("Kaplan–Meier", Label("unit"), func() {
	It("reproduces the textbook estimate of the 6-MP arm of Freireich et al. (1963) with Greenwood's variance", func() {
		// Weeks in remission, + = censored (Kleinbaum & Klein, Survival Analysis, ch. 2; R's survfit gives the
		// same table): 6,6,6,6+,7,9+,10,10+,11+,13,16,17+,19+,20+,22,23,25+,32+,32+,34+,35+.
		times := []float64{6, 6, 6, 6, 7, 9, 10, 10, 11, 13, 16, 17, 19, 20, 22, 23, 25, 32, 32, 34, 35}
		event := []bool{true, true, true, false, true, false, true, false, false, true, true, false, false, false,
			true, true, false, false, false, false, false}
		c := report.KaplanMeier(times, event)
		Expect(c.N).To(Equal(21))
		Expect(c.Restored).To(Equal(9))
		Expect(c.Censored).To(Equal(12))
		// Survival S(t) = 1 − restored and n at risk, from the textbook table.
		want := []struct {
			t, s   float64
			atRisk int
			events int
		}{{6, 0.857, 21, 3}, {7, 0.807, 17, 1}, {10, 0.753, 15, 1}, {13, 0.690, 12, 1}, {16, 0.627, 11, 1},
			{22, 0.538, 7, 1}, {23, 0.448, 6, 1}}
		Expect(c.Points).To(HaveLen(len(want) + 1))
		Expect(c.Points[0]).To(Equal(report.KMPoint{TS: 0, AtRisk: 21}))
		for i, w := range want {
			p := c.Points[i+1]
			Expect(p.TS).To(Equal(w.t))
			Expect(1-p.Restored).To(BeNumerically("~", w.s, 0.0005), "S(%v)", w.t)
			Expect(p.AtRisk).To(Equal(w.atRisk))
			Expect(p.Events).To(Equal(w.events))
			Expect(p.Lo).To(BeNumerically("<=", p.Restored))
			Expect(p.Hi).To(BeNumerically(">=", p.Restored))
		}
		// The 95 % band at t = 6 on the log(−log) scale: Greenwood's SE of S is 0.0764 (textbook), and
		// S^exp(±1.96·SE/(S·|ln S|)) = [0.620, 0.952] for S (R: conf.type = "log-log").
		Expect(1 - c.Points[1].Hi).To(BeNumerically("~", 0.620, 0.0005))
		Expect(1 - c.Points[1].Lo).To(BeNumerically("~", 0.952, 0.0005))
		Expect(*c.MedianS).To(Equal(23.0))
		Expect(c.At(12.9)).To(BeNumerically("~", 1-0.753, 0.0005))
		Expect(c.At(5.9)).To(Equal(0.0))
	})

	It("reaches 1 with a zero-width band when every user is restored, and has no median when half never is", func() {
		c := report.KaplanMeier([]float64{1, 2, 2, 3}, []bool{true, true, true, true})
		last := c.Points[len(c.Points)-1]
		Expect(last).To(Equal(report.KMPoint{TS: 3, Restored: 1, Lo: 1, Hi: 1, AtRisk: 1, Events: 1}))
		Expect(*c.MedianS).To(Equal(2.0))
		c = report.KaplanMeier([]float64{1, 9, 9, 9}, []bool{true, false, false, false})
		Expect(c.MedianS).To(BeNil())
		Expect(c.Censored).To(Equal(3))
		Expect(c.At(100)).To(Equal(0.25))
	})
})

var _ = Describe("Time to restore", Label("unit"), func() {
	It("measures each affected user's MT and MO restoration from the probes, censors the rest and keeps probes out of the call KPIs", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "probe", "seed": 1, "start_ns": 1767000000000000000,
			"end_ns": 1767000030000000000, "duration_s": 30,
			"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 10, "for_s": 0}],
			"traffic": {"phones": 3, "reachability_interval_s": 0.25}}`)
		r.register(1, 0.1, "initial", "pcscf1", "scscf1", "ok")
		r.register(2, 0.2, "initial", "pcscf1", "scscf2", "ok")
		r.register(3, 0.3, "initial", "pcscf2", "scscf2", "ok")
		r.event("lab", "fault", 10, map[string]any{"fault": "kill", "target": "pcscf1"})
		r.event("bac", "peer_state", 11.5, map[string]any{"peer": "pcscf1.ims.test", "state": "down"})
		// A user's own call before the fault, to tell the probes apart.
		r.call("own", 3, 1, 5, "ok", 100, true)
		probe := func(id string, caller int, kind string, user int, t float64, result string, setup200 float64) {
			m := map[string]any{"type": "call", "impu": impu(caller), "call_id": id, "t_ns": at(t), "result": result,
				"direction": "mo", "duration_ms": 1.0, "probe": kind, "probe_user": impu(user)}
			if result == "ok" {
				m["setup_ms_200"] = setup200
			}
			r.records = append(r.records, m)
		}
		// User 1 (a caller): MT back at 11.6 (the start of the first answered probe), MO at 11.9. User 2
		// (MT-only): never back.
		probe("p1", 9001, "mt", 1, 10.1, "408", 0)
		probe("p2", 9001, "mt", 1, 11.6, "ok", 50)
		probe("p3", 1, "mo", 1, 10.2, "504", 0)
		probe("p4", 1, "mo", 1, 11.9, "ok", 100)
		probe("p5", 9001, "mt", 2, 10.3, "480", 0)
		probe("p6", 9001, "mt", 2, 29, "480", 0)
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		// The probes of user 1 would be its MO and MT attempts after the fault if they counted as its traffic.
		Expect(s.MO.Attempts).To(Equal(0), "probe calls are not the users' traffic")
		Expect(s.MT.Attempts).To(Equal(0), "probe calls are not the users' traffic")
		sv := s.Survival
		Expect(sv).NotTo(BeNil())
		Expect(sv.Users).To(Equal(2))
		Expect(sv.IntervalS).To(Equal(0.25))
		Expect(sv.BoundS).To(Equal(1.75)) // detection 1.5 s + one interval
		Expect(sv.MT.N).To(Equal(2))
		Expect(sv.MT.Censored).To(Equal(1))
		Expect(sv.MO.N).To(Equal(1))
		Expect(sv.Service.Points).To(HaveLen(2))
		Expect(sv.Service.Points[1].TS).To(Equal(1.9))
		Expect(sv.Service.Points[1].Restored).To(Equal(0.5))
		Expect(sv.RestoredAtBound).To(Equal(0.0))
		Expect(*sv.Service.MedianS).To(Equal(1.9))
		// At the answers: MT 11.6 + 0.05 s, MO 11.9 + 0.1 s after the fault at 10 s.
		Expect(sv.ServiceAnswered.Points[1].TS).To(Equal(2.0))
		Expect(sv.ServiceAnswered.Censored).To(Equal(1))
		b, err := os.ReadFile(filepath.Join(dir, "users.csv"))
		Expect(err).NotTo(HaveOccurred())
		rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
		Expect(err).NotTo(HaveOccurred())
		Expect(rows[0][8:]).To(Equal([]string{"mt_restore_s", "mo_restore_s", "restore_s", "censored"}))
		Expect(rows[1][0]).To(Equal(impu(1)))
		Expect(rows[1][8:]).To(Equal([]string{"1.6", "1.9", "1.9", "false"}))
		Expect(rows[2][8:]).To(Equal([]string{"", "", "", "true"}))
		for _, f := range []string{"plots/restore.svg", "plots/restore.png"} {
			Expect(s.Files).To(ContainElement(f))
			Expect(filepath.Join(dir, f)).To(BeAnExistingFile())
		}
	})

	It("counts the bound from the fault whose users are probed, not from an earlier fault of other nodes", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		// A partition of pcscf2 at 5 s (its users are affected but not probed: probes follow kills), then pcscf1
		// killed at 10 s, noticed at 11.5 s (and pcscf2 "noticed" down at 6 s by pcscf1, which probes it).
		r.file("scenario.json", `{"name": "probe", "seed": 1, "start_ns": 1767000000000000000,
			"end_ns": 1767000030000000000, "duration_s": 30,
			"faults": [{"kind": "partition", "target": "pcscf2", "at_s": 5, "for_s": 0},
			           {"kind": "kill", "target": "pcscf1", "at_s": 10, "for_s": 0}],
			"traffic": {"phones": 2, "reachability_interval_s": 0.25}}`)
		r.register(1, 0.1, "initial", "pcscf1", "scscf1", "ok")
		r.register(2, 0.2, "initial", "pcscf2", "scscf2", "ok")
		r.event("lab", "fault", 5, map[string]any{"fault": "partition", "target": "pcscf2"})
		r.event("pcscf1", "peer_state", 6, map[string]any{"peer": "pcscf2.ims.test", "state": "down"})
		r.event("lab", "fault", 10, map[string]any{"fault": "kill", "target": "pcscf1"})
		r.event("bac", "peer_state", 11.5, map[string]any{"peer": "pcscf1.ims.test", "state": "down"})
		r.records = append(r.records, map[string]any{"type": "call", "impu": impu(9001), "call_id": "p1",
			"t_ns": at(11.6), "result": "ok", "direction": "mo", "duration_ms": 1.0, "probe": "mt",
			"probe_user": impu(1), "setup_ms_200": 50})
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Faults).To(HaveLen(2))
		Expect(s.Faults[0].TimeToDetectS).To(HaveKeyWithValue("pcscf1", 1.0), "the partition was noticed 1 s in")
		sv := s.Survival
		Expect(sv).NotTo(BeNil())
		Expect(sv.Users).To(Equal(1))
		Expect(sv.NotProbed).To(Equal(1), "pcscf2's user")
		Expect(sv.DetectedS).To(Equal(1.5), "the kill's detection, not the partition's")
		Expect(sv.BoundS).To(Equal(1.75))
		Expect(sv.RestoredAtBound).To(Equal(1.0), "user 1 reachable again 1.6 s after the kill")
		md, err := os.ReadFile(filepath.Join(dir, "report.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("| affected users probed | 1 of 2 (the curves are theirs;"))
	})
})
