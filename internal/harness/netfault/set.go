package netfault

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Namespace is how a Set reaches one node's network namespace: Exec runs the
// nft/tc/ip commands there, Path is the namespace file (/run/netns/NAME or
// /proc/PID/ns/net) for faults that keep a socket in it.
type Namespace struct {
	Exec Exec
	Path string
}

// Set holds the faults a lab has applied, by node and key, so that a scenario
// can apply and heal them by name. Resolve finds a node's namespace.
type Set struct {
	Resolve func(ctx context.Context, node string) (Namespace, error)

	mu     sync.Mutex
	faults map[string]*Fault // node + "\x00" + key
}

func setKey(node, key string) string { return node + "\x00" + key }

// Apply applies spec in node's namespace under key (idempotent for the same
// key and spec; a different spec under a key still applied is an error).
func (s *Set) Apply(ctx context.Context, node, key string, spec Spec) error {
	s.mu.Lock()
	if s.faults == nil {
		s.faults = map[string]*Fault{}
	}
	f, ok := s.faults[setKey(node, key)]
	s.mu.Unlock()
	if ok && f.Spec().String() != spec.String() {
		return fmt.Errorf("%w: %s: key %q already holds %s", ErrInvalid, node, key, f.Spec())
	}
	if !ok {
		if s.Resolve == nil {
			return fmt.Errorf("%w: no namespace resolver", ErrInvalid)
		}
		ns, err := s.Resolve(ctx, node)
		if err != nil {
			return fmt.Errorf("netfault: %s: %w", node, err)
		}
		if f, err = NewAt(ns.Exec, ns.Path, spec); err != nil {
			return err
		}
		s.mu.Lock()
		s.faults[setKey(node, key)] = f
		s.mu.Unlock()
	}
	if err := f.Apply(ctx); err != nil {
		return fmt.Errorf("%s: %w", node, err)
	}
	return nil
}

// Heal heals the fault under node and key and forgets it; healing one that is
// not there is not an error.
func (s *Set) Heal(ctx context.Context, node, key string) error {
	s.mu.Lock()
	f, ok := s.faults[setKey(node, key)]
	delete(s.faults, setKey(node, key))
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if err := f.Heal(ctx); err != nil {
		return fmt.Errorf("%s: %w", node, err)
	}
	return nil
}

// HealAll heals every fault of the set (at the end of a run).
func (s *Set) HealAll(ctx context.Context) error {
	s.mu.Lock()
	all := s.faults
	s.faults = nil
	s.mu.Unlock()
	var errs []error
	for _, f := range all {
		if err := f.Heal(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
