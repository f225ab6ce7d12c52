// Package scenario reads scenario files and runs them: a scenario states the topology of the lab (overrides of
// the default topology), the phones' traffic, the faults to inject (what, where, when, for how long), how long
// the run lasts and what the run's report must show (expectations). See docs/scenarios.md for the format.
//
// A run (Run) starts the local lab (internal/harness/lab), registers the phones (internal/harness/ue) in-process, injects the
// faults at their offsets from the run's time zero, stops everything, has the report built from the run
// directory and evaluates the expectations against the report's summary.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/topology"
)

// Scenario is a parsed scenario file.
type Scenario struct {
	// Name names the scenario and its run directories (default: the file name without .yaml).
	Name string `yaml:"name"`
	// Description says in a sentence or two what happens and what must hold.
	Description string `yaml:"description"`
	// Seed is the run's seed: every random choice of the run (phones, nodes, fault instants and victims) is drawn
	// from it (0 = a new seed for every run, printed; docs/scenarios.md, "Seeds").
	Seed int64 `yaml:"seed"`
	// Duration is how long traffic runs, from the run's time zero (t0, when every phone has registered).
	Duration time.Duration `yaml:"duration"`
	// Topology holds overrides of the default topology (topologies/default.yaml): any field of the topology
	// file format (docs/topology.md) may be given; the rest keep their defaults.
	Topology topology.Topology `yaml:"topology"`
	// Traffic describes the simulated phones.
	Traffic Traffic `yaml:"traffic"`
	// Faults are injected at their offsets from t0.
	Faults []Fault `yaml:"faults"`
	// Expectations must all hold for the run to pass.
	Expectations []Expectation `yaml:"expectations"`
}

// Traffic describes the simulated phones (internal/harness/ue): subscribers user0001… of the lab HSS.
type Traffic struct {
	// Phones is the number of phones (users FirstUser…FirstUser+Phones-1).
	Phones int `yaml:"phones"`
	// FirstUser is the number of the first subscriber (default 1: user0001).
	FirstUser int `yaml:"first_user"`
	// RegisterRate spreads the initial registrations, per second (default 50).
	RegisterRate float64 `yaml:"register_rate"`
	// CallRate is the aggregate rate of calls between the phones, per second (Poisson arrivals).
	CallRate float64 `yaml:"call_rate"`
	// ProbeInterval makes every phone call the next phone once per interval (0 = off): every user then places
	// and receives a call per interval, so the interruption after a fault is measured with that resolution.
	ProbeInterval time.Duration `yaml:"probe_interval"`
	// Hold is how long an answered call lasts (default 2s).
	Hold time.Duration `yaml:"hold"`
	// Mix is the share of phones that place calls (default 1: every phone calls; every phone is called).
	Mix *float64 `yaml:"mix"`
	// CallTimeout is how long a caller waits for a final answer before giving up (default 10s).
	CallTimeout time.Duration `yaml:"call_timeout"`
	// OnRestoration504 is what a phone does when its call is refused with 504 and the 3GPP restoration body
	// (load-sharing and the other schemes without restoration, docs/schemes.md): "reregister" (default) registers
	// again at once, "ignore" waits for the next periodic refresh (ue.Config.OnRestoration504).
	OnRestoration504 string `yaml:"on_restoration_504"`
	// RefreshPhase is when each phone first refreshes its registration: "lockstep" (default: about half the
	// period after the initial registrations, so all phones refresh together) or "steady" (at a uniform random
	// point of its refresh interval, drawn from the seed, so the registrations have spread ages at a fault, as in
	// a network that has been running for hours). ue.Config.RefreshPhase.
	RefreshPhase string `yaml:"refresh_phase"`
	// SessionExpires turns on RFC 4028 session timers (0 = off): callers refresh answered calls with an
	// in-dialog UPDATE every half interval, so a call the fault cut is noticed (report: calls_cut). Whole seconds,
	// at least 2s. ue.Config.SessionExpires.
	SessionExpires time.Duration `yaml:"session_expires"`

	// The traffic model of real subscribers and the reachability probes (docs/scenarios.md, "Traffic model").
	// Both opt in; without them the phones behave as above.

	// BHCA is the busy-hour call attempts per calling user (0 = no model). With it each calling user places
	// calls with exponential inter-arrival times of mean 3600 s / BHCA to a random user that takes calls.
	BHCA float64 `yaml:"bhca"`
	// Holding is the holding-time distribution of the model's calls (default exponential, mean 90s).
	Holding *Holding `yaml:"holding"`
	// IdleShare is the share of users that place no calls and receive none of the model's calls.
	IdleShare float64 `yaml:"idle_share"`
	// MTOnlyShare is the share of users that only receive calls.
	MTOnlyShare float64 `yaml:"mt_only_share"`
	// Reachability probes every affected user after a fault (0 interval = off).
	Reachability ue.Reachability `yaml:"reachability"`

	// Steps change CallRate during the run (a load step: docs/scenarios.md, "Load steps"), in order of At; each
	// rate holds until the next step. They need a CallRate above 0 (the random calls they change).
	Steps []Step `yaml:"steps"`
}

