package report

import (
	"encoding/json"
	"math"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
	"gonum.org/v1/plot/plotter"
)

// z95 is the 0.975 quantile of the standard normal distribution (two-sided 95 % band).
const z95 = 1.959963984540054

// KMPoint is one step of a Kaplan–Meier curve of the share of users restored.
type KMPoint struct {
	// TS is the time since the fault (s); the curve holds its value from TS to the next point.
	TS float64 `json:"t_s"`
	// Restored is 1 − S(t), the estimated share of users restored by TS.
	Restored float64 `json:"restored"`
	// Lo and Hi bound Restored with 95 % confidence (Greenwood's variance, log(−log) transform; where that band
	// has zero width, at 0 or 1, Clopper–Pearson on the users known at TS).
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
	// AtRisk is the number of users not yet restored nor censored just before TS; Events those restored at TS.
	AtRisk int `json:"at_risk"`
	Events int `json:"events"`
}

// KMCurve is the Kaplan–Meier estimate of "share of users restored vs time since the fault", with users not
// restored by the end of the observation right-censored.
type KMCurve struct {
	N        int `json:"n"`        // users
	Restored int `json:"restored"` // users restored within the observation
	Censored int `json:"censored"` // users not restored by the end of the observation
	// MedianS is the time by which half of the users are estimated restored (absent if the curve never reaches 0.5).
	MedianS *float64 `json:"median_s,omitempty"`
	// Points starts at t = 0 (nobody restored) and has one point per distinct restoration time.
	Points []KMPoint `json:"points"`
}

// KaplanMeier estimates the curve from each user's time (restoration, or censoring when !event[i]). At a time
// where users are restored and others censored, the censored ones count as at risk (the usual convention).
func KaplanMeier(times []float64, event []bool) KMCurve {
	c := KMCurve{N: len(times), Points: []KMPoint{{TS: 0, AtRisk: len(times)}}}
	if c.N > 0 {
		// Until the first restoration nobody is restored, which n users bound by Clopper–Pearson, not by [0, 0].
		_, hi := clopperPearson(0, c.N)
		c.Points[0].Hi = round(hi)
	}
	idx := make([]int, len(times))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return times[idx[a]] < times[idx[b]] })
	s, greenwood := 1.0, 0.0
	atRisk := len(times)
	for k := 0; k < len(idx); {
		t := times[idx[k]]
		d, gone := 0, 0
		for ; k < len(idx) && times[idx[k]] == t; k++ {
			gone++
			if event[idx[k]] {
				d++
			}
		}
		if d > 0 {
			s *= 1 - float64(d)/float64(atRisk)
			if atRisk > d {
				greenwood += float64(d) / float64(atRisk*(atRisk-d))
			}
			c.Restored += d
			// Known at t: the users restored by then and those still at risk after it.
			lo, hi := bandOf(1-s, greenwood, c.Restored+atRisk-d)
			c.Points = append(c.Points, KMPoint{TS: round(t), Restored: round(1 - s), Lo: round(lo), Hi: round(hi),
				AtRisk: atRisk, Events: d})
			if c.MedianS == nil && s <= 0.5 {
				m := round(t)
				c.MedianS = &m
			}
		}
		atRisk -= gone
	}
	c.Censored = c.N - c.Restored
	return c
}

// kmBand is the 95 % confidence interval of the survival S with Greenwood sum g, on the log(−log S) scale
// (Kalbfleisch & Prentice), which stays inside [0, 1]. It has zero width where S is 0 or 1 (kmPoint then falls back
// to Clopper–Pearson).
func kmBand(s, g float64) (lo, hi float64) {
	switch {
	case s <= 0:
		return 0, 0
	case s >= 1 || g == 0:
		return s, s
	}
	ls := math.Log(s)
	w := z95 * math.Sqrt(g) / math.Abs(ls)
	return math.Pow(s, math.Exp(w)), math.Pow(s, math.Exp(-w))
}

// clopperPearson is the exact 95 % binomial interval of k successes in n trials.
func clopperPearson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	const alpha = 0.05
	lo, hi = 0, 1
	if k > 0 {
		lo = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(alpha / 2)
	}
	if k < n {
		hi = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - alpha/2)
	}
	return lo, hi
}

