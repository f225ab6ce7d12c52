package report

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// MemberLoad is each pool member's load in a window before the first fault and in a window after its takeover,
// for Table 1's redundancy row (冗余程度): how much more the busiest survivor serves once the victim's users are
// taken over, hence the headroom each member needs under the scheme (docs/report.md, "Member load").
type MemberLoad struct {
	// BeforeS and AfterS are the windows [from, to), offsets from t0: before = the 20 s before the fault (from
	// t0 at the earliest); after = from the last detection + 2 s to the heal or the end of the run.
	BeforeS [2]float64      `json:"before_s"`
	AfterS  [2]float64      `json:"after_s"`
	Members []MemberLoadRow `json:"members"`
	// Pools sums the rows by pool ("pcscf", "scscf").
	Pools map[string]*PoolLoad `json:"pools"`
}

// MemberLoadRow is one pool member's load in both windows. Requests are the SIP requests it received (its
// trace's "in" lines), OPTIONS keepalives and the reachability probes' calls excepted; CPU is its CPU seconds per second of the window (1 = one
// core busy) from the lab's resource samples, absent when the run has none (compose, older runs).
type MemberLoadRow struct {
	Node          string   `json:"node"`
	Pool          string   `json:"pool"`
	Faulted       bool     `json:"faulted,omitempty"`
	ReqPerSBefore float64  `json:"req_per_s_before"`
	ReqPerSAfter  float64  `json:"req_per_s_after"`
	CPUBefore     *float64 `json:"cpu_before,omitempty"`
	CPUAfter      *float64 `json:"cpu_after,omitempty"`
	// RSSMaxMiB is the largest resident memory sampled in the run.
	RSSMaxMiB *float64 `json:"rss_max_mib,omitempty"`
}

// PoolLoad is a pool's load in both windows. The peak ratios compare the busiest survivor after the takeover
// with the mean of the members that were active before the fault (a member with less than a tenth of the
// busiest member's requests before counts as a spare or standby): 1.5 means the survivor serves 50 % more than
// a member did, so every member needs that much headroom; an N+1 spare that takes a whole member's users
// shows about 1 (measured against the active members, its own load before being about 0). The ratios are absent
// when an active member received less than MinReqPerSForRatio requests/s before the fault.
type PoolLoad struct {
	Members         int      `json:"members"`
	ActiveBefore    int      `json:"active_before"`
	Survivors       int      `json:"survivors"`
	ReqPerSBefore   float64  `json:"req_per_s_before"`
	ReqPerSAfter    float64  `json:"req_per_s_after"`
	PeakLoadRatio   *float64 `json:"peak_load_ratio,omitempty"`
	CPUPeakRatio    *float64 `json:"cpu_peak_ratio,omitempty"`
	BusiestSurvivor string   `json:"busiest_survivor,omitempty"`
}

