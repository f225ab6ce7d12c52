package report

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

const binWidthS = 2.0

// affectedUser is one user registered through a faulted node when the fault began.
type affectedUser struct {
	impu    string
	fault   *Fault
	t0Ns    int64 // the fault's instant
	reregNs int64 // the user's next successful (re-)registration after t0; 0 = none before the end of the run
	// reregKind is that registration's kind ("refresh", "initial", "restoration": one a restoration 504 set off).
	reregKind string
}

// analysis is the summary plus what the other outputs (CSV, plot, ladders) need.
type analysis struct {
	s        *Summary
	affected map[string]*affectedUser
	firstT0  int64 // first fault's instant (0 = no fault)
	// firstOK maps a direction ("mo", "mt") to the instant each affected user's first successful call in that
	// direction after its fault was answered.
	firstOK map[string]map[string]int64
	// takenOver maps a direction to the affected users served in it before their next re-registration.
	takenOver map[string]map[string]bool
}

func (a *analysis) offset(tNs int64) float64 { return round(float64(tNs-a.s.StartNs) / 1e9) }

// afterFault reports whether a record of impu at tNs started at or after the fault that affected impu (for
// unaffected users: at or after the first fault).
func (a *analysis) afterFault(impu string, tNs int64) bool {
	if u, ok := a.affected[impu]; ok {
		return tNs >= u.t0Ns
	}
	return a.firstT0 != 0 && tNs >= a.firstT0
}

func analyse(r *run) *analysis {
	for _, e := range r.events {
		if x, ok := e.Data.(obs.LinksNotApplied); ok {
			r.warnings = append(r.warnings, "the topology's site links (delay, loss, rate between sites) were not "+
				"applied: "+x.Reason)
			break
		}
	}
	sc := r.scenario
	s := &Summary{Scenario: sc.Name, Description: sc.Description, Seed: sc.Seed, StartNs: sc.StartNs, Provenance: sc.Provenance,
		DurationS: sc.DurationS, Faults: []Fault{}, AffectedIMPUs: []string{}, TimeToDetectS: map[string]float64{},
		Warnings: r.warnings}
	if s.DurationS == 0 {
		s.DurationS = round(float64(r.lastTime()-s.StartNs) / 1e9)
	}
	s.Events = EventsRead{Read: len(r.events), Errors: len(r.evErrors)}
	for i, e := range r.evErrors {
		if i == MaxEventErrors {
			break
		}
		s.Events.ErrorLines = append(s.Events.ErrorLines, e.Error())
	}
	a := &analysis{s: s, affected: map[string]*affectedUser{}}

	// Faults: the instant is the lab's fault event for the target (in order), else start + at_s.
	used := map[int]bool{}
	for _, f := range sc.Faults {
		fl := Fault{Kind: f.Kind, Target: f.Target, AtS: f.AtS, ForS: f.ForS, TimeToDetectS: map[string]float64{},
			Nodes: f.Nodes, PlannedTarget: f.PlannedTarget, PlannedAtS: f.PlannedAtS, JitterS: f.JitterS,
			Params: f.params()}
		fl.t0Ns = sc.StartNs + int64(math.Round(f.AtS*1e9))
		for i, e := range r.events {
			x, ok := e.Data.(obs.Fault)
			if used[i] || !ok || e.Node != "lab" && e.Node != "" || x.Target != f.Target || x.Fault == "resume" {
				continue
			}
			if x.Fault != "" && f.Kind != "" && x.Fault != f.Kind && !(f.Kind == "stop" && x.Fault == "kill") {
				continue
			}
			used[i] = true
			fl.t0Ns = e.TNs
			break
		}
		for _, e := range r.events {
			if x, ok := e.Data.(obs.FaultHeal); ok && (e.Node == "lab" || e.Node == "") && x.Target == f.Target &&
				x.Fault == f.Kind && e.TNs >= fl.t0Ns {
				h := a.offset(e.TNs)
				fl.HealS = &h
				break
			}
		}
		fl.T0S = a.offset(fl.t0Ns)
		s.Faults = append(s.Faults, fl)
	}
	sort.SliceStable(s.Faults, func(i, j int) bool { return s.Faults[i].t0Ns < s.Faults[j].t0Ns })
	for i := range s.Faults {
		a.detect(r, &s.Faults[i])
	}
	if len(s.Faults) > 0 {
		a.firstT0 = s.Faults[0].t0Ns
		s.TimeToDetectS = s.Faults[0].TimeToDetectS
	}

	a.findAffected(r)
	a.windows(r)
	a.directions(r)
	a.cx(r)
	a.security(r)
	a.calls(r)
	a.bins(r)
	a.users()
	a.survival(r)
	a.overload(r)
	a.selfLag(r)
	a.health(r)
	a.udpDrops(r)
	a.storm(r)
	return a
}