// bandOf is the 95 % band of the share restored r (= 1 − S) with Greenwood sum g, where known is the number of
// users whose state at that instant is known (restored by then, or still at risk after it). Greenwood's band has
// zero width where nobody or everybody known is restored; Clopper–Pearson on the known users replaces it there, so
// that no share of more than one user claims certainty ([1, 1] from 20 users would say every other user would be
// restored too).
func bandOf(r, g float64, known int) (lo, hi float64) {
	l, h := kmBand(1-r, g)
	lo, hi = 1-h, 1-l
	if hi-lo > 0 || known <= 0 {
		return lo, hi
	}
	k := int(math.Round(r * float64(known)))
	return clopperPearson(k, known)
}

// fixBands gives every step of a curve written before the Clopper–Pearson fallback existed (older summaries) a band
// of non-zero width where Greenwood's had none, as KaplanMeier does now.
func (c *KMCurve) fixBands() {
	if len(c.Points) > 0 && c.Points[0].Hi == 0 && c.Points[0].AtRisk > 0 {
		_, hi := clopperPearson(0, c.Points[0].AtRisk)
		c.Points[0].Hi = round(hi)
	}
	restored := 0
	for i := 1; i < len(c.Points); i++ {
		p := &c.Points[i]
		restored += p.Events
		if p.Hi-p.Lo > 0 {
			continue
		}
		known := restored + p.AtRisk - p.Events
		if known <= 0 {
			continue
		}
		lo, hi := clopperPearson(int(math.Round(p.Restored*float64(known))), known)
		p.Lo, p.Hi = round(lo), round(hi)
	}
}

// At returns the share restored at t (the step function).
func (c *KMCurve) At(t float64) float64 {
	v := 0.0
	for _, p := range c.Points {
		if p.TS > t {
			break
		}
		v = p.Restored
	}
	return v
}

// Reading is the curve read at one instant: the share restored by TS and its 95 % band.
type Reading struct {
	TS       float64 `json:"t_s"`
	Restored float64 `json:"restored"`
	Lo       float64 `json:"lo"`
	Hi       float64 `json:"hi"`
}

// Read returns the share restored at t with its band: the band of the curve's last step at or before t, or, before
// the first restoration, Clopper–Pearson on 0 of the users (Greenwood has no variance there).
func (c *KMCurve) Read(t float64) Reading {
	rd := Reading{TS: round(t)}
	known := c.N
	if len(c.Points) > 0 {
		known = c.Points[0].AtRisk
	}
	found := false
	for _, p := range c.Points[min(1, len(c.Points)):] {
		if p.TS > t {
			break
		}
		rd.Restored, rd.Lo, rd.Hi, found = p.Restored, p.Lo, p.Hi, true
	}
	if !found {
		lo, hi := clopperPearson(0, known)
		rd.Lo, rd.Hi = round(lo), round(hi)
	}
	return rd
}

// FixedInstants are the instants after the fault at which every run's curve is read (Survival.RestoredAt), the same
// for every scheme: a scheme's own bound moves with its detection and is no common yardstick.
var FixedInstants = []float64{1, 3, 5, 10, 30}

// TimedAtAnswer is Survival.TimedAt of a summary whose restoration is timed at the probes' answer.
const TimedAtAnswer = "answer"

// Survival is "time to restore" of the affected users, measured by the reachability probes (docs/report.md). A
// user is restored when a call to it (MT) is answered again and, for a user that places calls, a call from it
// (MO): per user, the time from its fault to the answer (200) of its first successful MT probe, of its first
// successful MO probe, and to both ("service"). SetupStarted is service timed at those probes' start instead: a
// probe placed just after the fault may connect seconds later through a failover inside the network, and the
// user was not served before it did.
type Survival struct {
	// TimedAt is "answer" (TimedAtAnswer). Summaries written before it existed timed MT, MO and service at the
	// probes' start; they are converted when read (Summary.UnmarshalJSON) and Legacy says what was done.
	TimedAt string `json:"timed_at"`
	Legacy  string `json:"legacy,omitempty"`
	// IntervalS is the probe schedule (s).
	IntervalS float64 `json:"interval_s"`
	// Users is the number of affected users probed; NotProbed the affected users without any probe (outside
	// the scenario's reachability.sample, or behind a fault kind that starts no probes).
	Users     int `json:"users"`
	NotProbed int `json:"not_probed"`
	// ObservedS is the observation window: from the (first) fault to the end of the run.
	ObservedS float64 `json:"observed_s"`
	// DetectedFirstS and DetectedLastS are when the first and the last node that noticed the probed fault did
	// (the first fault, in time, whose users are probed; min and max of its time_to_detect_s). From the last on,
	// every node that routes to the faulted one avoids it. BoundS is this run's own bound, the time its design
	// allows: DetectedLastS plus one probe interval. RestoredAtBound is the share of users whose service is
	// restored by then (Kaplan–Meier) and RestoredAtBoundBand its 95 % band.
	DetectedFirstS      float64    `json:"detected_first_s"`
	DetectedLastS       float64    `json:"detected_last_s"`
	BoundS              float64    `json:"bound_s"`
	RestoredAtBound     float64    `json:"restored_at_bound"`
	RestoredAtBoundBand [2]float64 `json:"restored_at_bound_band"`
	// RestoredAt reads the service curve at FixedInstants, the same for every scheme; an instant past the
	// observation is left out while some user is censored (the curve says nothing there).
	RestoredAt []Reading `json:"restored_at"`
	MT         KMCurve   `json:"mt"`
	MO         KMCurve   `json:"mo"`
	Service    KMCurve   `json:"service"`
	// SetupStarted is service timed at the start of each user's first successful probes ("setup started, probe
	// placed"): secondary, the gap to Service is the setup delay of the probes that got through.
	SetupStarted KMCurve `json:"setup_started"`
}