// Step sets the random calls' rate at an offset from t0.
type Step struct {
	// At is the offset from t0 (when every phone has registered).
	At time.Duration `yaml:"at"`
	// CallRate is the aggregate rate of the random calls from then on, per second (0 pauses them).
	CallRate float64 `yaml:"call_rate"`
}

// RateAt is the random calls' rate the traffic asks for at offset at from t0 (CallRate, or the last step's).
func (t *Traffic) RateAt(at time.Duration) float64 {
	r := t.CallRate
	for _, st := range t.Steps {
		if st.At <= at {
			r = st.CallRate
		}
	}
	return r
}

// Holding is a holding-time distribution.
type Holding struct {
	// Dist is exponential (default) or fixed.
	Dist string `yaml:"dist"`
	// Mean is the exponential's mean or the fixed value (default 90s).
	Mean time.Duration `yaml:"mean"`
}

// model returns the phones' traffic model, or nil without BHCA.
func (t *Traffic) model() *ue.Model {
	if t.BHCA == 0 && t.Holding == nil && t.IdleShare == 0 && t.MTOnlyShare == 0 {
		return nil
	}
	m := &ue.Model{BHCA: t.BHCA, IdleShare: t.IdleShare, MTOnlyShare: t.MTOnlyShare,
		Holding: ue.HoldingExponential, HoldingMean: 90 * time.Second}
	if t.Holding != nil {
		if t.Holding.Dist != "" {
			m.Holding = t.Holding.Dist
		}
		if t.Holding.Mean != 0 {
			m.HoldingMean = t.Holding.Mean
		}
	}
	return m
}

// Fault is one fault of the schedule.
type Fault struct {
	// Kind is a registered fault kind (FaultKinds): kill, pause, stop, restart, site-down, hss-down, dns-down,
	// failback, flap, slow.
	Kind string `yaml:"kind"`
	// Target is a node of the topology (pcscf1, scscf2, icscf, hss, …), a pool (pcscf, scscf: every member) or a
	// site (site:south: every node of the site). Some kinds take one node only; hss-down and dns-down default to
	// the HSS and the DNS.
	Target string `yaml:"target"`
	// At is the offset from t0 at which the fault is injected.
	At time.Duration `yaml:"at"`
	// For is how long the fault lasts before it is fixed (the node restarted or resumed); 0 = until the end.
	For time.Duration `yaml:"for"`
	// Mode is hss-down's way down: kill (default) or pause; flap's: kill (default) or partition (partitioned
	// from Peers, isolated without, and healed, every Period); dns-down's: kill (default) or unreachable (dnsd
	// isolated, left running).
	Mode string `yaml:"mode,omitempty"`
	// Period is flap's half cycle: the node is down for a period, then up for a period, … for For.
	Period time.Duration `yaml:"period,omitempty"`
	// CPUPercent is slow's share of one CPU (cpu.cfs_quota_us / cpu.cfs_period_us × 100).
	CPUPercent int `yaml:"cpu_percent,omitempty"`

	// Network faults (partition, isolate, site-isolate, loss, rate, delay; docs/faults.md). They need a backend
	// that runs every node in its own network namespace (imslab run --netns, or compose).

	// Peers is the other side of a partition (nodes, pools, site:<name>); for loss, rate and delay it limits the
	// fault to traffic to/from those nodes (empty: all of the node's traffic).
	Peers []string `yaml:"peers,omitempty"`
	// Direction is the traffic a network fault affects, seen from the target: both (default), in, out.
	Direction string `yaml:"direction,omitempty"`
	// Reject answers with ICMP port unreachable / TCP reset instead of the default silent drop.
	Reject bool `yaml:"reject,omitempty"`
	// Loss is loss's share of packets dropped, in percent (0 < loss <= 100).
	Loss float64 `yaml:"loss,omitempty"`
	// Rate is rate's bandwidth in tc syntax ("800kbit", "1mbit").
	Rate string `yaml:"rate,omitempty"`
	// Delay and DelayJitter are delay's one-way added delay and its uniform variation (± DelayJitter).
	Delay       time.Duration `yaml:"delay,omitempty"`
	DelayJitter time.Duration `yaml:"delay_jitter,omitempty"`

	// Randomised faults (docs/scenarios.md, "Random instants and victims"): drawn from the run's seed when the
	// run starts (Scenario.Resolve), so a run repeated with its seed hits the same node at the same instant.

	// Jitter randomises the instant: the fault is injected at a time uniform in [At, At+Jitter).
	Jitter time.Duration `yaml:"jitter,omitempty"`
	// PlannedTarget and PlannedAt are the target and instant as the file gives them (random:pcscf, 20s) once
	// Resolve has replaced Target and At by the drawn ones ("" and 0 before, or when nothing was drawn).
	PlannedTarget string        `yaml:"-"`
	PlannedAt     time.Duration `yaml:"-"`
	drawn         bool          // Resolve has drawn Target and At

	// PeerNodes are the nodes Peers names, resolved by Scenario.Validate.
	PeerNodes []string `yaml:"-"`
	// Nodes are the nodes Target names, resolved by Scenario.Validate (empty: Target alone).
	Nodes []string `yaml:"-"`
}

