package scenario_test

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// recomputeRestoration checks a run's restoration KPIs against an independent recomputation: each probed user's
// answer times from the run's records.jsonl alone (the caller's record of every probe call after the fault: its
// start plus its setup time to the 200), the shares and bands from closed forms (every probed user has the same
// fault and is censored only at the end of the run), and the bound from the nodes' peer_state events. It checks
// users.csv, survival.restored_at_bound, every survival.restored_at point and band, the median and
// bound = last detection + one probe interval.
func recomputeRestoration(s *shippedRun) {
	GinkgoHelper()
	sv := s.sum.Survival
	Expect(sv).NotTo(BeNil(), "summary.json has survival (the scenario probes the affected users)")
	Expect(sv.TimedAt).To(Equal("answer"))
	Expect(sv.Legacy).To(BeEmpty())

	// Per probed user: the answer of its first successful MT and MO probe, seconds from the fault.
	type times struct {
		mt, mo, mtSet, moSet *float64
		moProbed             bool
	}
	users := map[string]*times{}
	first := func(dst **float64, v float64) {
		if *dst == nil || v < **dst {
			*dst = &v
		}
	}
	for _, rec := range s.records {
		if rec.Type != "call" || rec.Direction != "mo" || rec.ProbeUser == "" || rec.TNs < s.faultNs {
			continue
		}
		u := users[rec.ProbeUser]
		if u == nil {
			u = &times{}
			users[rec.ProbeUser] = u
		}
		if rec.Probe == "mo" {
			u.moProbed = true
		}
		if rec.Result != "ok" || rec.Setup200 == nil {
			continue
		}
		start := float64(rec.TNs-s.faultNs) / 1e9
		ans := start + *rec.Setup200/1e3
		switch rec.Probe {
		case "mt":
			first(&u.mt, ans)
			first(&u.mtSet, start)
		case "mo":
			first(&u.mo, ans)
			first(&u.moSet, start)
		}
	}
	Expect(users).NotTo(BeEmpty(), "records.jsonl holds probe calls after the fault")
	both := func(mt, mo *float64, moProbed bool) *float64 {
		if !moProbed {
			return mt
		}
		if mt == nil || mo == nil {
			return nil
		}
		v := math.Max(*mt, *mo)
		return &v
	}
	var restored []float64 // the restored users' service times
	for _, u := range users {
		if v := both(u.mt, u.mo, u.moProbed); v != nil {
			restored = append(restored, *v)
		}
	}
	slices.Sort(restored)
	n := len(users)
	Expect(sv.Users).To(Equal(n), "probed users")

	// users.csv, row by row.
	f, err := os.Open(filepath.Join(s.dir, "users.csv"))
	Expect(err).NotTo(HaveOccurred())
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	Expect(err).NotTo(HaveOccurred())
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"impu", "mt_restore_s", "mo_restore_s", "restore_s", "censored", "setup_started_s"} {
		Expect(col).To(HaveKey(h), "users.csv column %s", h)
	}
	seen := 0
	same := func(cell string, want *float64, what, impu string) {
		if want == nil {
			Expect(cell).To(BeEmpty(), "%s %s: none in records.jsonl", impu, what)
			return
		}
		got, err := strconv.ParseFloat(cell, 64)
		Expect(err).NotTo(HaveOccurred(), "%s %s %q", impu, what, cell)
		Expect(got).To(BeNumerically("~", *want, 2e-6), "%s %s", impu, what)
	}
	for _, row := range rows[1:] {
		impu := row[col["impu"]]
		u := users[impu]
		if u == nil {
			Expect(row[col["censored"]]).To(BeEmpty(), "%s was not probed", impu)
			continue
		}
		seen++
		service := both(u.mt, u.mo, u.moProbed)
		same(row[col["mt_restore_s"]], u.mt, "MT answered", impu)
		if u.moProbed {
			same(row[col["mo_restore_s"]], u.mo, "MO answered", impu)
		}
		same(row[col["restore_s"]], service, "restore_s (answered)", impu)
		same(row[col["setup_started_s"]], both(u.mtSet, u.moSet, u.moProbed), "setup_started_s", impu)
		Expect(row[col["censored"]]).To(Equal(strconv.FormatBool(service == nil)), impu)
	}
	Expect(seen).To(Equal(n), "every probed user has its row")

	// Detection and the bound, from the nodes' own peer_state events.
	var detFirst, detLast float64
	noticed := 0
	for node := range s.events {
		if node == s.dead {
			continue
		}
		for _, e := range s.ownEvents(node, "peer_state", s.faultNs, math.MaxInt64) {
			if e.State == "down" && nodeOfHost(e.Peer) == s.dead {
				d := float64(e.TNs-s.faultNs) / 1e9
				if noticed == 0 || d < detFirst {
					detFirst = d
				}
				detLast = math.Max(detLast, d)
				noticed++
				break
			}
		}
	}
	Expect(noticed).To(BeNumerically(">", 0), "some node noticed %s", s.dead)
	Expect(sv.DetectedFirstS).To(BeNumerically("~", detFirst, 2e-6))
	Expect(sv.DetectedLastS).To(BeNumerically("~", detLast, 2e-6))
	interval := s.sc.Traffic.Reachability.Interval.Seconds()
	Expect(sv.IntervalS).To(Equal(interval))
	Expect(sv.BoundS).To(BeNumerically("~", detLast+interval, 2e-6), "bound = last detection + one probe interval")

	// The shares: nobody is censored before the end, so the curve is the share restored, k of n.
	k := func(t float64) int {
		c := 0
		for _, v := range restored {
			if v <= t+1e-9 {
				c++
			}
		}
		return c
	}
	const z = 1.959963984540054
	band := func(k int) (lo, hi float64) {
		switch k {
		case 0: // Clopper–Pearson, 0 of n
			return 0, 1 - math.Pow(0.025, 1/float64(n))
		case n: // n of n
			return math.Pow(0.025, 1/float64(n)), 1
		}
		// Greenwood without censoring, g = k / (n (n − k)), on the log(−log) scale.
		sv := float64(n-k) / float64(n)
		w := z * math.Sqrt(float64(k)/float64(n*(n-k))) / math.Abs(math.Log(sv))
		return 1 - math.Pow(sv, math.Exp(-w)), 1 - math.Pow(sv, math.Exp(w))
	}
	kb := k(sv.BoundS)
	Expect(sv.RestoredAtBound).To(BeNumerically("~", float64(kb)/float64(n), 1e-6), "%d of %d answered by %.3f s", kb, n,
		sv.BoundS)
	lo, hi := band(kb)
	Expect(sv.RestoredAtBoundBand[0]).To(BeNumerically("~", lo, 1e-5))
	Expect(sv.RestoredAtBoundBand[1]).To(BeNumerically("~", hi, 1e-5))
	observed := float64(s.endNs()-s.faultNs) / 1e9
	Expect(sv.ObservedS).To(BeNumerically("~", observed, 1))
	var want []float64
	for _, t := range report.FixedInstants {
		if t <= sv.ObservedS || len(restored) == n {
			want = append(want, t)
		}
	}
	var got []float64
	for _, rd := range sv.RestoredAt {
		got = append(got, rd.TS)
		kt := k(rd.TS)
		Expect(rd.Restored).To(BeNumerically("~", float64(kt)/float64(n), 1e-6), "restored_at %g s", rd.TS)
		lo, hi := band(kt)
		Expect(rd.Lo).To(BeNumerically("~", lo, 1e-5), "restored_at %g s, lower", rd.TS)
		Expect(rd.Hi).To(BeNumerically("~", hi, 1e-5), "restored_at %g s, upper", rd.TS)
		if n > 1 {
			Expect(rd.Hi-rd.Lo).To(BeNumerically(">", 0), "restored_at %g s has a band", rd.TS)
		}
	}
	Expect(got).To(Equal(want), "the fixed instants within the observation")

	GinkgoWriter.Printf("restoration at the answer, recomputed: %d probed users, %d answered; detection %.3f–%.3f s, "+
		"bound %.3f s, restored_at_bound %.3f [%.3f, %.3f]; restored_at %v\n", n, len(restored), detFirst, detLast,
		sv.BoundS, sv.RestoredAtBound, sv.RestoredAtBoundBand[0], sv.RestoredAtBoundBand[1], sv.RestoredAt)
	if sv.Service.MedianS != nil && sv.SetupStarted.MedianS != nil {
		GinkgoWriter.Printf("median %.3f s at the answer, %.3f s at the probes' start\n", *sv.Service.MedianS,
			*sv.SetupStarted.MedianS)
	}

	// The median: the first answer by which half of the probed users were served.
	if 2*len(restored) >= n {
		m := restored[(n+1)/2-1]
		Expect(sv.Service.MedianS).NotTo(BeNil())
		Expect(*sv.Service.MedianS).To(BeNumerically("~", m, 2e-6), "median time to the answer")
	} else {
		Expect(sv.Service.MedianS).To(BeNil(), "fewer than half were answered")
	}
}
