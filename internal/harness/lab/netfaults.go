package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/sitenet"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// NodeDevice is the interface of a node's namespace that carries its traffic (internal/harness/netns: eth0).
const NodeDevice = "eth0"

// ErrNoNetns: a network fault on a lab that does not run its nodes in network namespaces.
var ErrNoNetns = errors.New("lab: network faults need every node in its own network namespace (Config.Netns, " +
	"imslab run --netns, as root)")

// newFaultSet is the lab's set of network faults: a node's namespace is reached with ip netns exec.
func (l *Lab) newFaultSet() *netfault.Set {
	return &netfault.Set{Resolve: func(_ context.Context, node string) (netfault.Namespace, error) {
		ns := l.Namespace(node)
		if ns == "" {
			return netfault.Namespace{}, fmt.Errorf("lab: %s: %w (no network namespace)", node, ErrUnknownNode)
		}
		return netfault.Namespace{Exec: netfault.InNetns(ns), Path: filepath.Join("/run/netns", ns)}, nil
	}}
}

// NetCheck returns nil when the lab can apply network faults (Config.Netns), ErrNoNetns otherwise.
func (l *Lab) NetCheck() error {
	if l.net == nil || l.faults == nil {
		return ErrNoNetns
	}
	return nil
}

// NetAddrs returns the address a node is reached at (under Config.Netns, its namespace address).
func (l *Lab) NetAddrs(node string) ([]netip.Addr, error) {
	n, err := l.node(node)
	if err != nil {
		return nil, err
	}
	a, err := netip.ParseAddr(n.Address)
	if err != nil {
		return nil, fmt.Errorf("lab: %s: address %q: %w", node, n.Address, err)
	}
	return []netip.Addr{a}, nil
}

// ApplyNet applies spec in node's namespace under key (netfault.Set.Apply). A Rate or Delay without a device
// gets the node's interface (NodeDevice). It records a net_fault event.
func (l *Lab) ApplyNet(ctx context.Context, node, key string, spec netfault.Spec) error {
	if err := l.NetCheck(); err != nil {
		return err
	}
	if _, err := l.node(node); err != nil {
		return err
	}
	switch s := spec.(type) {
	case netfault.Rate:
		if s.Device == "" {
			s.Device = NodeDevice
		}
		spec = s
	case netfault.Delay:
		if s.Device == "" {
			s.Device = NodeDevice
		}
		spec = s
	}
	if err := l.faults.Apply(ctx, node, key, spec); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	l.events.Record(obs.NetFault{Target: node, Key: key, Spec: spec.String()})
	return nil
}

// HealNet heals what ApplyNet applied under key in node's namespace and records a net_fault_heal event.
func (l *Lab) HealNet(ctx context.Context, node, key string) error {
	if err := l.NetCheck(); err != nil {
		return err
	}
	if err := l.faults.Heal(ctx, node, key); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	l.events.Record(obs.NetFaultHeal{Target: node, Key: key})
	return nil
}

// healAllNet heals every network fault still applied (the site links, a fault in place until the end).
func (l *Lab) healAllNet() error {
	if l.faults == nil {
		return nil
	}
	if err := l.faults.HealAll(context.Background()); err != nil {
		return fmt.Errorf("lab: healing the network faults: %w", err)
	}
	return nil
}

// applyLinks applies the topology's site links (internal/harness/sitenet) in the nodes' namespaces and records a links
// event. A link the kernel cannot apply fails with an error naming it and what is missing; what was applied is
// healed.
func (l *Lab) applyLinks(ctx context.Context) error {
	if len(l.cfg.Topology.Links()) == 0 {
		return nil
	}
	if l.net == nil {
		// Every node on one host address: there is no link to delay. Said in the run's events (the report turns
		// it into a warning) and the log, so that a run of a two-site topology is not read as a WAN measurement.
		reason := "every node shares the host's loopback; run with --netns (root) to apply them"
		l.log.Warn("the topology's site links are not applied", "reason", reason)
		l.events.Record(obs.LinksNotApplied{Reason: reason, Links: len(l.cfg.Topology.Links())})
		return nil
	}
	items, err := sitenet.Plan(l.cfg.Topology, l.NetAddrs, NodeDevice)
	if err != nil {
		return fmt.Errorf("lab: site links: %w", err)
	}
	for _, it := range items {
		if err := l.faults.Apply(ctx, it.Node, it.Key, it.Spec); err != nil {
			_ = l.healAllNet()
			what := ""
			if errors.Is(err, netfault.ErrUnsupported) {
				if _, ok := it.Spec.(netfault.Delay); ok {
					what = " (a link's delay needs sch_netem or netfault's NFQUEUE delay line; this kernel has neither)"
				}
			}
			return fmt.Errorf("lab: site link %s cannot be applied on %s: %s%s: %w", it.Link, it.Node, it.Spec, what, err)
		}
	}
	l.events.Record(obs.Links{Links: sitenet.Describe(l.cfg.Topology, items), Faults: len(items)})
	return nil
}
