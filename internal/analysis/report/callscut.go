package report

import (
	"encoding/json"
	"math"
)

// CallsCut counts the users' answered calls that were up when the first fault began (answered before it, not
// over by it) and what became of them, judged from both legs' records (docs/report.md, "Calls cut"):
//   - cut: a phone ended it as cut after the fault (a session refresh failed, or the callee heard none in time:
//     traffic.session_expires), or a BYE sent after the fault failed;
//   - survived: not cut, and an in-dialog request crossed the network after the fault (a session refresh or a
//     BYE answered 200, or the peer's BYE received);
//   - unknown: neither (no in-dialog request after the fault, or only a BYE given up at the end of the run).
type CallsCut struct {
	// SessionTimers: the run's phones refreshed their calls (traffic.session_expires); without them a cut call
	// shows only when its BYE fails.
	SessionTimers bool `json:"session_timers"`
	InProgress    int  `json:"in_progress"`
	Cut           int  `json:"cut"`
	Survived      int  `json:"survived"`
	Unknown       int  `json:"unknown"`
	// Share is Cut / (Cut + Survived): the share cut of the calls whose fate is known (absent: none known).
	Share *float64 `json:"share,omitempty"`
	// NoticedS is, per cut call, the seconds from the fault to the first phone that noticed the cut: the failed
	// refresh or the callee's expiry (cut_ns), or the end of the failed BYE.
	NoticedS *Percentiles `json:"noticed_s,omitempty"`
	// NoticedValuesS are those seconds, in order.
	NoticedValuesS []float64 `json:"noticed_values_s,omitempty"`
}

// callsCut judges the calls up at the first fault (nil when there was none).
func (a *analysis) callsCut(r *run) *CallsCut {
	t0 := a.firstT0
	out := &CallsCut{SessionTimers: r.trafficKeys().SessionExpiresS > 0}
	var noticed []float64
	for _, c := range groupCalls(r) {
		up := false
		for _, x := range []*record{c.mo, c.mt} {
			if x == nil || !x.ok() || x.Setup200 == nil {
				continue
			}
			answered := x.TNs + int64(math.Round(*x.Setup200*1e6))
			ended := answered + int64(math.Round(x.Duration*1e6))
			if answered < t0 && ended > t0 {
				up = true
			}
		}
		if !up {
			continue
		}
		out.InProgress++
		cutNs, survived := callFate(c, t0)
		switch {
		case cutNs > 0:
			out.Cut++
			noticed = append(noticed, round(float64(cutNs-t0)/1e9))
		case survived:
			out.Survived++
		default:
			out.Unknown++
		}
	}
	if out.InProgress == 0 {
		return out
	}
	out.Share = ratio(out.Cut, out.Cut+out.Survived)
	if len(noticed) > 0 {
		out.NoticedS = percentiles(noticed)
		out.NoticedValuesS = noticed
	}
	return out
}

// callFate reads a call up at t0 from its legs' records: when it was first noticed cut after t0 (0 = not cut),
// and whether an in-dialog request crossed the network after t0.
func callFate(c *call, t0 int64) (cutNs int64, survived bool) {
	first := func(t int64) {
		if t >= t0 && (cutNs == 0 || t < cutNs) {
			cutNs = t
		}
	}
	for _, x := range []*record{c.mo, c.mt} {
		if x == nil {
			continue
		}
		end := x.TNs + int64(math.Round((ptrOr(x.Setup200)+x.Duration)*1e6)) // the end of its BYE
		if x.Ended == "cut" && x.CutNs > 0 {
			first(x.CutNs)
		}
		byeSent := x.ByeResult != "" && x.Ended != "remote"
		switch {
		case byeSent && x.ByeResult != "ok" && x.ByeResult != "aborted":
			first(end)
		case byeSent && x.ByeResult == "ok" && end >= t0:
			survived = true
		case x.Ended == "remote" && end >= t0:
			survived = true
		}
		if x.LastRefreshNs >= t0 {
			survived = true
		}
	}
	return cutNs, survived && cutNs == 0
}

func ptrOr(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// trafficKeys are the scenario's traffic keys the workload KPIs read (scenario.json).
type trafficKeys struct {
	SessionExpiresS    float64 `json:"session_expires_s"`
	ReachabilitySample int     `json:"reachability_sample"`
	ReachabilityS      float64 `json:"reachability_interval_s"`
}

func (r *run) trafficKeys() trafficKeys {
	var t trafficKeys
	if len(r.scenario.Traffic) > 0 {
		_ = json.Unmarshal(r.scenario.Traffic, &t) // a run without them reads as off
	}
	return t
}