func (r *run) lastTime() int64 {
	var last int64
	for _, x := range r.records {
		last = max(last, x.TNs+int64(x.Duration*1e6))
	}
	for _, x := range r.events {
		last = max(last, x.TNs)
	}
	for _, x := range r.trace {
		last = max(last, x.TNs)
	}
	return last
}

// nodeAddrs returns the addresses and host names that designate node name.
func (r *run) nodeAddrs(name string) map[string]bool {
	m := map[string]bool{}
	for _, c := range r.nodes {
		if c.Name != name {
			continue
		}
		if c.Listen != "" {
			m[c.Listen] = true
		}
		if c.HSS != nil && c.HSS.DiameterListen != "" {
			m[c.HSS.DiameterListen] = true
		}
	}
	return m
}

// detectGrace is how long after a fault's heal a peer_state down event still counts as detecting it: a probe sent
// just before the heal times out up to its timeout (0.5 s by default) later. A down event later than that is about
// something else (loss-pcscf: the BAC lost two probes in a row 11 s after the loss was healed).
const detectGrace = time.Second

// detect fills the time to detect of one fault: the first peer_state down event about the target at each node,
// from the fault to its heal (+ detectGrace) or the end of the run.
func (a *analysis) detect(r *run, f *Fault) {
	addrs, names := map[string]bool{}, map[string]bool{}
	for _, n := range f.nodes() {
		names[n] = true
		for a := range r.nodeAddrs(n) {
			addrs[a] = true
		}
	}
	var first int64
	until := int64(math.MaxInt64)
	if f.HealS != nil {
		until = a.s.StartNs + int64(math.Round(*f.HealS*1e9)) + int64(detectGrace)
	}
	for _, e := range r.events {
		x, ok := e.Data.(obs.PeerState)
		if !ok || x.State != "down" || e.TNs < f.t0Ns || e.TNs > until || names[e.Node] {
			continue
		}
		if !addrs[x.Addr] && !names[hostNode(x.Peer)] {
			continue
		}
		if _, seen := f.TimeToDetectS[e.Node]; seen {
			continue
		}
		f.TimeToDetectS[e.Node] = round(float64(e.TNs-f.t0Ns) / 1e9)
		if first == 0 {
			first = e.TNs
		}
	}
	f.detectNs = first
	if first == 0 {
		f.detectNs = f.t0Ns // nobody noticed: "after detection" counts from the fault itself
	}
}

