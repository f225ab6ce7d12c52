package report_test

import (
	"encoding/csv"
	"encoding/json"
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
		// Before the first restoration: 0 of 21, [0, 1 − 0.025^(1/21)] (Clopper–Pearson), not [0, 0].
		Expect(c.Points[0]).To(Equal(report.KMPoint{TS: 0, Hi: 0.161098, AtRisk: 21}))
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

	It("reaches 1 with a Clopper–Pearson band where Greenwood's closes, and has no median when half never is", func() {
		c := report.KaplanMeier([]float64{1, 2, 2, 3}, []bool{true, true, true, true})
		last := c.Points[len(c.Points)-1]
		// 4 of 4 users restored: Greenwood's variance is 0 there; the exact binomial lower bound is 0.025^(1/4).
		Expect(last.Restored).To(Equal(1.0))
		Expect(last.Hi).To(Equal(1.0))
		Expect(last.Lo).To(BeNumerically("~", 0.397635, 1e-6))
		// Before the first restoration, 0 of 4: [0, 1 − 0.025^(1/4)].
		rd := c.Read(0.5)
		Expect(rd.Restored).To(Equal(0.0))
		Expect(rd.Lo).To(Equal(0.0))
		Expect(rd.Hi).To(BeNumerically("~", 0.602365, 1e-6))
		Expect(c.Read(2.5).Restored).To(Equal(0.75))
		Expect(c.Read(2.5).Hi-c.Read(2.5).Lo).To(BeNumerically(">", 0.1), "Greenwood's band in between")
		// A single user has no band to speak of either way, but it is not [1, 1] either.
		one := report.KaplanMeier([]float64{1}, []bool{true})
		Expect(one.Points[1].Lo).To(BeNumerically("~", 0.025, 1e-9))
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
		// User 1 (a caller): MT probe placed at 11.6 and answered 50 ms later, MO placed at 11.9 and answered 100 ms
		// later. User 2 (MT-only): never back.
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
		Expect(sv.TimedAt).To(Equal("answer"))
		Expect(sv.Legacy).To(BeEmpty())
		Expect(sv.DetectedFirstS).To(Equal(1.5))
		Expect(sv.DetectedLastS).To(Equal(1.5))
		Expect(sv.BoundS).To(Equal(1.75)) // last detection 1.5 s + one interval
		Expect(sv.MT.N).To(Equal(2))
		Expect(sv.MT.Censored).To(Equal(1))
		Expect(sv.MT.Points[1].TS).To(Equal(1.65), "MT answered 11.6 + 0.05 s, 10 s being the fault")
		Expect(sv.MO.N).To(Equal(1))
		Expect(sv.MO.Points[1].TS).To(Equal(2.0), "MO answered 11.9 + 0.1 s")
		Expect(sv.Service.Points).To(HaveLen(2))
		Expect(sv.Service.Points[1].TS).To(Equal(2.0), "served when both are answered")
		Expect(sv.Service.Points[1].Restored).To(Equal(0.5))
		Expect(sv.Service.Censored).To(Equal(1))
		Expect(*sv.Service.MedianS).To(Equal(2.0))
		// Timed at the probe's start, the same user counted as restored at 1.9 s (secondary curve).
		Expect(sv.SetupStarted.Points[1].TS).To(Equal(1.9))
		Expect(*sv.SetupStarted.MedianS).To(Equal(1.9))
		// Nobody answered by the bound: 0 of 2, with an exact band that is not [0, 0].
		Expect(sv.RestoredAtBound).To(Equal(0.0))
		Expect(sv.RestoredAtBoundBand[0]).To(Equal(0.0))
		Expect(sv.RestoredAtBoundBand[1]).To(BeNumerically("~", 1-0.158114, 1e-5), "Clopper–Pearson 0 of 2")
		// Fixed instants: 1, 3, 5 and 10 s; 30 s is past the 20 s observed while user 2 is censored.
		var ts []float64
		for _, rd := range sv.RestoredAt {
			ts = append(ts, rd.TS)
			Expect(rd.Hi-rd.Lo).To(BeNumerically(">", 0), "at %v s", rd.TS)
		}
		Expect(ts).To(Equal([]float64{1, 3, 5, 10}))
		Expect(sv.ReadingAt(1).Restored).To(Equal(0.0))
		Expect(sv.ReadingAt(3).Restored).To(Equal(0.5))
		Expect(sv.ReadingAt(30)).To(BeNil())
		b, err := os.ReadFile(filepath.Join(dir, "users.csv"))
		Expect(err).NotTo(HaveOccurred())
		rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
		Expect(err).NotTo(HaveOccurred())
		Expect(rows[0][8:]).To(Equal([]string{"mt_restore_s", "mo_restore_s", "restore_s", "censored", "setup_started_s"}))
		Expect(rows[1][0]).To(Equal(impu(1)))
		Expect(rows[1][8:]).To(Equal([]string{"1.65", "2", "2", "false", "1.9"}))
		Expect(rows[2][8:]).To(Equal([]string{"", "", "", "true", ""}))
		md, err := os.ReadFile(filepath.Join(dir, "report.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("| time to restore, setup started (probe placed) | median 1.900 s;"))
		Expect(string(md)).To(ContainSubstring("| detection, first and last node | 1.500 s and 1.500 s after the fault |"))
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
		Expect(sv.DetectedLastS).To(Equal(1.5), "the kill's detection, not the partition's")
		Expect(sv.BoundS).To(Equal(1.75))
		Expect(sv.RestoredAtBound).To(Equal(1.0), "user 1 answered again 1.65 s after the kill")
		md, err := os.ReadFile(filepath.Join(dir, "report.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("| affected users probed | 1 of 2 (the curves are theirs;"))
	})
})

var _ = Describe("Detection and the run's own bound", Label("unit"), func() {
	It("reports the first and the last node that noticed, and bounds the run by the last one", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "probe", "seed": 1, "start_ns": 1767000000000000000,
			"end_ns": 1767000030000000000, "duration_s": 30,
			"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 10, "for_s": 0}],
			"traffic": {"phones": 2, "reachability_interval_s": 0.5}}`)
		r.register(1, 0.1, "initial", "pcscf1", "scscf1", "ok")
		r.event("lab", "fault", 10, map[string]any{"fault": "kill", "target": "pcscf1"})
		r.event("scscf1", "peer_state", 11.2, map[string]any{"peer": "pcscf1.ims.test", "state": "down"})
		r.event("bac", "peer_state", 11.8, map[string]any{"peer": "pcscf1.ims.test", "state": "down"})
		// Answered 2.2 s after the kill: after the first node noticed plus an interval (1.7 s), within the last's
		// (2.3 s).
		r.records = append(r.records, map[string]any{"type": "call", "impu": impu(9001), "call_id": "p1",
			"t_ns": at(12.1), "result": "ok", "direction": "mo", "duration_ms": 1.0, "probe": "mt",
			"probe_user": impu(1), "setup_ms_200": 100})
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		sv := s.Survival
		Expect(sv.DetectedFirstS).To(Equal(1.2))
		Expect(sv.DetectedLastS).To(Equal(1.8))
		Expect(sv.BoundS).To(Equal(2.3))
		Expect(sv.RestoredAtBound).To(Equal(1.0))
		// One user: its band says as little as one user can.
		Expect(sv.RestoredAtBoundBand).To(Equal([2]float64{0.025, 1}))
		first, last, ok := s.Detection()
		Expect([]any{first, last, ok}).To(Equal([]any{1.2, 1.8, true}))
	})

	It("reads a run without probes from its first fault, and says when nobody noticed", func() {
		s := &report.Summary{Faults: []report.Fault{{Target: "pcscf1", TimeToDetectS: map[string]float64{
			"bac": 1.9, "scscf1": 1.4, "scscf2": 2.6}}}}
		first, last, ok := s.Detection()
		Expect([]any{first, last, ok}).To(Equal([]any{1.4, 2.6, true}))
		s.Faults[0].TimeToDetectS = map[string]float64{}
		_, _, ok = s.Detection()
		Expect(ok).To(BeFalse())
		_, _, ok = (&report.Summary{}).Detection()
		Expect(ok).To(BeFalse(), "a baseline")
	})
})

// legacySummary is a summary.json survival as written before restoration was timed at the answer: mt, mo and
// service at the probes' start, service_answered at their answer, detected_s the last node's detection.
const legacySummary = `{"scenario": "pcscf-kill", "seed": 7,
  "mo": {"attempts": 4, "users_attempted": 2, "affected_users_with_success": 2, "taken_over_before_reregistration": 1},
  "faults": [{"kind": "kill", "target": "pcscf2",
  "t0_s": 20, "time_to_detect_s": {"bac": 2.0, "scscf1": 1.7}}],
  "time_to_detect_s": {"bac": 2.0, "scscf1": 1.7},
  "users": [
    {"impu": "sip:user0002@ims.test", "fault": "pcscf2", "t0_s": 20, "mt_restore_s": 0.1, "mo_restore_s": 0.2,
     "restore_s": 0.2, "probed": true},
    {"impu": "sip:user0004@ims.test", "fault": "pcscf2", "t0_s": 20, "mt_restore_s": 0.3, "restore_s": 0.3,
     "probed": true}],
  "survival": {"interval_s": 0.25, "users": 2, "not_probed": 0, "observed_s": 40, "detected_s": 2.0,
    "bound_s": 2.25, "restored_at_bound": 1,
    "mt": {"n": 2, "restored": 2, "censored": 0, "median_s": 0.1, "points": [{"t_s": 0, "restored": 0, "lo": 0,
      "hi": 0, "at_risk": 2, "events": 0}, {"t_s": 0.1, "restored": 0.5, "lo": 0.1, "hi": 0.9, "at_risk": 2,
      "events": 1}, {"t_s": 0.3, "restored": 1, "lo": 1, "hi": 1, "at_risk": 1, "events": 1}]},
    "mo": {"n": 1, "restored": 1, "censored": 0, "median_s": 0.2, "points": [{"t_s": 0, "restored": 0, "lo": 0,
      "hi": 0, "at_risk": 1, "events": 0}, {"t_s": 0.2, "restored": 1, "lo": 1, "hi": 1, "at_risk": 1, "events": 1}]},
    "service": {"n": 2, "restored": 2, "censored": 0, "median_s": 0.2, "points": [{"t_s": 0, "restored": 0,
      "lo": 0, "hi": 0, "at_risk": 2, "events": 0}, {"t_s": 0.2, "restored": 0.5, "lo": 0.1, "hi": 0.9,
      "at_risk": 2, "events": 1}, {"t_s": 0.3, "restored": 1, "lo": 1, "hi": 1, "at_risk": 1, "events": 1}]},
    "service_answered": {"n": 2, "restored": 2, "censored": 0, "median_s": 2.1, "points": [{"t_s": 0,
      "restored": 0, "lo": 0, "hi": 0, "at_risk": 2, "events": 0}, {"t_s": 2.1, "restored": 0.5, "lo": 0.1,
      "hi": 0.9, "at_risk": 2, "events": 1}, {"t_s": 3.4, "restored": 1, "lo": 1, "hi": 1, "at_risk": 1,
      "events": 1}]}}}`

var _ = Describe("Older summaries", Label("unit"), func() {
	It("are read at the answer: service_answered becomes service, the probe-start curve setup_started, and survival.legacy says so", func() {
		var s report.Summary
		Expect(json.Unmarshal([]byte(legacySummary), &s)).To(Succeed())
		sv := s.Survival
		Expect(sv.TimedAt).To(Equal("answer"))
		Expect(sv.Legacy).To(Equal(report.LegacySurvival))
		Expect(*sv.Service.MedianS).To(Equal(2.1), "the old service_answered")
		Expect(*sv.SetupStarted.MedianS).To(Equal(0.2), "the old service, timed at the probes' start")
		Expect(sv.MT.N).To(BeZero(), "MT alone was timed at the probes' start: dropped")
		Expect(sv.MO.N).To(BeZero())
		// Was 1 at the probes' start; at the answer half of them were served by the 2.25 s bound.
		Expect(sv.RestoredAtBound).To(Equal(0.5), "one of two answered at 2.1 s")
		Expect(sv.DetectedFirstS).To(Equal(1.7))
		Expect(sv.DetectedLastS).To(Equal(2.0))
		Expect(sv.BoundS).To(Equal(2.25))
		Expect(sv.ReadingAt(5).Restored).To(Equal(1.0))
		Expect(sv.ReadingAt(5).Lo).To(BeNumerically("~", 0.158114, 1e-5), "Clopper–Pearson 2 of 2, not [1, 1]")
		Expect(sv.ReadingAt(1).Restored).To(Equal(0.0))
		for _, u := range s.Users {
			Expect(u.MTRestoreS).To(BeNil(), u.IMPU)
			Expect(u.MORestoreS).To(BeNil(), u.IMPU)
			Expect(u.RestoreS).To(BeNil(), u.IMPU)
			Expect(u.Probed).To(BeTrue())
			Expect(u.Censored).To(BeFalse())
		}
		Expect(*s.Users[0].SetupStartedS).To(Equal(0.2))
		Expect(s.MO.UsersTested).To(Equal(2), "written before users_tested: every attempting user was its denominator")
		// Written out again and read back, it is not converted a second time.
		b, err := json.Marshal(&s)
		Expect(err).NotTo(HaveOccurred())
		var again report.Summary
		Expect(json.Unmarshal(b, &again)).To(Succeed())
		Expect(again.Survival).To(Equal(sv))
		Expect(again.Users).To(Equal(s.Users))
	})

	It("without service_answered have no answer-timed curve rather than a mislabelled one", func() {
		old := strings.Replace(legacySummary, `"service_answered"`, `"ignored"`, 1)
		var s report.Summary
		Expect(json.Unmarshal([]byte(old), &s)).To(Succeed())
		Expect(s.Survival.Service.N).To(BeZero())
		Expect(s.Survival.RestoredAtBound).To(BeZero())
		Expect(s.Survival.RestoredAt).To(BeEmpty())
		Expect(s.Survival.Legacy).To(ContainSubstring("no curve timed at the answer"))
		Expect(*s.Survival.SetupStarted.MedianS).To(Equal(0.2))
	})

	It("refuse malformed survival with an error, not a crash", func() {
		var s report.Summary
		err := json.Unmarshal([]byte(`{"survival": {"service": {"n": "two"}}}`), &s)
		Expect(err).To(HaveOccurred())
	})
})

var _ = Describe("The published pcscf-kill study, re-read at the answer", Label("unit"), func() {
	It("has the quasi-pool's restored_at_bound near 0.15, not the 1 it had at the probes' start", func() {
		// The committed summaries predate survival.timed_at (docs/results/study-published, 20 runs per scheme).
		files, err := filepath.Glob("../../../docs/results/study-published/pcscf-kill/quasi-pool/rep*/summary.json")
		Expect(err).NotTo(HaveOccurred())
		Expect(files).To(HaveLen(20), "the committed runs of docs/results/study-published")
		var atBound, at5, median, setup float64
		for _, f := range files {
			b, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			var s report.Summary
			Expect(json.Unmarshal(b, &s)).To(Succeed(), f)
			sv := s.Survival
			Expect(sv.Legacy).To(Equal(report.LegacySurvival), f)
			Expect(sv.BoundS).To(BeNumerically("~", sv.DetectedLastS+sv.IntervalS, 1e-6), f)
			Expect(sv.DetectedFirstS).To(BeNumerically("<=", sv.DetectedLastS), f)
			Expect(sv.RestoredAtBoundBand[1]-sv.RestoredAtBoundBand[0]).To(BeNumerically(">", 0), f)
			for _, rd := range sv.RestoredAt {
				Expect(rd.Hi-rd.Lo).To(BeNumerically(">", 0), "%s at %v s", f, rd.TS)
			}
			atBound += sv.RestoredAtBound
			at5 += sv.ReadingAt(5).Restored
			median += *sv.Service.MedianS
			setup += *sv.SetupStarted.MedianS
		}
		n := float64(len(files))
		// The figures, recomputed from the committed data: 0.15 at the bound, 0.983 by 5 s.
		Expect(atBound / n).To(BeNumerically("~", 0.150, 0.001))
		Expect(at5 / n).To(BeNumerically("~", 0.983, 0.001))
		Expect(median/n).To(BeNumerically("~", 2.753, 0.001), "median time to the answer")
		Expect(setup/n).To(BeNumerically("~", 0.281, 0.001), "median time to the probes' start")
	})
})
