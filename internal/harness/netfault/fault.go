package netfault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

var (
	// ErrUnsupported: the kernel lacks the mechanism a fault needs.
	ErrUnsupported = errors.New("netfault: not supported by this kernel")
	// ErrNotRestored: after a heal the namespace differs from its snapshot.
	ErrNotRestored = errors.New("netfault: state after heal differs from the snapshot")
	// ErrBusy: the object a fault needs is already taken (a root qdisc that
	// is not ours, or one of ours from another fault).
	ErrBusy = errors.New("netfault: device already shaped")
	// ErrInvalid: a fault's parameters are wrong.
	ErrInvalid = errors.New("netfault: invalid fault")
)

// Direction says which traffic a fault affects, seen from the namespace it is
// applied in. The zero value is Both.
type Direction int

const (
	Both Direction = iota // incoming and outgoing
	In                    // incoming only (the input hook)
	Out                   // outgoing only (the output hook)
)

func (d Direction) String() string {
	switch d {
	case Both:
		return "both"
	case In:
		return "in"
	case Out:
		return "out"
	}
	return fmt.Sprintf("direction(%d)", int(d))
}

func (d Direction) in() bool  { return d == Both || d == In }
func (d Direction) out() bool { return d == Both || d == Out }

// Spec is one fault's parameters: Partition, Isolate, Loss, Rate or Delay.
type Spec interface {
	String() string
	validate() error
	object() object
}

// object is the one kernel object a fault owns.
type object interface {
	// apply creates or replaces the object. again is true when the same
	// Fault has applied it before.
	apply(ctx context.Context, ex Exec, again bool) error
	// remove deletes the object if it exists.
	remove(ctx context.Context, ex Exec) error
	// present reports whether the object exists in st.
	present(st state) bool
}

// Fault is a Spec bound to a namespace. Apply and Heal are idempotent and safe
// for concurrent use.
type Fault struct {
	spec Spec
	ex   Exec
	path string // the namespace file, for faults that keep a socket in the namespace ("" when unknown)
	obj  object

	mu      sync.Mutex
	applied bool
	snap    state
}

// New binds spec to the namespace reached through ex.
func New(ex Exec, spec Spec) (*Fault, error) { return NewAt(ex, "", spec) }

// NewAt binds spec to the namespace reached through ex whose namespace file is
// path (/run/netns/NAME, /proc/PID/ns/net). Faults that hold a socket in the
// namespace need the path; for the others it may be "".
func NewAt(ex Exec, path string, spec Spec) (*Fault, error) {
	if ex == nil {
		return nil, fmt.Errorf("%w: nil Exec", ErrInvalid)
	}
	if err := spec.validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, spec, err)
	}
	obj := spec.object()
	if o, ok := obj.(interface{ bindPath(string) }); ok {
		o.bindPath(path)
	}
	return &Fault{spec: spec, ex: ex, path: path, obj: obj}, nil
}

func (f *Fault) String() string { return f.spec.String() }

// Spec returns the fault's parameters.
func (f *Fault) Spec() Spec { return f.spec }

// Apply snapshots the namespace (the first time) and applies the fault. A
// failed Apply leaves nothing of this fault behind.
func (f *Fault) Apply(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.applied {
		st, err := snapshot(ctx, f.ex)
		if err != nil {
			return fmt.Errorf("netfault: apply %s: snapshot: %w", f.spec, err)
		}
		f.snap = st
	}
	if err := f.obj.apply(ctx, f.ex, f.applied); err != nil {
		if !f.applied {
			// Leave nothing half-applied. Use a fresh context: ctx may be
			// what failed.
			_ = f.obj.remove(context.WithoutCancel(ctx), f.ex)
		}
		return fmt.Errorf("netfault: apply %s: %w", f.spec, err)
	}
	f.applied = true
	return nil
}

// Heal removes what Apply added and verifies that the namespace is as the
// snapshot taken before the first Apply (other faults of this package left
// out). ErrNotRestored after our object is gone means someone else changed the
// namespace meanwhile; it is returned once and the fault counts as healed.
// Healing a fault that is not applied removes its object if a crashed run left
// it and returns nil.
func (f *Fault) Heal(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.obj.remove(ctx, f.ex); err != nil {
		return fmt.Errorf("netfault: heal %s: %w", f.spec, err)
	}
	if !f.applied {
		return nil
	}
	st, err := snapshot(ctx, f.ex)
	if err != nil {
		return fmt.Errorf("netfault: heal %s: snapshot: %w", f.spec, err)
	}
	if f.obj.present(st) {
		return fmt.Errorf("netfault: heal %s: %w: our object is still there", f.spec, ErrNotRestored)
	}
	// Our object is gone: the fault is healed. A difference now is a change
	// someone else made while the fault was applied; it is reported once.
	snap := f.snap
	f.applied = false
	f.snap = state{}
	if d := diff(foreign(snap, st)); d != "" {
		return fmt.Errorf("netfault: heal %s: %w (changed by someone else while the fault was applied):\n%s", f.spec, ErrNotRestored, d)
	}
	return nil
}

// Applied reports whether the fault is applied (by this Fault).
func (f *Fault) Applied() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// diff returns a short line diff of a and b, or "" when equal.
func diff(a, b string) string {
	if a == b {
		return ""
	}
	al, bl := lineSet(a), lineSet(b)
	var sb strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if bl[l] == 0 {
			fmt.Fprintf(&sb, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if al[l] == 0 {
			fmt.Fprintf(&sb, "+ %s\n", l)
		}
	}
	if sb.Len() == 0 {
		sb.WriteString("(same lines, different order or count)\n")
	}
	return sb.String()
}

func lineSet(s string) map[string]int {
	m := map[string]int{}
	for _, l := range strings.Split(s, "\n") {
		m[l]++
	}
	return m
}
