package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// Lab is what the faults act on: the process control of internal/harness/lab (*lab.Lab implements it).
type Lab interface {
	Start(ctx context.Context, node string) error
	Stop(node string, graceful bool) error
	Kill(node string) error
	Pause(node string) error
	Resume(node string) error
	Restart(ctx context.Context, node string) error
}

// FaultKind is a named kind of fault: how it is injected and, when it lasts, how it is fixed.
type FaultKind struct {
	Name string
	// Doc says in a sentence what the fault does, for researchers (docs/scenarios.md, --help).
	Doc string
	// Inject puts the fault in place on one node of the fault's target (the injector calls it for every node of
	// a pool or site target, concurrently).
	Inject func(ctx context.Context, l Lab, f Fault, node string) error
	// Fix undoes it on one node after the fault's `for`; nil for a fault that is over once injected (restart).
	Fix func(ctx context.Context, l Lab, f Fault, node string) error
	// Run, when set, carries out the whole fault instead of Inject/Fix (flap: repeated actions until the heal).
	Run func(ctx context.Context, l Lab, f Fault, node string, sleepUntil func(time.Duration) bool) error
	// Active is the word for the node's state while the fault lasts ("killed", "paused").
	Active string
	// Records: the injector records the fault's inject and heal in the lab's events (the kinds added with issue
	// 11; the older kinds are recorded by the lab's own fault events only, as they always were).
	Records bool
	// check validates the kind's own fields and target (nil: any target, no parameters); it returns the bad
	// field (relative to the fault: "target", "mode") and why.
	check func(f Fault, nodes []string, t *topology.Topology) (field, msg string)
}

// Modes of hss-down (kill, pause), flap (kill, partition) and dns-down (kill, unreachable).
const (
	ModeKill  = "kill"
	ModePause = "pause"
	// ModePartition: flap partitions and heals the target (from its peers, or from everyone) instead of
	// killing and starting it.
	ModePartition = "partition"
	// ModeUnreachable: dns-down cuts dnsd off from every node (isolate) instead of killing it.
	ModeUnreachable = "unreachable"
)

func kill(_ context.Context, l Lab, _ Fault, n string) error      { return l.Kill(n) }
func start(ctx context.Context, l Lab, _ Fault, n string) error   { return l.Start(ctx, n) }
func pause(_ context.Context, l Lab, _ Fault, n string) error     { return l.Pause(n) }
func resume(_ context.Context, l Lab, _ Fault, n string) error    { return l.Resume(n) }
func stop(_ context.Context, l Lab, _ Fault, n string) error      { return l.Stop(n, true) }
func restart(ctx context.Context, l Lab, _ Fault, n string) error { return l.Restart(ctx, n) }
func noParams(f Fault) (string, string) {
	switch {
	case f.Mode != "":
		return "mode", "only for hss-down, dns-down and flap"
	case f.Period != 0:
		return "period", "only for flap"
	case f.CPUPercent != 0:
		return "cpu_percent", "only for slow"
	}
	return noNetParams(f)
}

// noNetParams rejects the network-fault fields on a kind that takes none of them.
func noNetParams(f Fault) (string, string) {
	switch {
	case len(f.Peers) > 0:
		return "peers", "only for partition, loss and delay"
	case f.Direction != "":
		return "direction", "only for partition, loss and rate"
	case f.Reject:
		return "reject", "only for partition"
	case f.Loss != 0:
		return "loss", "only for loss"
	case f.Rate != "":
		return "rate", "only for rate"
	case f.Delay != 0:
		return "delay", "only for delay"
	case f.DelayJitter != 0:
		return "delay_jitter", "only for delay"
	}
	return "", ""
}

// oneNode accepts a target that is one node of the given kinds (any kind when none is given).
func oneNode(kinds ...topology.Kind) func(Fault, []string, *topology.Topology) (string, string) {
	return func(f Fault, nodes []string, t *topology.Topology) (string, string) {
		if field, msg := noParams(f); field != "" {
			return field, msg
		}
		return checkOneNode(f, nodes, t, kinds...)
	}
}