// resolvePeers fills in PeerNodes from Peers (a network fault's peers: nodes, pools, sites), reporting each
// peer that names none; false if one did.
func (f *Fault) resolvePeers(v *validator, field string, t *topology.Topology) bool {
	f.PeerNodes = nil
	good := true
	for j, p := range f.Peers {
		nodes, found := t.Target(p)
		if !found {
			v.add(fmt.Sprintf("%s.peers[%d]", field, j), "%q is not a node of the topology, a pool or a site (%s)", p,
				strings.Join(t.TargetNames(), ", "))
			good = false
			continue
		}
		for _, n := range nodes {
			if !slices.Contains(f.PeerNodes, n) {
				f.PeerNodes = append(f.PeerNodes, n)
			}
		}
	}
	return good
}

// targetNodes returns the nodes the fault acts on.
func (f Fault) targetNodes() []string {
	if len(f.Nodes) == 0 {
		return []string{f.Target}
	}
	return f.Nodes
}

// String describes the fault in a few words: "kill pcscf1 at 20s for 10s".
func (f Fault) String() string {
	s := fmt.Sprintf("%s %s at %s", f.Kind, f.Target, f.At)
	switch {
	case f.drawn:
		plan := f.PlannedTarget
		if plan == "" {
			plan = f.Target
		}
		s += fmt.Sprintf(" (drawn from %s at %s", plan, f.PlannedAt)
		if f.Jitter > 0 {
			s += " + up to " + f.Jitter.String()
		}
		s += ")"
	case f.Jitter > 0:
		s += " + up to " + f.Jitter.String()
	}
	if f.For > 0 {
		s += " for " + f.For.String()
	}
	if f.Mode != "" {
		s += " mode " + f.Mode
	}
	if f.Period > 0 {
		s += " every " + f.Period.String()
	}
	if f.CPUPercent > 0 {
		s += fmt.Sprintf(" at %d%% CPU", f.CPUPercent)
	}
	if f.Loss > 0 {
		s += fmt.Sprintf(" %g%% loss", f.Loss)
	}
	if f.Rate != "" {
		s += " rate " + f.Rate
	}
	if f.Delay > 0 {
		s += " delay " + f.Delay.String()
		if f.DelayJitter > 0 {
			s += " ± " + f.DelayJitter.String()
		}
	}
	if len(f.Peers) > 0 {
		s += " peers " + strings.Join(f.Peers, ",")
	}
	if f.Direction != "" {
		s += " direction " + f.Direction
	}
	if f.Reject {
		s += " reject"
	}
	return s
}

// Defaults applied before a file is decoded, so a field the file leaves out keeps them.
const (
	defaultRegisterRate = 50
	defaultHold         = 2 * time.Second
	defaultCallTimeout  = 10 * time.Second
)

func defaults() Scenario {
	return Scenario{
		Topology: *topology.Default(),
		Traffic: Traffic{FirstUser: 1, RegisterRate: defaultRegisterRate, Hold: defaultHold, CallTimeout: defaultCallTimeout,
			OnRestoration504: ue.RestorationReregister},
	}
}