// findAffected marks the users whose last successful registration before a fault went through its target.
func (a *analysis) findAffected(r *run) {
	regs := map[string][]*record{} // successful (re-)registrations per user, in time order
	for i := range r.records {
		x := &r.records[i]
		if x.Type == "register" && x.ok() && x.Kind != "deregister" {
			regs[x.IMPU] = append(regs[x.IMPU], x)
		}
	}
	for i := range a.s.Faults {
		f := &a.s.Faults[i]
		last := map[string]*record{}
		for j := range r.records {
			rec := &r.records[j]
			if rec.Type != "register" || !rec.ok() || rec.TNs >= f.t0Ns {
				continue
			}
			last[rec.IMPU] = rec
		}
		hit := map[string]bool{}
		for _, n := range f.nodes() {
			hit[n] = true
		}
		for impu, rec := range last {
			if rec.Kind == "deregister" || (!hit[hostNode(rec.PCSCF)] && !hit[hostNode(rec.SCSCF)]) {
				continue
			}
			f.AffectedUsers++
			if _, dup := a.affected[impu]; dup {
				continue // an earlier fault affected it already
			}
			u := &affectedUser{impu: impu, fault: f, t0Ns: f.t0Ns}
			for _, x := range regs[impu] {
				if x.TNs > f.t0Ns {
					u.reregNs, u.reregKind = x.TNs, x.Kind
					break
				}
			}
			a.affected[impu] = u
		}
	}
	for impu := range a.affected {
		a.s.AffectedIMPUs = append(a.s.AffectedIMPUs, impu)
	}
	sort.Strings(a.s.AffectedIMPUs)
	a.s.AffectedUsers = len(a.s.AffectedIMPUs)
}

// windows fills each fault's During and AfterHeal: every user's calls and registrations while the fault was in
// place and after it ended.
func (a *analysis) windows(r *run) {
	endNs := a.s.StartNs + int64(a.s.DurationS*1e9)
	calls := groupCalls(r)
	count := func(from, to int64) *Window {
		w := &Window{FromS: a.offset(from), ToS: a.offset(to)}
		for _, c := range calls {
			m := c.main()
			if m.TNs < from || m.TNs >= to {
				continue
			}
			w.Calls++
			if m.ok() {
				w.Answered++
				if m.Setup200 != nil && m.TNs+int64(*m.Setup200*1e6) < to {
					w.AnsweredInWindow++
				}
			} else {
				w.Failed++
			}
		}
		for _, x := range r.records {
			if x.Type != "register" || x.TNs < from || x.TNs >= to {
				continue
			}
			w.Registrations++
			if !x.ok() {
				w.RegistrationsFailed++
			}
		}
		return w
	}
	for i := range a.s.Faults {
		f := &a.s.Faults[i]
		end, healed := endNs, endNs
		if f.ForS > 0 {
			end = f.t0Ns + int64(f.ForS*1e9)
			healed = end
		}
		if f.HealS != nil {
			healed = max(a.s.StartNs+int64(*f.HealS*1e9), end)
		}
		end, healed = min(end, endNs), min(healed, endNs)
		f.During = count(f.t0Ns, end)
		if healed < endNs {
			f.AfterHeal = count(healed, endNs)
		}
	}
}

func (a *analysis) directions(r *run) {
	a.firstOK = map[string]map[string]int64{}
	a.takenOver = map[string]map[string]bool{"mo": {}, "mt": {}}
	a.s.MO = a.direction(r, "mo")
	a.s.MT = a.direction(r, "mt")
}

