package report

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

// z95 is the 0.975 quantile of the standard normal distribution (two-sided 95 % band).
const z95 = 1.959963984540054

// KMPoint is one step of a Kaplan–Meier curve of the share of users restored.
type KMPoint struct {
	// TS is the time since the fault (s); the curve holds its value from TS to the next point.
	TS float64 `json:"t_s"`
	// Restored is 1 − S(t), the estimated share of users restored by TS.
	Restored float64 `json:"restored"`
	// Lo and Hi bound Restored with 95 % confidence (Greenwood's variance, log(−log) transform).
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
			lo, hi := kmBand(s, greenwood)
			c.Points = append(c.Points, KMPoint{TS: round(t), Restored: round(1 - s), Lo: round(1 - hi), Hi: round(1 - lo),
				AtRisk: atRisk, Events: d})
			c.Restored += d
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
// (Kalbfleisch & Prentice), which stays inside [0, 1].
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

// Survival is "time to restore" of the affected users, measured by the reachability probes
// (docs/report.md): per user, the time from its fault to the start of its first successful (answered) MT
// probe, of its first successful MO probe (users that place calls), and to both ("service").
type Survival struct {
	// IntervalS is the probe schedule (s).
	IntervalS float64 `json:"interval_s"`
	// Users is the number of affected users probed; NotProbed the affected users without any probe (outside
	// the scenario's reachability.sample, or behind a fault kind that starts no probes).
	Users     int `json:"users"`
	NotProbed int `json:"not_probed"`
	// ObservedS is the observation window: from the (first) fault to the end of the run.
	ObservedS float64 `json:"observed_s"`
	// DetectedS is when the last node that noticed the first fault whose users are probed did (max of its
	// time_to_detect_s): from then on every node that routes to the faulted one avoids it. BoundS is the time the
	// design allows: DetectedS plus one probe interval. RestoredAtBound is the share of users whose service is restored by then
	// (Kaplan–Meier).
	DetectedS       float64 `json:"detected_s"`
	BoundS          float64 `json:"bound_s"`
	RestoredAtBound float64 `json:"restored_at_bound"`
	MT              KMCurve `json:"mt"`
	MO              KMCurve `json:"mo"`
	Service         KMCurve `json:"service"`
	// ServiceAnswered is Service with each user restored at the answer (200) of its first successful MT and MO
	// probes rather than at their start: a probe placed just after the fault can connect through a failover
	// inside the network seconds later. The gap between the two curves is that setup delay.
	ServiceAnswered KMCurve `json:"service_answered"`
}

// userRestore is one affected user's probe outcome.
type userRestore struct {
	mt, mo       *float64 // seconds from the fault to the start of the first successful probe
	mtAns, moAns *float64 // … to its answer
	moProbed     bool
	censorS      float64
	probed       bool
	service      *float64
	serviceEvent bool
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
		// Reachable at the instant the successful probe was placed: a call placed then got through (its setup
		// time, a failover included, is the setup latency's business, not the restoration's).
		t := round(float64(p.TNs-u.t0Ns) / 1e9)
		ans := round(t + *p.Setup200/1e3)
		switch p.Probe {
		case "mt":
			first(&ur.mt, t)
			first(&ur.mtAns, ans)
		case "mo":
			first(&ur.mo, t)
			first(&ur.moAns, ans)
		}
	}
	sv := &Survival{IntervalS: interval}
	var mtT, moT, svT, ansT []float64
	var mtE, moE, svE, ansE []bool
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
		service := ur.mt
		if ur.moProbed {
			service = nil
			if ur.mt != nil && ur.mo != nil {
				v := max(*ur.mt, *ur.mo)
				service = &v
			}
		}
		add(&svT, &svE, service)
		answered := ur.mtAns
		if ur.moProbed {
			answered = nil
			if ur.mtAns != nil && ur.moAns != nil {
				v := max(*ur.mtAns, *ur.moAns)
				answered = &v
			}
		}
		add(&ansT, &ansE, answered)
		k.MTRestoreS, k.MORestoreS, k.RestoreS = ur.mt, ur.mo, service
		k.Censored = service == nil
		k.Probed = true
	}
	if sv.Users == 0 {
		return
	}
	sv.MT, sv.MO, sv.Service = KaplanMeier(mtT, mtE), KaplanMeier(moT, moE), KaplanMeier(svT, svE)
	sv.ServiceAnswered = KaplanMeier(ansT, ansE)
	if f := a.probedFault(); f != nil {
		for _, d := range f.TimeToDetectS {
			sv.DetectedS = max(sv.DetectedS, d)
		}
		sv.BoundS = round(sv.DetectedS + interval)
		sv.RestoredAtBound = sv.Service.At(sv.BoundS)
	}
	a.s.Survival = sv
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