// memberLoad computes MemberLoad from the traces and the lab's resource events (nil without a fault, without
// pool members or when the after window is shorter than 5 s).
func (a *analysis) memberLoad(r *run) *MemberLoad {
	s := a.s
	if len(s.Faults) == 0 {
		return nil
	}
	f := s.Faults[0]
	faulted := map[string]bool{f.Target: true}
	for _, n := range f.Nodes {
		faulted[n] = true
	}
	detect := 5.0
	if len(f.TimeToDetectS) > 0 {
		detect = 0
		for _, d := range f.TimeToDetectS {
			detect = max(detect, d)
		}
	}
	end := s.DurationS
	if f.HealS != nil {
		end = min(end, *f.HealS)
	}
	m := &MemberLoad{BeforeS: [2]float64{max(0, f.T0S-20), f.T0S}, AfterS: [2]float64{f.T0S + detect + 2, end},
		Pools: map[string]*PoolLoad{}}
	if m.BeforeS[1]-m.BeforeS[0] < 5 || m.AfterS[1]-m.AfterS[0] < 5 {
		return nil
	}
	win := func(w [2]float64) (int64, int64) {
		return s.StartNs + int64(w[0]*1e9), s.StartNs + int64(w[1]*1e9)
	}
	b0, b1 := win(m.BeforeS)
	a0, a1 := win(m.AfterS)
	type count struct{ before, after int }
	reqs := map[string]*count{}
	pool := map[string]string{}
	for _, n := range r.nodes {
		if n.Kind == "pcscf" || n.Kind == "scscf" {
			pool[n.Name] = n.Kind
			reqs[n.Name] = &count{}
		}
	}
	if len(pool) == 0 {
		return nil
	}
	probeCalls := map[string]bool{}
	for _, p := range r.probes {
		probeCalls[p.CallID] = true
	}
	for _, l := range r.trace {
		c := reqs[l.Node]
		if c == nil || l.Dir != "in" || l.Proto != "sip" || bytes.HasPrefix(l.Data, []byte("SIP/2.0")) ||
			bytes.HasPrefix(l.Data, []byte("OPTIONS ")) {
			continue
		}
		if len(probeCalls) > 0 && probeCalls[sipCallID(l.Data)] {
			continue // the measurement's reachability probes are not the users' load
		}
		switch {
		case l.TNs >= b0 && l.TNs < b1:
			c.before++
		case l.TNs >= a0 && l.TNs < a1:
			c.after++
		}
	}
	samples := cpuSamples(r, func(node string) bool { return pool[node] != "" })
	rss := map[string]float64{}
	for _, e := range r.events {
		if x, ok := e.Data.(obs.Resource); ok && pool[x.Target] != "" {
			rss[x.Target] = max(rss[x.Target], float64(x.RSSBytes)/(1<<20))
		}
	}
	cpuShare := func(node string, from, to int64) *float64 {
		cpu, span, ok := cpuUsed(samples[node], from, to)
		if !ok {
			return nil
		}
		v := round(cpu / (float64(span) / 1e9))
		return &v
	}
	names := make([]string, 0, len(pool))
	for n := range pool {
		names = append(names, n)
	}
	sort.Strings(names)
	bw, aw := m.BeforeS[1]-m.BeforeS[0], m.AfterS[1]-m.AfterS[0]
	for _, n := range names {
		row := MemberLoadRow{Node: n, Pool: pool[n], Faulted: faulted[n],
			ReqPerSBefore: round(float64(reqs[n].before) / bw), ReqPerSAfter: round(float64(reqs[n].after) / aw),
			CPUBefore: cpuShare(n, b0, b1), CPUAfter: cpuShare(n, a0, a1)}
		if v, ok := rss[n]; ok {
			v = round(v)
			row.RSSMaxMiB = &v
		}
		m.Members = append(m.Members, row)
	}
	for _, p := range []string{"pcscf", "scscf"} {
		var rows []MemberLoadRow
		for _, row := range m.Members {
			if row.Pool == p {
				rows = append(rows, row)
			}
		}
		if len(rows) == 0 {
			continue
		}
		m.Pools[p] = poolLoad(rows)
	}
	return m
}

// MinReqPerSForRatio is the mean SIP requests/s an active member must have received before the fault for the
// peak ratios to be given: below it (a light population, a few calls per user per hour) the ratio of two small
// counts says nothing about headroom.
const MinReqPerSForRatio = 1.0

// sipCallID returns the Call-ID header's value of a SIP message ("" when it has none).
func sipCallID(data []byte) string {
	head := data
	if i := bytes.Index(data, []byte("\r\n\r\n")); i >= 0 {
		head = data[:i]
	}
	for _, line := range bytes.Split(head, []byte("\n")) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		n := strings.ToLower(string(bytes.TrimSpace(name)))
		if n == "call-id" || n == "i" {
			return string(bytes.TrimSpace(value))
		}
	}
	return ""
}