// readAt fills RestoredAtBound, its band and RestoredAt from Service and BoundS.
func (sv *Survival) readAt() {
	sv.RestoredAt = []Reading{}
	sv.RestoredAtBound, sv.RestoredAtBoundBand = 0, [2]float64{}
	if sv.Service.N == 0 {
		return
	}
	if sv.BoundS > 0 {
		rd := sv.Service.Read(sv.BoundS)
		sv.RestoredAtBound, sv.RestoredAtBoundBand = rd.Restored, [2]float64{rd.Lo, rd.Hi}
	}
	for _, t := range FixedInstants {
		if rd := sv.ReadingAt(t); rd != nil {
			sv.RestoredAt = append(sv.RestoredAt, *rd)
		}
	}
}

// ReadingAt reads the service curve at t with its band: nil for an empty curve, or past the observation while
// some user is censored (the curve says nothing there).
func (sv *Survival) ReadingAt(t float64) *Reading {
	if sv.Service.N == 0 || t > sv.ObservedS && sv.Service.Censored > 0 {
		return nil
	}
	rd := sv.Service.Read(t)
	return &rd
}

// userRestore is one affected user's probe outcome.
type userRestore struct {
	mt, mo       *float64 // seconds from the fault to the answer of the first successful probe
	mtSet, moSet *float64 // … to its start
	moProbed     bool
	censorS      float64
	probed       bool
}

// both is a user's service time from its MT and MO times: MT alone for a user not probed MO, else the later of
// the two (nil while either is missing).
func both(mt, mo *float64, moProbed bool) *float64 {
	if !moProbed {
		return mt
	}
	if mt == nil || mo == nil {
		return nil
	}
	v := max(*mt, *mo)
	return &v
}