func checkOneNode(f Fault, nodes []string, t *topology.Topology, kinds ...topology.Kind) (string, string) {
	if len(nodes) != 1 || nodes[0] != f.Target {
		return "target", fmt.Sprintf("%q: a %s fault acts on one node, not a pool or a site", f.Target, f.Kind)
	}
	if len(kinds) > 0 {
		n, _ := t.Node(nodes[0])
		if !slices.Contains(kinds, n.Kind) {
			want := make([]string, len(kinds))
			for i, k := range kinds {
				want[i] = string(k)
			}
			return "target", fmt.Sprintf("%q is a node of kind %s; a %s fault acts on a %s", f.Target, n.Kind, f.Kind,
				strings.Join(want, " or "))
		}
	}
	return "", ""
}

// faultKinds is the registry of fault kinds.
var faultKinds = map[string]FaultKind{
	"kill": {
		Name:   "kill",
		Doc:    "SIGKILL: the node dies at once, without answering anything; with for, it is started again (empty) after that long",
		Inject: kill, Fix: start, Active: "killed",
		check: func(f Fault, _ []string, _ *topology.Topology) (string, string) { return noParams(f) },
	},
	"pause": {
		Name:   "pause",
		Doc:    "SIGSTOP: the node freezes with its sockets open and answers nothing; with for, SIGCONT after that long (it resumes with its state)",
		Inject: pause, Fix: resume, Active: "paused",
		check: func(f Fault, _ []string, _ *topology.Topology) (string, string) { return noParams(f) },
	},
	"stop": {
		Name:   "stop",
		Doc:    "graceful stop: SIGTERM (SIGKILL after the lab's grace period); with for, it is started again (empty) after that long",
		Inject: stop, Fix: start, Active: "stopped",
		check: func(f Fault, _ []string, _ *topology.Topology) (string, string) { return noParams(f) },
	},
	"restart": {
		Name:   "restart",
		Doc:    "graceful stop and immediate start: the node comes back at once, without the state it had in memory",
		Inject: restart, Active: "restarting",
		check: func(f Fault, _ []string, _ *topology.Topology) (string, string) { return noParams(f) },
	},
	"site-down": {
		Name: "site-down",
		Doc: "every node of a site (target site:<name>) SIGKILLed at the same instant; with for, all started again " +
			"(empty, the HSS on its data) after that long",
		Inject: kill, Fix: start, Active: "down", Records: true,
		check: func(f Fault, nodes []string, _ *topology.Topology) (string, string) {
			if field, msg := noParams(f); field != "" {
				return field, msg
			}
			if !strings.HasPrefix(f.Target, topology.SiteTargetPrefix) {
				return "target", fmt.Sprintf("%q: a site-down fault names a site (site:<name>)", f.Target)
			}
			return "", ""
		},
	},
	"hss-down": {
		Name: "hss-down",
		Doc: "the HSS killed (mode: kill, the default) or frozen (mode: pause); with for, started again on its " +
			"database (or resumed) after that long; target defaults to the HSS",
		Inject: func(ctx context.Context, l Lab, f Fault, n string) error {
			if f.Mode == ModePause {
				return l.Pause(n)
			}
			return l.Kill(n)
		},
		Fix: func(ctx context.Context, l Lab, f Fault, n string) error {
			if f.Mode == ModePause {
				return l.Resume(n)
			}
			return l.Start(ctx, n)
		},
		Active: "down", Records: true,
		check: func(f Fault, nodes []string, t *topology.Topology) (string, string) {
			switch {
			case f.Mode != "" && f.Mode != ModeKill && f.Mode != ModePause:
				return "mode", fmt.Sprintf("%q: must be %s or %s", f.Mode, ModeKill, ModePause)
			case f.Period != 0:
				return "period", "only for flap"
			case f.CPUPercent != 0:
				return "cpu_percent", "only for slow"
			}
			if field, msg := noNetParams(f); field != "" {
				return field, msg
			}
			return checkOneNode(f, nodes, t, topology.KindHSS)
		},
	},
	"dns-down": {
		Name: "dns-down",
		Doc: "the lab DNS killed (mode: kill, the default; with for, started again after that long) or, with mode: " +
			"unreachable, left running but cut off from every node (isolated in its namespace; with for, healed; " +
			"network namespaces); target defaults to dnsd",
		Inject: func(ctx context.Context, l Lab, f Fault, n string) error {
			if f.Mode == ModeUnreachable {
				return isolateNet(ctx, l, f, n)
			}
			return l.Kill(n)
		},
		Fix: func(ctx context.Context, l Lab, f Fault, n string) error {
			if f.Mode == ModeUnreachable {
				return healNet(ctx, l, f, n)
			}
			return l.Start(ctx, n)
		},
		Active: "down", Records: true,
		check: func(f Fault, nodes []string, t *topology.Topology) (string, string) {
			switch f.Mode {
			case "", ModeKill, ModeUnreachable:
			default:
				return "mode", fmt.Sprintf("%q: must be %s or %s", f.Mode, ModeKill, ModeUnreachable)
			}
			g := f
			g.Mode = ""
			if field, msg := noParams(g); field != "" {
				return field, msg
			}
			return checkOneNode(f, nodes, t, topology.KindDNS)
		},
	},
	"failback": {
		Name: "failback",
		Doc: "a member killed (SIGKILL) and started again, empty, after for (required): what happens to the users " +
			"it had, to their registrations at the S-CSCF, to calls in flight",
		Inject: kill, Fix: start, Active: "killed", Records: true,
		check: oneNode(topology.KindPCSCF, topology.KindSCSCF),
	},
	"flap": {
		Name: "flap",
		Doc: "a node killed at at, started again a period later, killed again a period after that, … until for " +
			"is over; it is left running. With mode: partition, the node is partitioned from its peers (isolated " +
			"when it has none) and healed instead, every period, and left healed (network namespaces)",
		Run: func(ctx context.Context, l Lab, f Fault, n string, sleepUntil func(time.Duration) bool) error {
			down, up := func() error { return l.Kill(n) }, func() error { return l.Start(ctx, n) }
			if f.Mode == ModePartition {
				down = func() error { return flapCut(ctx, l, f, n) }
				up = func() error { return healNet(ctx, l, f, n) }
			}
			return flapRun(f, down, up, sleepUntil)
		},
		Active: "flapping", Records: true,
		check: func(f Fault, nodes []string, t *topology.Topology) (string, string) {
			switch {
			case f.Mode != "" && f.Mode != ModeKill && f.Mode != ModePartition:
				return "mode", fmt.Sprintf("%q: must be %s or %s", f.Mode, ModeKill, ModePartition)
			case f.Period <= 0:
				return "period", "missing: how long each down and each up phase lasts"
			case f.For < 2*f.Period:
				return "for", fmt.Sprintf("%s: a flap lasts at least two periods (2 × %s)", f.For, f.Period)
			case f.CPUPercent != 0:
				return "cpu_percent", "only for slow"
			}
			if f.Mode == ModePartition {
				g := f
				g.Mode, g.Period = "", 0
				if field, msg := checkNet(g, "peers", "direction", "reject"); field != "" {
					return field, msg
				}
			} else {
				switch {
				case len(f.Peers) > 0:
					return "peers", "only for a flap with mode: partition (a kill flap has no peers)"
				case f.Direction != "":
					return "direction", "only for a flap with mode: partition"
				case f.Reject:
					return "reject", "only for a flap with mode: partition"
				}
				if field, msg := noNetParams(f); field != "" {
					return field, msg
				}
			}
			return checkOneNode(f, nodes, t)
		},
	},
	"slow": {
		Name: "slow",
		Doc: "gray failure: the node gets cpu_percent % of one CPU (a CFS quota of its cgroup), so it stays alive " +
			"but answers late; with for, the limit is lifted. Local backend: its process moved into a cgroup v1 cpu " +
			"cgroup of its own (root); compose: its container's quota set through the engine (docker update)",
		Inject: func(_ context.Context, l Lab, f Fault, n string) error {
			t, ok := l.(Throttler)
			if !ok {
				return fmt.Errorf("%w: this backend cannot limit a node's CPU", ErrUnsupported)
			}
			return t.Throttle(n, f.CPUPercent)
		},
		Fix: func(_ context.Context, l Lab, _ Fault, n string) error {
			t, ok := l.(Throttler)
			if !ok {
				return fmt.Errorf("%w: this backend cannot limit a node's CPU", ErrUnsupported)
			}
			return t.Unthrottle(n)
		},
		Active: "slowed", Records: true,
		check: func(f Fault, nodes []string, t *topology.Topology) (string, string) {
			switch {
			case f.CPUPercent < 1 || f.CPUPercent > 99:
				return "cpu_percent", fmt.Sprintf("%d: must be 1..99 (the share of one CPU the node gets)", f.CPUPercent)
			case f.Mode != "":
				return "mode", "only for hss-down"
			case f.Period != 0:
				return "period", "only for flap"
			}
			if field, msg := noNetParams(f); field != "" {
				return field, msg
			}
			return checkOneNode(f, nodes, t)
		},
	},
}

