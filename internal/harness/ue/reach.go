package ue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Reachability configures the reachability probes (Config.Reachability): after a fault, every affected user
// (registered through a faulted node) is called by a prober phone (MT probe) and, when it is a caller, calls a
// prober phone (MO probe), on a fixed schedule, until each direction has succeeded Confirm times in a row. The
// probers are extra subscribers after the phones' range; probe calls are short (answered, then BYE at once) and
// marked in their records (Record.Probe), so the report keeps them out of the users' own traffic. A probe never
// changes what the probed phone does: a restoration 504 to an MO probe does not make it register again.
type Reachability struct {
	// Interval is the probe schedule (0 = no probes). Each affected user is probed every Interval from its own
	// random phase, whether or not earlier probes are still waiting for an answer (a probe stuck in a dead node
	// must not hide the next one), up to MaxInFlight probes per user and direction.
	Interval time.Duration `yaml:"interval"`
	// MaxInFlight caps the probes of one user and direction waiting for an answer that started less than Stale
	// ago (default 2); a tick that finds the cap reached is skipped. It keeps a lab whose probes pile up in a
	// dead node from drowning in them (with no cap a 200-phone run collapsed into 503s).
	MaxInFlight int `yaml:"max_in_flight"`
	// Timeout, when set, is how long a probe waits for a final answer before it gives up (CANCEL) and frees its
	// place (0 = Config.CallTimeout, as the users' calls). A short one bounds how long stuck probes hold their
	// places, but on a loaded machine it also cancels probes that would have been answered
	// (docs/results/realistic-pcscf-kill: 1s pushed the median time to restore from 0.14-0.18 s to 3.5 s).
	Timeout time.Duration `yaml:"timeout"`
	// Stale, when set, is the age after which a probe still waiting for an answer (stuck in a dead node until a
	// failover or the call timeout) no longer holds one of the MaxInFlight places (0 = it holds it until it
	// ends). It sharpens the resolution after a detection but lets stuck probes pile up: with stale 1s a
	// 200-phone lab on a busy 2-core machine collapsed into 503s and timeouts (docs/results/realistic-pcscf-kill).
	Stale time.Duration `yaml:"stale"`
	// Confirm is the number of successful probes in a row, per direction, after which a user is no longer
	// probed in that direction (default 2).
	Confirm int `yaml:"confirm"`
	// Probers is the number of prober phones (default 4): users From+Count … From+Count+Probers-1.
	Probers int `yaml:"probers"`
	// Sample, when set, probes at most Sample of a fault's affected users, drawn at random from the run's seed
	// (0 = every affected user). A carrier-scale run cannot probe tens of thousands of users every interval; the
	// survival curve of a random sample estimates theirs, and the report counts the others as not probed.
	Sample int `yaml:"sample"`
}

// Probe kinds written in Record.Probe.
const (
	ProbeMT     = "mt"     // a prober called the affected user (Record.ProbeUser)
	ProbeMO     = "mo"     // the affected user called a prober
	ProbeProber = "prober" // a prober phone's own registration
)

// ApplyDefaults fills Confirm, Probers and MaxInFlight when they are zero.
func (r *Reachability) ApplyDefaults() {
	if r.Confirm == 0 {
		r.Confirm = 2
	}
	if r.Probers == 0 {
		r.Probers = 4
	}
	if r.MaxInFlight == 0 {
		r.MaxInFlight = 2
	}
}

// Validate names the bad field (prefix: the field path, e.g. "reachability").
func (r *Reachability) Validate(prefix string) error {
	switch {
	case r.Interval < 0:
		return fmt.Errorf("%s.interval: must not be negative, is %s", prefix, r.Interval)
	case r.Interval > 0 && r.Interval < 10*time.Millisecond:
		return fmt.Errorf("%s.interval: must be at least 10ms, is %s", prefix, r.Interval)
	case r.Confirm < 1:
		return fmt.Errorf("%s.confirm: must be at least 1, is %d", prefix, r.Confirm)
	case r.Probers < 1:
		return fmt.Errorf("%s.probers: must be at least 1, is %d", prefix, r.Probers)
	case r.MaxInFlight < 1:
		return fmt.Errorf("%s.max_in_flight: must be at least 1, is %d", prefix, r.MaxInFlight)
	case r.Timeout < 0:
		return fmt.Errorf("%s.timeout: must not be negative, is %s", prefix, r.Timeout)
	case r.Stale < 0:
		return fmt.Errorf("%s.stale: must not be negative, is %s", prefix, r.Stale)
	case r.Sample < 0:
		return fmt.Errorf("%s.sample: must not be negative (0 = every affected user), is %d", prefix, r.Sample)
	}
	return nil
}