// plotRestore draws the share of affected users restored vs time since the fault (Kaplan–Meier), for service
// (MT and MO) with its 95 % band, and MT and MO alone; the design's bound is marked. It returns SVG and PNG.
func plotRestore(sv *Survival) (svg, png []byte, err error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Affected users restored vs time since the fault (Kaplan–Meier, probes every %g s)",
		sv.IntervalS)
	p.X.Label.Text = "time since the fault (s)"
	p.Y.Label.Text = "share of users restored"
	p.Y.Min, p.Y.Max = 0, 1.02
	p.Legend.Top = false
	p.Legend.Left = false
	// The whole observation when someone is censored (the plateau is the point); else up to the last restoration.
	end := sv.ObservedS
	if sv.MT.Censored+sv.MO.Censored+sv.Service.Censored+sv.ServiceAnswered.Censored == 0 {
		last := sv.BoundS
		for _, c := range []KMCurve{sv.MT, sv.MO, sv.Service, sv.ServiceAnswered} {
			if n := len(c.Points); n > 0 {
				last = max(last, c.Points[n-1].TS)
			}
		}
		end = min(end, 1.25*last+sv.IntervalS)
	}
	p.X.Min, p.X.Max = 0, end
	colMT, colMO := figure.Blue, figure.Green
	for _, cv := range []struct {
		name string
		c    *KMCurve
		col  color.RGBA
		band bool
	}{
		{"MT and MO (service)", &sv.Service, colAffected, true},
		{"MT", &sv.MT, colMT, false},
		{"MO", &sv.MO, colMO, false},
		{"MT and MO, at the probes' answer", &sv.ServiceAnswered, figure.Purple, false},
	} {
		if cv.c.N == 0 {
			continue
		}
		line, band := cv.c.steps(end)
		if cv.band {
			poly, err := plotter.NewPolygon(band)
			if err != nil {
				return nil, nil, fmt.Errorf("report: plot: %w", err)
			}
			poly.Color = color.NRGBA{R: cv.col.R, G: cv.col.G, B: cv.col.B, A: 0x40}
			poly.LineStyle.Width = 0
			p.Add(poly)
			p.Legend.Add("95 % band (Greenwood, log-log)", poly)
		}
		l, err := plotter.NewLine(line)
		if err != nil {
			return nil, nil, fmt.Errorf("report: plot: %w", err)
		}
		l.Color = cv.col
		l.Width = vg.Points(1.5)
		if !cv.band {
			l.Dashes = figure.CurveDash
			l.Width = vg.Points(1)
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s, n = %d (%d censored)", cv.name, cv.c.N, cv.c.Censored), l)
	}
	if sv.BoundS > 0 {
		b, err := plotter.NewLine(plotter.XYs{{X: sv.BoundS, Y: 0}, {X: sv.BoundS, Y: 1.02}})
		if err != nil {
			return nil, nil, fmt.Errorf("report: plot: %w", err)
		}
		b.Color = colFault
		b.Dashes = figure.HealDash
		p.Add(b)
		p.Legend.Add(fmt.Sprintf("detection + one probe interval (%.2f s)", sv.BoundS), b)
	}
	if svg, png, err = figure.SVGAndPNG(p, figure.Wide); err != nil {
		return nil, nil, fmt.Errorf("report: plot: %w", err)
	}
	return svg, png, nil
}

// probedFault is the fault the bound of the restoration curve counts from: the first, in time, that affected a
// probed user. Probes follow a kill, a pause or a stop; a fault whose users are not probed (a partition between
// other nodes before the kill, studies/risk.yaml) has no say in the bound. Nil when no probed user has a fault.
func (a *analysis) probedFault() *Fault {
	probed := map[string]bool{}
	for _, u := range a.s.Users {
		if u.Probed {
			probed[u.Fault] = true
		}
	}
	var first *Fault
	for i := range a.s.Faults {
		f := &a.s.Faults[i]
		if probed[f.Target] && (first == nil || f.T0S < first.T0S) {
			first = f
		}
	}
	return first
}
