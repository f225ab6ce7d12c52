package pool

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
)

// StaticResolver is a Resolver backed by maps, for tests of packages that forward to a pool without a DNS server.
// Names are case-insensitive and a trailing dot is ignored. It is safe for concurrent use, and records can be
// changed while it is used.
type StaticResolver struct {
	mu    sync.RWMutex
	srv   map[string][]Target
	hosts map[string]string
}

// NewStaticResolver returns an empty StaticResolver.
func NewStaticResolver() *StaticResolver {
	return &StaticResolver{srv: map[string][]Target{}, hosts: map[string]string{}}
}

// SetSRV sets (or, with no targets, removes) the SRV answer of name ("_sip._udp.pcscf1.ims.test").
func (r *StaticResolver) SetSRV(name string, targets ...Target) *StaticResolver {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(targets) == 0 {
		delete(r.srv, staticKey(name))
	} else {
		r.srv[staticKey(name)] = slices.Clone(targets)
	}
	return r
}

// SetHost sets (or, with ip "", removes) the A record of host.
func (r *StaticResolver) SetHost(host, ip string) *StaticResolver {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ip == "" {
		delete(r.hosts, staticKey(host))
	} else {
		r.hosts[staticKey(host)] = ip
	}
	return r
}

// LookupSRV implements Resolver.
func (r *StaticResolver) LookupSRV(_ context.Context, name string) ([]Target, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ts, ok := r.srv[staticKey(name)]
	if !ok {
		return nil, fmt.Errorf("pool: static SRV %s: %w", name, ErrNotFound)
	}
	return slices.Clone(ts), nil
}

// LookupHost implements Resolver (an IP literal is returned as is).
func (r *StaticResolver) LookupHost(_ context.Context, host string) (string, error) {
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return ip.String(), nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	ip, ok := r.hosts[staticKey(host)]
	if !ok {
		return "", fmt.Errorf("pool: static A %s: %w", host, ErrNotFound)
	}
	return ip, nil
}

func staticKey(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }
