package scenario

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Lab is what the faults act on: the process control of internal/lab (*lab.Lab implements it).
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
	// Inject puts the fault in place.
	Inject func(ctx context.Context, l Lab, target string) error
	// Fix undoes it after the fault's `for`; nil for a fault that is over once injected (restart).
	Fix func(ctx context.Context, l Lab, target string) error
	// Active is the word for the node's state while the fault lasts ("killed", "paused").
	Active string
}

// faultKinds is the registry of fault kinds.
var faultKinds = map[string]FaultKind{
	"kill": {
		Name:   "kill",
		Doc:    "SIGKILL: the node dies at once, without answering anything; with for, it is started again (empty) after that long",
		Inject: func(_ context.Context, l Lab, t string) error { return l.Kill(t) },
		Fix:    func(ctx context.Context, l Lab, t string) error { return l.Start(ctx, t) },
		Active: "killed",
	},
	"pause": {
		Name:   "pause",
		Doc:    "SIGSTOP: the node freezes with its sockets open and answers nothing; with for, SIGCONT after that long (it resumes with its state)",
		Inject: func(_ context.Context, l Lab, t string) error { return l.Pause(t) },
		Fix:    func(_ context.Context, l Lab, t string) error { return l.Resume(t) },
		Active: "paused",
	},
	"stop": {
		Name:   "stop",
		Doc:    "graceful stop: SIGTERM (SIGKILL after the lab's grace period); with for, it is started again (empty) after that long",
		Inject: func(_ context.Context, l Lab, t string) error { return l.Stop(t, true) },
		Fix:    func(ctx context.Context, l Lab, t string) error { return l.Start(ctx, t) },
		Active: "stopped",
	},
	"restart": {
		Name:   "restart",
		Doc:    "graceful stop and immediate start: the node comes back at once, without the state it had in memory",
		Inject: func(ctx context.Context, l Lab, t string) error { return l.Restart(ctx, t) },
		Active: "restarting",
	},
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
	in.setActive(i, true)
	if err := k.Inject(ctx, in.lab, f.Target); err != nil {
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
	err := k.Fix(ctx, in.lab, f.Target)
	in.setActive(i, false)
	if err != nil {
		onErr(&ActionError{Fault: f, Fix: true, Err: err})
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