func init() {
	for _, k := range netKinds() {
		faultKinds[k.Name] = k
	}
}

// ErrUnsupported is a fault the backend cannot carry out.
var ErrUnsupported = errors.New("fault not supported")

// Throttler limits a node's CPU (the local lab: cgroup v1 cpu controller; compose: the container's quota). Throttle records the applied quota
// in the lab's events.
type Throttler interface {
	Throttle(node string, cpuPercent int) error
	Unthrottle(node string) error
}

// NetLab is a lab that can apply network faults in its nodes' network namespaces (the namespace backend of
// internal/harness/lab, the compose backend). A lab without it (the plain local backend, every node on 127.0.0.1) cannot
// run a scenario with a network fault.
type NetLab interface {
	// NetCheck returns nil when network faults can be applied, or an error that says what is needed.
	NetCheck() error
	// NetAddrs returns the addresses a node is reached at (every network it is on).
	NetAddrs(node string) ([]netip.Addr, error)
	// ApplyNet applies spec in node's network namespace under key (netfault.Set.Apply); HealNet heals it. A Rate
	// or Delay without a Device is for the lab to bind to the node's interface(s).
	ApplyNet(ctx context.Context, node, key string, spec netfault.Spec) error
	HealNet(ctx context.Context, node, key string) error
}

// EventRecorder records an event in the lab's events (events/lab.jsonl).
type EventRecorder interface {
	Event(ev obs.Event)
}

// defaultTarget is the target of a kind whose target may be left out (the HSS, the DNS).
func defaultTarget(kind string, t *topology.Topology) string {
	switch kind {
	case "hss-down":
		return t.HSS.Host
	case "dns-down":
		return t.DNS.Host
	}
	return ""
}

// FaultKinds returns the registered fault kinds, sorted by name.
func FaultKinds() []FaultKind {
	var out []FaultKind
	for _, n := range FaultKindNames() {
		out = append(out, faultKinds[n])
	}
	return out
}

// FaultKindNames returns the names of the registered fault kinds, sorted.
func FaultKindNames() []string {
	var names []string
	for n := range faultKinds {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Action is one step of a fault schedule: a fault injected or fixed at an offset from t0.
type Action struct {
	At    time.Duration
	Fault int  // index in Scenario.Faults
	Fix   bool // false: inject
}

// Schedule returns the faults' actions in the order they happen (ties keep the file's order, injections of
// one fault before its fix).
func Schedule(faults []Fault) []Action {
	var out []Action
	for i, f := range faults {
		out = append(out, Action{At: f.At, Fault: i})
		if k, ok := faultKinds[f.Kind]; ok && k.Fix != nil && f.For > 0 {
			out = append(out, Action{At: f.At + f.For, Fault: i, Fix: true})
		}
	}
	slices.SortStableFunc(out, func(a, b Action) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return out
}

// ActionError is an action of the schedule that failed.
type ActionError struct {
	Fault Fault
	Fix   bool
	Err   error
}

func (e *ActionError) Error() string {
	what := "inject"
	if e.Fix {
		what = "fix"
	}
	return fmt.Sprintf("fault %s: %s: %v", e.Fault, what, e.Err)
}

func (e *ActionError) Unwrap() error { return e.Err }

// Injector carries out a fault schedule against a lab, each action at t0 + its offset.
type Injector struct {
	lab    Lab
	faults []Fault
	t0     time.Time

	mu     sync.Mutex
	active map[int]bool // faults in place
}

// NewInjector prepares the schedule of faults against l, with offsets from t0.
func NewInjector(l Lab, faults []Fault, t0 time.Time) *Injector {
	return &Injector{lab: l, faults: faults, t0: t0, active: map[int]bool{}}
}

// Run carries out the schedule until it is done or ctx ends. Actions on different faults run concurrently (a
// restart that takes seconds does not delay another fault); the actions of one fault run in order. Each failed
// action is passed to onErr (an *ActionError) as it happens; a fault whose injection failed is not fixed.
func (in *Injector) Run(ctx context.Context, onErr func(error)) {
	var wg sync.WaitGroup
	for i := range in.faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.runFault(ctx, i, onErr)
		}()
	}
	wg.Wait()
}

func (in *Injector) runFault(ctx context.Context, i int, onErr func(error)) {
	f := in.faults[i]
	k, ok := faultKinds[f.Kind]
	if !ok {
		onErr(&ActionError{Fault: f, Err: fmt.Errorf("unknown kind %q", f.Kind)})
		return
	}
	if !sleepUntil(ctx, in.t0.Add(f.At)) {
		return
	}
	nodes := f.targetNodes()
	in.setActive(i, true)
	if k.Records {
		in.record(false, f, nodes)
	}
	if k.Run != nil {
		err := k.Run(ctx, in.lab, f, nodes[0], func(off time.Duration) bool { return sleepUntil(ctx, in.t0.Add(off)) })
		in.setActive(i, false)
		if err != nil {
			onErr(&ActionError{Fault: f, Err: err})
			return
		}
		if ctx.Err() == nil {
			in.record(true, f, nodes)
		}
		return
	}
	if err := each(nodes, func(n string) error { return k.Inject(ctx, in.lab, f, n) }); err != nil {
		in.setActive(i, false)
		onErr(&ActionError{Fault: f, Err: err})
		return
	}
	if k.Fix == nil {
		in.setActive(i, false) // over once done (restart)
		return
	}
	if f.For <= 0 {
		return // in place until the end
	}
	if !sleepUntil(ctx, in.t0.Add(f.At+f.For)) {
		return
	}
	err := each(nodes, func(n string) error { return k.Fix(ctx, in.lab, f, n) })
	in.setActive(i, false)
	if err != nil {
		onErr(&ActionError{Fault: f, Fix: true, Err: err})
		return
	}
	if k.Records {
		in.record(true, f, nodes)
	}
}

// each runs do for every node: directly for one, concurrently for several (a site goes down at one instant).
func each(nodes []string, do func(string) error) error {
	if len(nodes) == 1 {
		return do(nodes[0])
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for j, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = do(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// record writes a fault's inject (obs.Fault) or heal (obs.FaultHeal) event to the lab's events, when the lab
// records events.
func (in *Injector) record(heal bool, f Fault, nodes []string) {
	r, ok := in.lab.(EventRecorder)
	if !ok {
		return
	}
	ev := obs.FaultFields{Fault: f.Kind, Target: f.Target, Nodes: nodes, Mode: f.Mode}
	if f.For > 0 {
		ev.ForS = f.For.Seconds()
	}
	if f.Period > 0 {
		ev.PeriodS = f.Period.Seconds()
	}
	if f.CPUPercent > 0 {
		ev.CPUPercent = f.CPUPercent
	}
	if f.needsNet() {
		if len(f.Peers) > 0 {
			ev.Peers, ev.PeerNodes = f.Peers, f.PeerNodes
		}
		ev.Direction, ev.Reject, ev.Rate = f.Direction, f.Reject, f.Rate
		if f.Loss > 0 {
			ev.LossPercent = f.Loss
		}
		if f.Delay > 0 {
			ev.DelayMs = float64(f.Delay) / 1e6
		}
		if f.DelayJitter > 0 {
			ev.DelayJitterMs = float64(f.DelayJitter) / 1e6
		}
	}
	if heal {
		r.Event(obs.FaultHeal(ev))
	} else {
		r.Event(obs.Fault(ev))
	}
}

func (in *Injector) setActive(i int, on bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if on {
		in.active[i] = true
	} else {
		delete(in.active, i)
	}
}

// Active describes the faults in place now ("pcscf1 killed"), in the file's order.
func (in *Injector) Active() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for i, f := range in.faults {
		if in.active[i] {
			out = append(out, f.Target+" "+faultKinds[f.Kind].Active)
		}
	}
	return out
}

// flapRun carries out a flap: down at at, up a period later, down again a period after that, … until for is
// over, then up if it was left down. It stops (returning nil) when sleepUntil reports the run is over.
func flapRun(f Fault, down, up func() error, sleepUntil func(time.Duration) bool) error {
	isUp := true
	for off := time.Duration(0); off < f.For; off += f.Period {
		if off > 0 && !sleepUntil(f.At+off) {
			return nil
		}
		var err error
		if isUp {
			err = down()
		} else {
			err = up()
		}
		if err != nil {
			return err
		}
		isUp = !isUp
	}
	if !sleepUntil(f.At + f.For) {
		return nil
	}
	if !isUp {
		return up()
	}
	return nil
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
