package report

import (
	"sort"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Cost is what the lab spends on its subscribers in steady state, the window from t0 (every phone registered)
// to the first fault, or to the end of the run without one: the HSS's Cx requests, the pool members' state
// replication and the nodes' CPU, per registered subscriber and hour, and per procedure. It is the "data sync"
// and "cost" rows of the study's Table 1 measured at a fixed workload, failure or not (docs/report.md, "Cost").
//
// Per procedure, the Cx commands are read by what the HSS serves them for: UAR, MAR and SAR for registrations
// (a refresh inside the window: the initial registrations are before t0, the de-registrations after the end),
// LIR for calls (the I-CSCF locating the callee's S-CSCF). State replication copies registrations only
// (internal/runtime/repl), so its messages are per registration. CPU is not split by procedure: compare it between
// schemes at the same workload (the same seed).
type Cost struct {
	// WindowS is [from, to), offsets from t0.
	WindowS [2]float64 `json:"window_s"`
	// Subscribers is the number of users registered (a successful registration that is not a
	// de-registration, the reachability probers included) before the window ends.
	Subscribers int `json:"subscribers"`
	// Registrations counts the successful registrations (refreshes, registrations again) that began in the
	// window; Calls the users' calls that began in it (one per Call-ID, reachability probes excepted).
	Registrations int `json:"registrations"`
	Calls         int `json:"calls"`
	// Cx counts the HSS's answers in the window by command and "total".
	Cx map[string]int `json:"cx"`
	// ReplMessages and ReplBytes are the pool members' repl_send events in the window.
	ReplMessages int `json:"repl_messages"`
	ReplBytes    int `json:"repl_bytes"`
	// CPUS is the CPU seconds used in the window by kind of node ("bac", "pcscf", "scscf", "icscf", "hss",
	// "dns", …, summed over its members) and "total"; absent without resource samples (compose runs).
	CPUS map[string]float64 `json:"cpu_s,omitempty"`
	// PerSubscriberHour divides the counts by subscribers × window hours: "cx" and "cx_<CMD>", "repl_messages",
	// "repl_bytes", "cpu_ms" (every node) and "cpu_ms_<kind>".
	PerSubscriberHour map[string]float64 `json:"per_subscriber_hour"`
	// CxPerRegistration is (UAR + MAR + SAR) / Registrations, CxPerCall LIR / Calls and ReplPerRegistration
	// ReplMessages / Registrations; absent when the window holds no registration (or no call).
	CxPerRegistration   *float64 `json:"cx_per_registration,omitempty"`
	CxPerCall           *float64 `json:"cx_per_call,omitempty"`
	ReplPerRegistration *float64 `json:"repl_per_registration,omitempty"`
}

// minCostWindowS is the shortest steady window the cost is computed over.
const minCostWindowS = 10.0

// cost computes Summary.Cost (nil when the steady window is shorter than minCostWindowS).
func (a *analysis) cost(r *run) *Cost {
	s := a.s
	to := s.DurationS
	if len(s.Faults) > 0 {
		to = min(to, s.Faults[0].T0S)
	}
	if to < minCostWindowS {
		return nil
	}
	c := &Cost{WindowS: [2]float64{0, round(to)}, Cx: map[string]int{}, PerSubscriberHour: map[string]float64{}}
	from, until := s.StartNs, s.StartNs+int64(to*1e9)
	in := func(t int64) bool { return t >= from && t < until }

	subs := map[string]bool{}
	for _, x := range r.records {
		if x.Type != "register" || !x.ok() || x.Kind == "deregister" {
			continue
		}
		if x.TNs < until {
			subs[x.IMPU] = true
		}
		if in(x.TNs) {
			c.Registrations++
		}
	}
	for _, x := range r.probes {
		if x.Type == "register" && x.ok() && x.Kind != "deregister" && x.TNs < until {
			subs[x.IMPU] = true
		}
	}
	c.Subscribers = len(subs)
	for _, cl := range groupCalls(r) {
		if in(cl.main().TNs) {
			c.Calls++
		}
	}
	for _, e := range r.events {
		if !in(e.TNs) {
			continue
		}
		switch x := e.Data.(type) {
		case obs.CxAnswer:
			cmd := x.Cmd
			if cmd == "" {
				cmd = "unknown"
			}
			c.Cx[cmd]++
			c.Cx["total"]++
		case obs.ReplSend:
			c.ReplMessages++
			c.ReplBytes += x.Bytes
		}
	}

	kind := map[string]string{}
	for _, n := range r.nodes {
		kind[n.Name] = n.Kind
		if n.Kind == "" {
			kind[n.Name] = n.Name // the HSS's configuration has no kind
		}
	}
	samples := cpuSamples(r, func(node string) bool { return kind[node] != "" })
	names := make([]string, 0, len(samples))
	for n := range samples {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		cpu, span, ok := cpuUsed(samples[n], from, until)
		if !ok {
			continue
		}
		// The samples are about a second apart: scale the CPU between the first and the last sample inside the
		// window to the whole window.
		cpu *= (to * 1e9) / float64(span)
		if c.CPUS == nil {
			c.CPUS = map[string]float64{}
		}
		c.CPUS[kind[n]] += cpu
		c.CPUS["total"] += cpu
	}
	for k, v := range c.CPUS {
		c.CPUS[k] = round(v)
	}

	if subHours := float64(c.Subscribers) * to / 3600; subHours > 0 {
		per := func(v float64) float64 { return round(v / subHours) }
		for cmd, n := range c.Cx {
			if cmd == "total" {
				c.PerSubscriberHour["cx"] = per(float64(n))
			} else {
				c.PerSubscriberHour["cx_"+cmd] = per(float64(n))
			}
		}
		if _, ok := c.PerSubscriberHour["cx"]; !ok {
			c.PerSubscriberHour["cx"] = 0
		}
		c.PerSubscriberHour["repl_messages"] = per(float64(c.ReplMessages))
		c.PerSubscriberHour["repl_bytes"] = per(float64(c.ReplBytes))
		for k, v := range c.CPUS {
			if k == "total" {
				c.PerSubscriberHour["cpu_ms"] = per(v * 1000)
			} else {
				c.PerSubscriberHour["cpu_ms_"+k] = per(v * 1000)
			}
		}
	}
	if c.Registrations > 0 {
		c.CxPerRegistration = ratio(c.Cx["UAR"]+c.Cx["MAR"]+c.Cx["SAR"], c.Registrations)
		c.ReplPerRegistration = ratio(c.ReplMessages, c.Registrations)
	}
	if c.Calls > 0 {
		c.CxPerCall = ratio(c.Cx["LIR"], c.Calls)
	}
	return c
}