// survival fills Summary.Survival and the users' restore times from the probe records.
func (a *analysis) survival(r *run) {
	if len(r.probes) == 0 || len(a.s.Users) == 0 {
		return
	}
	var interval float64
	var tr struct {
		Interval float64 `json:"reachability_interval_s"`
	}
	if json.Unmarshal(r.scenario.Traffic, &tr) == nil {
		interval = tr.Interval
	}
	end := r.scenario.EndNs
	if end == 0 {
		end = r.lastTime()
	}
	res := map[string]*userRestore{}
	for impu, u := range a.affected {
		res[impu] = &userRestore{censorS: round(float64(end-u.t0Ns) / 1e9)}
	}
	first := func(dst **float64, t float64) {
		if *dst == nil || t < **dst {
			*dst = &t
		}
	}
	for i := range r.probes {
		p := &r.probes[i]
		if p.Type != "call" || p.Direction != "mo" || p.ProbeUser == "" {
			continue // the caller's record of each probe call tells the outcome
		}
		ur, u := res[p.ProbeUser], a.affected[p.ProbeUser]
		if ur == nil || p.TNs < u.t0Ns {
			continue
		}
		ur.probed = true
		if p.Probe == "mo" {
			ur.moProbed = true
		}
		if !p.ok() || p.Setup200 == nil {
			continue
		}
		// Served when the call is answered: a probe placed just after the fault that connects seconds later
		// through a failover restored nobody before its 200.
		start := float64(p.TNs-u.t0Ns) / 1e9
		ans := round(start + *p.Setup200/1e3)
		start = round(start)
		switch p.Probe {
		case "mt":
			first(&ur.mt, ans)
			first(&ur.mtSet, start)
		case "mo":
			first(&ur.mo, ans)
			first(&ur.moSet, start)
		}
	}
	sv := &Survival{TimedAt: TimedAtAnswer, IntervalS: interval}
	var mtT, moT, svT, setT []float64
	var mtE, moE, svE, setE []bool
	for i := range a.s.Users {
		k := &a.s.Users[i]
		ur := res[k.IMPU]
		if ur == nil || !ur.probed {
			sv.NotProbed++
			continue
		}
		sv.Users++
		sv.ObservedS = max(sv.ObservedS, ur.censorS)
		add := func(ts *[]float64, es *[]bool, v *float64) {
			if v != nil {
				*ts, *es = append(*ts, *v), append(*es, true)
			} else {
				*ts, *es = append(*ts, ur.censorS), append(*es, false)
			}
		}
		add(&mtT, &mtE, ur.mt)
		if ur.moProbed {
			add(&moT, &moE, ur.mo)
		}
		service := both(ur.mt, ur.mo, ur.moProbed)
		setup := both(ur.mtSet, ur.moSet, ur.moProbed)
		add(&svT, &svE, service)
		add(&setT, &setE, setup)
		k.MTRestoreS, k.MORestoreS, k.RestoreS, k.SetupStartedS = ur.mt, ur.mo, service, setup
		k.Censored = service == nil
		k.Probed = true
	}
	if sv.Users == 0 {
		return
	}
	sv.MT, sv.MO, sv.Service = KaplanMeier(mtT, mtE), KaplanMeier(moT, moE), KaplanMeier(svT, svE)
	sv.SetupStarted = KaplanMeier(setT, setE)
	if f := probedFault(a.s); f != nil {
		sv.DetectedFirstS, sv.DetectedLastS = detectionSpan(f)
		sv.BoundS = round(sv.DetectedLastS + interval)
	}
	sv.readAt()
	a.s.Survival = sv
}

// Detection is the first and the last node's time to detect the run's fault: the probed fault's (survival) when
// the run has probes, else the first fault's; ok is false when no node noticed any.
func (s *Summary) Detection() (first, last float64, ok bool) {
	if sv := s.Survival; sv != nil && sv.DetectedLastS > 0 {
		return sv.DetectedFirstS, sv.DetectedLastS, true
	}
	if len(s.Faults) == 0 || len(s.Faults[0].TimeToDetectS) == 0 {
		return 0, 0, false
	}
	first, last = detectionSpan(&s.Faults[0])
	return first, last, true
}

// detectionSpan is the first and the last node's time to detect fault f (0, 0 when no node noticed it).
func detectionSpan(f *Fault) (first, last float64) {
	n := 0
	for _, d := range f.TimeToDetectS {
		if n == 0 || d < first {
			first = d
		}
		last = max(last, d)
		n++
	}
	return first, last
}

// steps turns the curve into a step line ending at end, and the band into a polygon (lo and hi steps).
func (c *KMCurve) steps(end float64) (line, band plotter.XYs) {
	var lo, hi plotter.XYs
	for i, p := range c.Points {
		next := end
		if i+1 < len(c.Points) {
			next = c.Points[i+1].TS
		}
		line = append(line, plotter.XY{X: p.TS, Y: p.Restored}, plotter.XY{X: next, Y: p.Restored})
		lo = append(lo, plotter.XY{X: p.TS, Y: p.Lo}, plotter.XY{X: next, Y: p.Lo})
		hi = append(hi, plotter.XY{X: p.TS, Y: p.Hi}, plotter.XY{X: next, Y: p.Hi})
	}
	band = append(band, lo...)
	for i := len(hi) - 1; i >= 0; i-- {
		band = append(band, hi[i])
	}
	return line, band
}

// probedFault is the fault the bound of the restoration curve counts from: the first, in time, that affected a
// probed user. Probes follow a kill, a pause or a stop; a fault whose users are not probed (a partition between
// other nodes before the kill, studies/risk.yaml) has no say in the bound. Nil when no probed user has a fault.
func probedFault(s *Summary) *Fault {
	probed := map[string]bool{}
	for _, u := range s.Users {
		if u.Probed {
			probed[u.Fault] = true
		}
	}
	var first *Fault
	for i := range s.Faults {
		f := &s.Faults[i]
		if probed[f.Target] && (first == nil || f.T0S < first.T0S) {
			first = f
		}
	}
	return first
}