// isProber reports whether user is one of the prober phones.
func (u *UE) isProber(user string) bool {
	p := u.byUser[user]
	return p != nil && p.prober
}

// Probers returns the prober phones (empty without Config.Reachability.Interval).
func (u *UE) Probers() []*Phone { return u.probers }

// hostNode is the node name of a host name: "pcscf1.ims.test" → "pcscf1".
func hostNode(h string) string {
	n, _, _ := strings.Cut(h, ".")
	return n
}

// StartReachability starts the reachability probes of the users registered (now) through one of the nodes
// (node names: pcscf1, scscf2). It returns at once with the number of users it probes; the probes run until
// each user is confirmed reachable in its directions or the phones stop. A user probed already (an earlier
// fault) is not probed twice. With Reachability.Sample it probes a random sample of them (the others count as
// handled by this fault all the same). The UE emits a reachability_start event naming the nodes and the probed
// users, with the number of affected users.
func (u *UE) StartReachability(nodes []string) int {
	rc := u.cfg.Reachability
	if rc.Interval <= 0 || !u.running.Load() || len(u.probers) == 0 {
		return 0
	}
	hit := map[string]bool{}
	for _, n := range nodes {
		hit[n] = true
	}
	var users []string
	var probed []*Phone
	u.reachMu.Lock()
	for _, p := range u.phones {
		h := p.hosts()
		if !p.Registered() || (!hit[hostNode(h.pcscf)] && !hit[hostNode(h.scscf)]) || u.reachSeen[p.user] {
			continue
		}
		u.reachSeen[p.user] = true
		users = append(users, p.impu)
		probed = append(probed, p)
	}
	u.reachMu.Unlock()
	affected := len(users)
	if rc.Sample > 0 && len(probed) > rc.Sample {
		// A partial Fisher–Yates shuffle from the run's RNG: the first Sample places hold a uniform sample.
		for i := range rc.Sample {
			j := i + u.intn(len(probed)-i)
			probed[i], probed[j] = probed[j], probed[i]
		}
		probed = probed[:rc.Sample]
		users = users[:0]
		for _, p := range probed {
			users = append(users, p.impu)
		}
	}
	u.events.Emit(obs.ReachabilityStart{Nodes: nodes, Users: users, Affected: affected,
		IntervalMs: rc.Interval.Milliseconds(), Confirm: rc.Confirm})
	u.log.Info("ue: reachability probes", "nodes", nodes, "users", len(users), "affected", affected,
		"interval", rc.Interval.String())
	if len(users) > 0 {
		u.rescueProbers(nodes, hit)
	}
	for _, p := range probed {
		phase := time.Duration(u.float() * float64(rc.Interval))
		if !u.goBackground(func() { u.probeUser(p, hit, phase) }) {
			break
		}
	}
	return len(users)
}

// kindProberRescue is the kind of the registration records of a prober registering again because every prober
// was behind the fault (rescueProbers).
const kindProberRescue = "prober_rescue"

// rescueProbers registers the probers again when none of them is left outside the faulted nodes: the probes need
// a prober that is not itself behind the fault. The BAC spreads the probers over the P-CSCFs like any phone, so
// with 4 probers and 3 P-CSCFs all four are behind one member in about 1 run in 27 (3 × (1/3)^4); in the
// published study that run (pcscf-kill, seed 120017) measured no restoration under any scheme, for want of a
// prober. Each prober behind the fault registers again, attempts of at most a second every 1.5 s, until one is
// registered elsewhere (the first attempts may still go to the dead member until the network detects it), so the
// probes of that run start later: by the prober's registration time, which the prober_rescue event and the prober's registration
// records (Probe "prober", kind prober_rescue) show. Only the probers register; the probed users do not.
func (u *UE) rescueProbers(nodes []string, hit map[string]bool) {
	if u.pickProber(hit) != nil {
		return
	}
	var names []string
	for _, q := range u.probers {
		names = append(names, q.impu)
	}
	u.events.Emit(obs.ProberRescue{Nodes: nodes, Probers: names})
	u.log.Warn("ue: every prober is behind the faulted nodes; the probers register again", "nodes", nodes)
	for _, q := range u.probers {
		if !u.goBackground(func() { u.rescueProber(q, hit) }) {
			return
		}
	}
}

// proberRescueAttempt bounds one registration attempt of a prober being rescued.
const proberRescueAttempt = time.Second

// rescueProber registers one prober again until some prober is registered outside the faulted nodes.
func (u *UE) rescueProber(q *Phone, hit map[string]bool) {
	ctx := u.runCtx
	for u.pickProber(hit) == nil {
		// An attempt gives up after proberRescueAttempt: the first ones may be forwarded to the dead member
		// and wait there for the network's timeout (7 s in the lab), where a new attempt once the network has
		// marked it down goes to a live one.
		actx, cancel := context.WithTimeout(ctx, proberRescueAttempt)
		err := q.register(actx, kindProberRescue)
		cancel()
		if err == nil {
			if h := q.hosts(); !hit[hostNode(h.pcscf)] && !hit[hostNode(h.scscf)] {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(proberRescueAttempt / 2):
		}
	}
}

// pickProber returns a registered prober that is not registered through a faulted node, or nil.
func (u *UE) pickProber(hit map[string]bool) *Phone {
	var ok []*Phone
	for _, q := range u.probers {
		h := q.hosts()
		if q.Registered() && !hit[hostNode(h.pcscf)] && !hit[hostNode(h.scscf)] {
			ok = append(ok, q)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	return ok[u.intn(len(ok))]
}

// probeUser probes one affected user every Interval from phase until each of its directions is confirmed.
func (u *UE) probeUser(p *Phone, hit map[string]bool, phase time.Duration) {
	rc := u.cfg.Reachability
	ctx := u.runCtx
	type dir struct {
		name    string
		mu      sync.Mutex
		pending map[int]time.Time // probes waiting for an answer, by sequence number: their start
		seq     int
		okRun   atomic.Int32 // successes in a row
	}
	// take reserves a place for a new probe: false when MaxInFlight probes younger than Stale are pending.
	take := func(d *dir) (int, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		young := 0
		for _, t := range d.pending {
			if rc.Stale == 0 || time.Since(t) < rc.Stale {
				young++
			}
		}
		if young >= rc.MaxInFlight {
			return 0, false
		}
		d.seq++
		d.pending[d.seq] = time.Now()
		return d.seq, true
	}
	release := func(d *dir, id int) {
		d.mu.Lock()
		delete(d.pending, id)
		d.mu.Unlock()
	}
	dirs := []*dir{{name: ProbeMT, pending: map[int]time.Time{}}}
	if p.role == RoleCaller {
		dirs = append(dirs, &dir{name: ProbeMO, pending: map[int]time.Time{}})
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTimer(phase)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(rc.Interval)
		done := true
		for _, d := range dirs {
			if int(d.okRun.Load()) >= rc.Confirm {
				continue
			}
			done = false
			id, ok := take(d)
			if !ok {
				continue
			}
			prober := u.pickProber(hit)
			if prober == nil {
				release(d, id)
				u.log.Warn("ue: no prober phone outside the faulted nodes", "impu", p.impu)
				continue
			}
			wg.Go(func() {
				defer release(d, id)
				var err error
				if d.name == ProbeMT {
					_, err = prober.call(ctx, p.user, 0, ProbeMT, p.impu)
				} else {
					_, err = p.call(ctx, prober.user, 0, ProbeMO, p.impu)
				}
				if err == nil {
					d.okRun.Add(1)
				} else {
					d.okRun.Store(0)
				}
			})
		}
		if done {
			return
		}
	}
}