func (a *analysis) direction(r *run, dir string) Direction {
	var d Direction
	if len(a.s.Faults) == 0 {
		// Baseline: every user, every call.
		users, ok := map[string]bool{}, map[string]bool{}
		for _, x := range r.records {
			if x.Type != "call" || x.Direction != dir {
				continue
			}
			d.Attempts++
			users[x.IMPU] = true
			if x.ok() {
				d.Succeeded++
				ok[x.IMPU] = true
			}
		}
		d.AttemptsAfterDetection, d.SucceededAfterDetection = d.Attempts, d.Succeeded
		d.SuccessRatioAfterDetection = ratio(d.Succeeded, d.Attempts)
		d.UsersAttempted, d.AffectedUsersWithSuccess, d.UsersTested = len(users), len(ok), len(users)
		return d
	}
	attempted := map[string]bool{}
	firstOK := map[string]int64{}
	// tested: users with a call in this direction, started before their next re-registration, that tested the
	// takeover: one that succeeded, or one placed after the fault was detected (before it, every scheme fails).
	tested := map[string]bool{}
	for _, x := range r.records {
		u, aff := a.affected[x.IMPU]
		if x.Type != "call" || x.Direction != dir || !aff || x.TNs < u.t0Ns {
			continue
		}
		d.Attempts++
		attempted[x.IMPU] = true
		beforeRereg := u.reregNs == 0 || x.TNs < u.reregNs
		if beforeRereg && (x.ok() || x.TNs >= u.fault.detectNs) {
			tested[x.IMPU] = true
		}
		if x.ok() {
			d.Succeeded++
			// Taken over: a successful call that started before the user re-registered (its answer may come
			// after the registration; the network took the call without it).
			if beforeRereg {
				a.takenOver[dir][x.IMPU] = true
			}
			// Service is back when the first call started after the fault is answered.
			answered := x.TNs
			if x.Setup200 != nil {
				answered += int64(*x.Setup200 * 1e6)
			}
			if t, seen := firstOK[x.IMPU]; !seen || answered < t {
				firstOK[x.IMPU] = answered
			}
		}
		if x.TNs >= u.fault.detectNs {
			d.AttemptsAfterDetection++
			if x.ok() {
				d.SucceededAfterDetection++
			}
		}
	}
	d.SuccessRatioAfterDetection = ratio(d.SucceededAfterDetection, d.AttemptsAfterDetection)
	d.UsersAttempted = len(attempted)
	var interruptions []float64
	for impu, t := range firstOK {
		u := a.affected[impu]
		interruptions = append(interruptions, float64(t-u.t0Ns)/1e9)
	}
	d.AffectedUsersWithSuccess = len(a.takenOver[dir])
	// A user whose periodic refresh came before any test of the takeover is no evidence either way: it left the
	// denominator. One whose re-registration the fault itself set off (after a restoration 504) stays: the network
	// did not serve it without one.
	for impu := range attempted {
		u := a.affected[impu]
		if !tested[impu] && u.reregNs != 0 && u.reregKind != "restoration" {
			d.RefreshedFirst++
		}
	}
	d.UsersTested = d.UsersAttempted - d.RefreshedFirst
	d.TakenOverBeforeReregistration = ratio(d.AffectedUsersWithSuccess, d.UsersTested)
	d.InterruptionS = percentiles(interruptions)
	a.firstOK[dir] = firstOK
	if dir == "mt" {
		d.NotDelivered = a.notDelivered(r)
	}
	return d
}

// notDelivered counts calls to affected users, started at or after the callee's fault, that failed at the caller
// and have no record at the callee.
func (a *analysis) notDelivered(r *run) int {
	reached := map[string]bool{}
	for _, x := range r.records {
		if x.Type == "call" && x.Direction == "mt" && x.CallID != "" {
			reached[x.CallID] = true
		}
	}
	n := 0
	for _, x := range r.records {
		if x.Type != "call" || x.Direction != "mo" || x.ok() || reached[x.CallID] {
			continue
		}
		if u, ok := a.affected[x.To]; ok && x.TNs >= u.t0Ns {
			n++
		}
	}
	return n
}

func (a *analysis) cx(r *run) {
	a.s.CX = map[string]map[string]int{}
	if a.firstT0 != 0 {
		a.s.CXAfterFault = map[string]map[string]int{}
	}
	add := func(m map[string]map[string]int, e obs.CxAnswer) {
		cmd := e.Cmd
		if cmd == "" {
			cmd = "unknown"
		}
		c := m[cmd]
		if c == nil {
			c = map[string]int{}
			m[cmd] = c
		}
		c["total"]++
		if e.UAT != nil {
			c[fmt.Sprintf("uat%d", *e.UAT)]++
		}
		if e.SAT != nil {
			c[fmt.Sprintf("sat%d", *e.SAT)]++
		}
		if code := e.Result; code < 2000 || code > 2999 {
			c["failed"]++
		}
	}
	for _, e := range r.events {
		x, ok := e.Data.(obs.CxAnswer)
		if !ok {
			continue
		}
		add(a.s.CX, x)
		if a.firstT0 != 0 && e.TNs >= a.firstT0 {
			add(a.s.CXAfterFault, x)
		}
	}
}

// call is one call (one Call-ID) with its caller's and callee's records.
type call struct {
	id     string
	mo, mt *record
}

func (c *call) main() *record {
	if c.mo != nil {
		return c.mo
	}
	return c.mt
}

func groupCalls(r *run) []*call {
	byID := map[string]*call{}
	var out []*call
	for i := range r.records {
		x := &r.records[i]
		if x.Type != "call" {
			continue
		}
		c := byID[x.CallID]
		if c == nil || x.CallID == "" {
			c = &call{id: x.CallID}
			out = append(out, c)
			if x.CallID != "" {
				byID[x.CallID] = c
			}
		}
		if x.Direction == "mt" {
			c.mt = x
		} else {
			c.mo = x
		}
	}
	return out
}

func (a *analysis) takeoverCall(c *call) bool {
	for _, x := range []*record{c.mo, c.mt} {
		if x == nil {
			continue
		}
		if u, ok := a.affected[x.IMPU]; ok && x.TNs >= u.t0Ns {
			return true
		}
	}
	return false
}

func (a *analysis) calls(r *run) {
	cc := CallCounts{ByCause: map[string]int{}}
	var n200, n180, t200, t180 []float64
	for _, c := range groupCalls(r) {
		m := c.main()
		cc.Total++
		if !m.ok() {
			cc.Failed++
			cc.ByCause[m.Result]++
			continue
		}
		cc.Answered++
		to := a.takeoverCall(c)
		if m.Setup200 != nil {
			if to {
				t200 = append(t200, *m.Setup200)
			} else {
				n200 = append(n200, *m.Setup200)
			}
		}
		if m.Setup180 != nil {
			if to {
				t180 = append(t180, *m.Setup180)
			} else {
				n180 = append(n180, *m.Setup180)
			}
		}
	}
	a.s.Calls = cc
	a.s.SetupLatencyMs = SetupLatency{Normal: latency(n200, n180), Takeover: latency(t200, t180)}

	rc := RegCounts{ByKind: map[string]int{}, ByCause: map[string]int{}}
	for _, x := range r.records {
		if x.Type != "register" {
			continue
		}
		rc.Total++
		rc.ByKind[x.Kind]++
		if !x.ok() {
			rc.Failed++
			rc.ByCause[x.Result]++
		}
	}
	a.s.Registrations = rc
}

func (a *analysis) bins(r *run) {
	n := int(math.Ceil(a.s.DurationS / binWidthS))
	for _, x := range r.records {
		if x.Type == "call" {
			n = max(n, int((float64(x.TNs-a.s.StartNs)/1e9)/binWidthS)+1)
		}
	}
	a.s.Bins = make([]Bin, n)
	for i := range a.s.Bins {
		a.s.Bins[i].StartS = float64(i) * binWidthS
	}
	for _, x := range r.records {
		if x.Type != "call" || x.TNs < a.s.StartNs {
			continue
		}
		b := &a.s.Bins[int((float64(x.TNs-a.s.StartNs)/1e9)/binWidthS)]
		if _, ok := a.affected[x.IMPU]; ok {
			b.AffectedAttempts++
			if x.ok() {
				b.AffectedSucceeded++
			}
		} else {
			b.OthersAttempts++
			if x.ok() {
				b.OthersSucceeded++
			}
		}
	}
}

// userPart returns "user0001" for "sip:user0001@ims.test", "user0001@ims.test" or "tel:+1…" (the number).
func userPart(id string) string {
	id = strings.Trim(id, "<> ")
	for _, p := range []string{"sip:", "sips:", "tel:"} {
		id = strings.TrimPrefix(id, p)
	}
	if i := strings.IndexByte(id, '@'); i >= 0 {
		id = id[:i]
	}
	return id
}