// FieldError is a problem with one field of a scenario file. Field is its path (faults[1].target,
// topology.pools.pcscf.size); Line is the line of the file (0 when unknown).
type FieldError struct {
	Field string
	Line  int
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("scenario: line %d: %s: %s", e.Line, e.Field, e.Msg)
	}
	return fmt.Sprintf("scenario: %s: %s", e.Field, e.Msg)
}

// Load reads, decodes and validates a scenario file. A scenario without a name is named after the file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s, err := parse(b, strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".yaml"), ".yml"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a scenario strictly (an unknown field is an error naming it and its line) over the defaults and
// validates it.
func Parse(b []byte) (*Scenario, error) { return parse(b, "") }

func parse(b []byte, defaultName string) (*Scenario, error) {
	s := defaults()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("scenario: empty file")
		}
		return nil, fmt.Errorf("scenario: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("scenario: more than one YAML document")
	}
	if s.Name == "" {
		s.Name = defaultName
	}
	if err := s.Validate(); err != nil {
		var doc yaml.Node
		if yaml.Unmarshal(b, &doc) == nil {
			annotateLines(err, &doc)
		}
		return nil, err
	}
	return &s, nil
}

type validator struct{ errs []error }

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Validate checks the scenario and names every bad field (the errors are *FieldError, joined).
func (s *Scenario) Validate() error {
	v := &validator{}
	if s.Name == "" {
		v.add("name", "missing")
	} else if strings.ContainsAny(s.Name, `/\ `) {
		v.add("name", "%q: must not contain '/', '\\' or spaces (it names run directories)", s.Name)
	}
	if s.Duration < time.Second {
		v.add("duration", "must be at least 1s, is %s", s.Duration)
	}
	if err := s.Topology.Validate(); err != nil {
		errs := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = j.Unwrap()
		}
		for _, e := range errs {
			if fe, ok := errors.AsType[*topology.FieldError](e); ok {
				v.add("topology."+fe.Field, "%s", fe.Msg)
			} else {
				v.add("topology", "%v", e)
			}
		}
	}
	if exp := s.Topology.Registration.Expires; exp > 0 && exp%time.Second != 0 {
		v.add("topology.registration.expires", "must be whole seconds, is %s", exp)
	}
	s.Traffic.validate(v)
	s.validateFaults(v)
	for i, e := range s.Expectations {
		e.validate(v, fmt.Sprintf("expectations[%d]", i))
	}
	return errors.Join(v.errs...)
}

// MaxUser is the largest subscriber number a scenario's phones and probers may use: user999999. User names keep
// at least four digits (user0001…user9999, then user10000…); the lab's HSS provisions user0001…user<last> for
// the run (topology.MaxLabSubscribers).
const MaxUser = topology.MaxLabSubscribers

// LastUser is the highest subscriber number the traffic uses: the last phone, or the last reachability prober.
func (t *Traffic) LastUser() int {
	last := t.FirstUser + t.Phones - 1
	r := t.Reachability
	r.ApplyDefaults()
	if r.Interval > 0 {
		last += r.Probers
	}
	return last
}

// Provision raises the topology's lab population (hss.lab_subscriber_count) so that the HSS provisions every
// subscriber the traffic uses, user0001…user<LastUser>. It leaves the topology alone when the lab's subscribers
// are off (lab_subscribers: false, a subscribers_file provisions them) or already cover the traffic.
func (t *Traffic) Provision(topo *topology.Topology) {
	if last := t.LastUser(); topo.HSS.LabSubscribers && last > max(topo.HSS.LabSubscriberCount, 1000) {
		topo.HSS.LabSubscriberCount = last
	}
}

func badRate(r float64) bool { return r < 0 || math.IsNaN(r) || math.IsInf(r, 0) }