// poolLoad sums one pool's rows and computes its peak ratios.
func poolLoad(rows []MemberLoadRow) *PoolLoad {
	pl := &PoolLoad{Members: len(rows)}
	busiest := 0.0
	for _, r := range rows {
		pl.ReqPerSBefore += r.ReqPerSBefore
		busiest = max(busiest, r.ReqPerSBefore)
	}
	var reqBefore, cpuBefore []float64
	for _, r := range rows {
		if busiest > 0 && r.ReqPerSBefore >= busiest/10 {
			pl.ActiveBefore++
			reqBefore = append(reqBefore, r.ReqPerSBefore)
			if r.CPUBefore != nil {
				cpuBefore = append(cpuBefore, *r.CPUBefore)
			}
		}
	}
	var peakReq, peakCPU float64
	cpuSeen := false
	for _, r := range rows {
		if r.Faulted {
			continue
		}
		pl.Survivors++
		pl.ReqPerSAfter += r.ReqPerSAfter
		if r.ReqPerSAfter > peakReq || pl.BusiestSurvivor == "" {
			peakReq, pl.BusiestSurvivor = r.ReqPerSAfter, r.Node
		}
		if r.CPUAfter != nil {
			peakCPU, cpuSeen = max(peakCPU, *r.CPUAfter), true
		}
	}
	pl.ReqPerSBefore, pl.ReqPerSAfter = round(pl.ReqPerSBefore), round(pl.ReqPerSAfter)
	if m := mean(reqBefore); m < MinReqPerSForRatio {
		return pl // too little traffic before the fault for a ratio to mean anything
	}
	if m := mean(reqBefore); m > 0 {
		v := round(peakReq / m)
		pl.PeakLoadRatio = &v
	}
	if m := mean(cpuBefore); m > 0 && cpuSeen && len(cpuBefore) == pl.ActiveBefore {
		v := round(peakCPU / m)
		pl.CPUPeakRatio = &v
	}
	return pl
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// memberLoadMarkdown is the report's "Member load" section ("" when there is none).
func memberLoadMarkdown(m *MemberLoad) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Member load before the fault and after the takeover\n\nSIP requests received per second "+
		"(OPTIONS excepted) and CPU (seconds per second) of each pool member, before the fault (%.1f–%.1f s) and "+
		"after the takeover (%.1f–%.1f s). Peak ratio: the busiest survivor after over the mean active member "+
		"before, the headroom a member needs (docs/report.md, \"Member load\").\n\n", m.BeforeS[0], m.BeforeS[1],
		m.AfterS[0], m.AfterS[1])
	b.WriteString("| member | req/s before | req/s after | CPU before | CPU after | RSS max (MiB) |\n|---|---|---|---|---|---|\n")
	opt := func(p *float64, f string) string {
		if p == nil {
			return "–"
		}
		return fmt.Sprintf(f, *p)
	}
	for _, r := range m.Members {
		name := r.Node
		if r.Faulted {
			name += " (faulted)"
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %s | %s | %s |\n", name, r.ReqPerSBefore, r.ReqPerSAfter,
			opt(r.CPUBefore, "%.3f"), opt(r.CPUAfter, "%.3f"), opt(r.RSSMaxMiB, "%.0f"))
	}
	pools := make([]string, 0, len(m.Pools))
	for p := range m.Pools {
		pools = append(pools, p)
	}
	slices.Sort(pools)
	b.WriteString("\n| pool | active before | survivors | req/s before | req/s after | peak load ratio | CPU peak ratio |\n|---|---|---|---|---|---|---|\n")
	for _, p := range pools {
		pl := m.Pools[p]
		fmt.Fprintf(&b, "| %s | %d of %d | %d | %.2f | %.2f | %s | %s |\n", p, pl.ActiveBefore, pl.Members,
			pl.Survivors, pl.ReqPerSBefore, pl.ReqPerSAfter, opt(pl.PeakLoadRatio, "%.2f"), opt(pl.CPUPeakRatio, "%.2f"))
	}
	return b.String()
}

// cpuSample is one of the lab's resource samples of a node's process: its CPU seconds so far at t.
type cpuSample struct {
	t   int64
	cpu float64
}

// cpuSamples collects the resource samples of the nodes keep accepts, by node, in time order.
func cpuSamples(r *run, keep func(node string) bool) map[string][]cpuSample {
	out := map[string][]cpuSample{}
	for _, e := range r.events {
		if x, ok := e.Data.(obs.Resource); ok && keep(x.Target) {
			out[x.Target] = append(out[x.Target], cpuSample{e.TNs, x.CPUS})
		}
	}
	for _, xs := range out {
		sort.SliceStable(xs, func(i, j int) bool { return xs[i].t < xs[j].t })
	}
	return out
}

// cpuUsed is the CPU seconds a process used between its first and its last sample inside [from, to), and the
// time between those samples; a restarted process's counter starts again, so only the samples after the last
// drop are used. ok is false with fewer than two samples 2 s apart.
func cpuUsed(xs []cpuSample, from, to int64) (cpu float64, spanNs int64, ok bool) {
	var in []cpuSample
	for _, x := range xs {
		if x.t < from || x.t >= to {
			continue
		}
		if len(in) > 0 && x.cpu < in[len(in)-1].cpu {
			in = in[:0]
		}
		in = append(in, x)
	}
	if len(in) < 2 || in[len(in)-1].t-in[0].t < 2e9 {
		return 0, 0, false
	}
	return in[len(in)-1].cpu - in[0].cpu, in[len(in)-1].t - in[0].t, true
}