func (t *Traffic) validate(v *validator) {
	switch {
	case t.Phones < 1:
		v.add("traffic.phones", "must be at least 1, is %d", t.Phones)
	case t.FirstUser < 1:
		v.add("traffic.first_user", "must be at least 1, is %d", t.FirstUser)
	case t.FirstUser+t.Phones-1 > MaxUser:
		v.add("traffic.phones", "users %d..%d go beyond user%d, the largest population the lab provisions",
			t.FirstUser, t.FirstUser+t.Phones-1, MaxUser)
	}
	if badRate(t.RegisterRate) || t.RegisterRate == 0 {
		v.add("traffic.register_rate", "must be a positive number, is %v", t.RegisterRate)
	}
	if badRate(t.CallRate) {
		v.add("traffic.call_rate", "must be zero or a positive number, is %v", t.CallRate)
	}
	if t.ProbeInterval < 0 {
		v.add("traffic.probe_interval", "must not be negative, is %s", t.ProbeInterval)
	}
	if t.Hold < 0 {
		v.add("traffic.hold", "must not be negative, is %s", t.Hold)
	}
	if t.CallTimeout <= 0 {
		v.add("traffic.call_timeout", "must be positive, is %s", t.CallTimeout)
	}
	if t.Mix != nil && (*t.Mix < 0 || *t.Mix > 1 || math.IsNaN(*t.Mix)) {
		v.add("traffic.mix", "must be between 0 and 1, is %v", *t.Mix)
	}
	if t.OnRestoration504 != ue.RestorationReregister && t.OnRestoration504 != ue.RestorationIgnore {
		v.add("traffic.on_restoration_504", "must be %s or %s, is %q", ue.RestorationReregister, ue.RestorationIgnore,
			t.OnRestoration504)
	}
	if t.RefreshPhase != "" && t.RefreshPhase != ue.RefreshLockstep && t.RefreshPhase != ue.RefreshSteady {
		v.add("traffic.refresh_phase", "must be %s or %s, is %q", ue.RefreshLockstep, ue.RefreshSteady, t.RefreshPhase)
	}
	if se := t.SessionExpires; se < 0 || se > 0 && (se < ue.MinSessionExpires || se%time.Second != 0) {
		v.add("traffic.session_expires", "must be 0 (off) or whole seconds of at least %s, is %s", ue.MinSessionExpires, se)
	}
	if m := t.model(); m != nil {
		if err := m.Validate("traffic"); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ")
			// The scenario spells the model's holding fields as holding.dist and holding.mean.
			switch field {
			case "traffic.holding":
				field = "traffic.holding.dist"
			case "traffic.holding_mean":
				field = "traffic.holding.mean"
			}
			v.add(field, "%s", msg)
		}
	}
	for i, st := range t.Steps {
		field := fmt.Sprintf("traffic.steps[%d]", i)
		if t.CallRate <= 0 {
			v.add(field, "a load step needs traffic.call_rate above 0 (it changes the random calls' rate)")
			break
		}
		if st.At < 0 || (i > 0 && st.At <= t.Steps[i-1].At) {
			v.add(field+".at", "%s: must not be negative and must come after the step before", st.At)
		}
		if badRate(st.CallRate) {
			v.add(field+".call_rate", "must be zero or a positive number, is %v", st.CallRate)
		}
	}
	r := t.Reachability
	r.ApplyDefaults()
	if err := r.Validate("traffic.reachability"); err != nil {
		field, msg, _ := strings.Cut(err.Error(), ": ")
		v.add(field, "%s", msg)
	} else if r.Interval > 0 && t.FirstUser+t.Phones+r.Probers-1 > MaxUser {
		v.add("traffic.reachability.probers", "prober users %d..%d go beyond user%d, the largest the lab provisions",
			t.FirstUser+t.Phones, t.FirstUser+t.Phones+r.Probers-1, MaxUser)
	}
}

func (s *Scenario) validateFaults(v *validator) {
	type span struct {
		from, to time.Duration
		i        int
	}
	byNode := map[string][]span{}
	for i := range s.Faults {
		f := &s.Faults[i]
		field := fmt.Sprintf("faults[%d]", i)
		k, ok := faultKinds[f.Kind]
		if !ok {
			v.add(field+".kind", "%q is not a fault kind (%s)", f.Kind, strings.Join(FaultKindNames(), ", "))
		}
		if f.Target == "" && ok {
			f.Target = defaultTarget(f.Kind, &s.Topology)
		}
		f.Nodes = nil
		var spanNodes []string // the nodes the fault may act on (a random target: every member of its pool)
		if member, isBackup := strings.CutPrefix(f.Target, BackupTargetPrefix); isBackup {
			if b, bad := backupOf(member, &s.Topology); bad != "" {
				v.add(field+".target", "%s", bad)
			} else {
				spanNodes = []string{b}
				if !f.resolvePeers(v, field, &s.Topology) {
					ok = false // the peers are reported; the kind's check would repeat it
				}
				if ok && k.check != nil {
					g := *f
					g.Target = b
					if bad, msg := k.check(g, spanNodes, &s.Topology); bad != "" {
						v.add(field+"."+bad, "%s", msg)
					}
				}
			}
		} else if pool, isRandom := strings.CutPrefix(f.Target, RandomTargetPrefix); isRandom {
			if members, bad := randomMembers(pool, &s.Topology); bad != "" {
				v.add(field+".target", "%s", bad)
			} else {
				spanNodes = members
				if !f.resolvePeers(v, field, &s.Topology) {
					ok = false
				}
				if ok && k.check != nil { // every member is of the same kind: check the first
					g := *f
					g.Target = members[0]
					if bad, msg := k.check(g, members[:1], &s.Topology); bad != "" {
						v.add(field+"."+bad, "%s", msg)
					}
				}
			}
		} else if f.Target == "" {
			v.add(field+".target", "missing")
		} else if nodes, found := s.Topology.Target(f.Target); !found {
			v.add(field+".target", "%q is not a node of the topology, a pool or a site (%s)", f.Target,
				strings.Join(s.Topology.TargetNames(), ", "))
		} else {
			f.Nodes = nodes
			if !f.resolvePeers(v, field, &s.Topology) {
				ok = false // the peers are reported; the kind's check would repeat it
			}
			if ok && k.check != nil {
				if bad, msg := k.check(*f, nodes, &s.Topology); bad != "" {
					v.add(field+"."+bad, "%s", msg)
				}
			}
		}
		switch {
		case f.At < 0:
			v.add(field+".at", "must not be negative, is %s", f.At)
		case s.Duration > 0 && f.At >= s.Duration:
			v.add(field+".at", "%s is not before the end of the run (duration %s)", f.At, s.Duration)
		case f.Jitter < 0:
			v.add(field+".jitter", "must not be negative, is %s", f.Jitter)
		case s.Duration > 0 && f.At+f.Jitter > s.Duration:
			v.add(field+".jitter", "the fault could be injected as late as %s, after the end of the run (duration %s)",
				f.At+f.Jitter, s.Duration)
		}
		lasts := ok && (k.Fix != nil || k.Run != nil)
		switch {
		case f.For < 0:
			v.add(field+".for", "must not be negative, is %s", f.For)
		case f.For > 0 && ok && !lasts:
			v.add(field+".for", "a %s fault has no duration (it is over once done); remove for", f.Kind)
		case f.For == 0 && ok && (f.Kind == "failback" || f.Kind == "flap"):
			v.add(field+".for", "missing: a %s fault needs for (when the member comes back for good)", f.Kind)
		case f.For > 0 && s.Duration > 0 && f.At+f.Jitter+f.For > s.Duration:
			v.add(field+".for", "the fault would end at %s (at the latest), after the end of the run (duration %s); omit for to "+
				"leave it in place until the end", f.At+f.Jitter+f.For, s.Duration)
		}
		end := s.Duration
		if f.For > 0 {
			end = f.At + f.Jitter + f.For
		}
		if ok && !lasts {
			end = f.At + f.Jitter
		}
		if spanNodes == nil {
			spanNodes = f.targetNodes()
		}
		for _, n := range spanNodes {
			byNode[n] = append(byNode[n], span{f.At, end, i})
		}
	}
	var nodes []string
	for n := range byNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	reported := map[int]bool{}
	for _, n := range nodes {
		spans := byNode[n]
		slices.SortStableFunc(spans, func(a, b span) int { return int(a.from - b.from) })
		for j := 1; j < len(spans); j++ {
			if spans[j].from <= spans[j-1].to && !reported[spans[j].i] {
				reported[spans[j].i] = true
				v.add(fmt.Sprintf("faults[%d].at", spans[j].i), "%s overlaps faults[%d] on %s (one fault per node "+
					"at a time)", spans[j].from, spans[j-1].i, n)
			}
		}
	}
}

// Mean expected calls each phone places (and receives) in a window of traffic, for a sanity hint.
func (s *Scenario) callsPerPhone(window time.Duration) float64 {
	if s.Traffic.Phones == 0 {
		return 0
	}
	per := s.Traffic.CallRate * window.Seconds() / float64(s.Traffic.Phones)
	if s.Traffic.ProbeInterval > 0 {
		per += window.Seconds() / s.Traffic.ProbeInterval.Seconds()
	}
	return per
}

// annotateLines fills in the line of every *FieldError in err from the parsed document.
func annotateLines(err error, doc *yaml.Node) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if fe, ok := errors.AsType[*FieldError](e); ok && fe.Line == 0 {
			fe.Line = topology.FieldLine(doc, fe.Field)
		}
	}
}
