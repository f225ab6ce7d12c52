package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/topology"
)

// The network fault kinds (issue 11; docs/faults.md). Each is applied in the network namespace of every node of
// its target through NetLab.ApplyNet, under a key naming the fault, and healed after for through NetLab.HealNet;
// the peers of a fault are the /32 (or /128) addresses of its peer nodes (NetLab.NetAddrs).
//
// Partition is applied on the target's side only: a drop in the target's input hook for packets from the peers
// and in its output hook for packets to them cuts both directions of every exchange between them (a request
// that leaves a peer dies at the target's door, the target's answer or request never leaves), so rules in the
// peers' namespaces would add nothing; the heal removes the one table of the fault in each target namespace.

// Directions of a network fault (Fault.Direction), seen from the target.
const (
	DirBoth = "both"
	DirIn   = "in"
	DirOut  = "out"
)

// NetworkKinds are the kinds that need a NetLab (every node in its own network namespace).
var NetworkKinds = []string{"partition", "isolate", "site-isolate", "loss", "rate", "delay"}

// IsNetwork reports whether a fault kind is a network fault.
func IsNetwork(kind string) bool { return slices.Contains(NetworkKinds, kind) }

func netKinds() []FaultKind {
	return []FaultKind{
		{
			Name: "partition",
			Doc: "the target cut off from its peers (nodes, pools, site:<name>): packets between them dropped in the " +
				"target's namespace, both ways (direction: both, the default), only those reaching the target (in) or " +
				"only those it sends (out); silently by default, with reject: true answered with ICMP port " +
				"unreachable / TCP reset; with for, healed after that long (network namespaces)",
			Inject: applyNet(partitionSpec),
			Fix:    healNet, Active: "partitioned", Records: true,
			check: func(f Fault, nodes []string, t *topology.Topology) (string, string) {
				if len(f.Peers) == 0 {
					return "peers", "missing: the nodes, pools or sites the target is cut off from"
				}
				return checkNet(f, "peers", "direction", "reject")
			},
		},
		{
			Name: "isolate",
			Doc: "the target (a node, every node of a pool or of a site) cut off from everyone, each node from every " +
				"other node too: every packet but loopback dropped in its namespace (the phones, on the host, lose it " +
				"as well); with for, healed after that long (network namespaces)",
			Inject: applyNet(func(context.Context, NetLab, Fault, string) (netfault.Spec, error) {
				return netfault.Isolate{}, nil
			}),
			Fix: healNet, Active: "isolated", Records: true,
			check: func(f Fault, _ []string, _ *topology.Topology) (string, string) { return checkNet(f) },
		},
		{
			Name: "site-isolate",
			Doc: "a site (target site:<name>) cut off from everything outside it: its nodes still reach each other, " +
				"nothing else (nodes of other sites, the phones) reaches them; with for, healed after that long " +
				"(network namespaces)",
			Inject: applyNet(func(ctx context.Context, nl NetLab, f Fault, node string) (netfault.Spec, error) {
				var others []string
				for _, n := range f.Nodes {
					if n != node {
						others = append(others, n)
					}
				}
				except, err := prefixes(nl, others)
				if err != nil {
					return nil, err
				}
				return netfault.Isolate{Except: except}, nil
			}),
			Fix: healNet, Active: "isolated", Records: true,
			check: func(f Fault, _ []string, _ *topology.Topology) (string, string) {
				if !strings.HasPrefix(f.Target, topology.SiteTargetPrefix) {
					return "target", fmt.Sprintf("%q: a site-isolate fault names a site (site:<name>); isolate cuts off "+
						"a node or a pool", f.Target)
				}
				return checkNet(f)
			},
		},
		{
			Name: "loss",
			Doc: "loss percent of the target's packets dropped at random, each independently (nftables numgen): all " +
				"its traffic, or with peers only that with them; direction both (default), in or out; with for, " +
				"healed after that long (network namespaces)",
			Inject: applyNet(func(ctx context.Context, nl NetLab, f Fault, _ string) (netfault.Spec, error) {
				peers, err := prefixes(nl, f.PeerNodes)
				if err != nil {
					return nil, err
				}
				return netfault.Loss{Percent: f.Loss, Peers: peers, Direction: netDirection(f.Direction)}, nil
			}),
			Fix: healNet, Active: "lossy", Records: true,
			check: func(f Fault, _ []string, _ *topology.Topology) (string, string) {
				if f.Loss == 0 {
					return "loss", "missing: the percentage of packets dropped (0 < loss <= 100)"
				}
				if err := validSpec(netfault.Loss{Percent: f.Loss}); err != nil {
					return "loss", fmt.Sprintf("%v: must be in (0, 100], in steps of 0.01", f.Loss)
				}
				return checkNet(f, "peers", "direction", "loss")
			},
		},
		{
			Name: "rate",
			Doc: "the bandwidth of everything the target sends capped at rate (tc syntax: 800kbit, 1mbit; a token " +
				"bucket as the root qdisc of each of its interfaces, packets over the rate queued up to 50 ms, then " +
				"dropped); with peers, only what it sends to them (an HTB class and u32 filters); with for, healed " +
				"after that long (network namespaces)",
			Inject: applyNet(func(_ context.Context, nl NetLab, f Fault, _ string) (netfault.Spec, error) {
				peers, err := prefixes(nl, f.PeerNodes)
				if err != nil {
					return nil, err
				}
				return netfault.Rate{Rate: f.Rate, Peers: peers}, nil // no device: the lab's interface(s)
			}),
			Fix: healNet, Active: "rate-limited", Records: true,
			check: func(f Fault, _ []string, _ *topology.Topology) (string, string) {
				if f.Rate == "" {
					return "rate", "missing: the bandwidth (tc syntax: 800kbit, 1mbit)"
				}
				if err := validSpec(netfault.Rate{Device: "eth0", Rate: f.Rate}); err != nil {
					return "rate", fmt.Sprintf("%q: want a number and bit, kbit, mbit or gbit, at least 8kbit", f.Rate)
				}
				if f.Direction != "" && f.Direction != DirOut {
					return "direction", fmt.Sprintf("%q: a rate fault shapes what the target sends (out) only", f.Direction)
				}
				return checkNet(f, "peers", "direction", "rate")
			},
		},
		{
			Name: "delay",
			Doc: "delay added to every packet the target sends (to its peers only, when given), ± delay_jitter " +
				"(netem; the NFQUEUE delay line where the kernel has no sch_netem); to delay both ways, delay the " +
				"peers too; with for, healed after that long (network namespaces)",
			Inject: applyNet(func(ctx context.Context, nl NetLab, f Fault, _ string) (netfault.Spec, error) {
				peers, err := prefixes(nl, f.PeerNodes)
				if err != nil {
					return nil, err
				}
				// What the target sends, with or without peers (netfault's zero Direction delays both ways: a
				// round trip would take twice the delay).
				return netfault.Delay{Delay: f.Delay, Jitter: f.DelayJitter, Peers: peers, Direction: netfault.Out}, nil
			}),
			Fix: healNet, Active: "delayed", Records: true,
			check: func(f Fault, _ []string, _ *topology.Topology) (string, string) {
				switch {
				case f.Delay <= 0:
					return "delay", "missing: the one-way delay added (20ms)"
				case f.DelayJitter < 0 || f.DelayJitter > f.Delay:
					return "delay_jitter", fmt.Sprintf("%s: must be between 0 and delay (%s)", f.DelayJitter, f.Delay)
				case f.Direction != "" && f.Direction != DirOut:
					return "direction", fmt.Sprintf("%q: a delay fault delays what the target sends (out); to delay "+
						"both ways, add a delay fault on the peers", f.Direction)
				}
				return checkNet(f, "peers", "direction", "delay", "delay_jitter")
			},
		},
	}
}

// checkNet rejects the fields of the other kinds and the network-fault fields not in allowed, and checks the
// direction and the peers.
func checkNet(f Fault, allowed ...string) (string, string) {
	g := f
	if slices.Contains(allowed, "peers") {
		g.Peers = nil
	}
	if slices.Contains(allowed, "direction") {
		g.Direction = ""
	}
	if slices.Contains(allowed, "reject") {
		g.Reject = false
	}
	if slices.Contains(allowed, "loss") {
		g.Loss = 0
	}
	if slices.Contains(allowed, "rate") {
		g.Rate = ""
	}
	if slices.Contains(allowed, "delay") {
		g.Delay = 0
	}
	if slices.Contains(allowed, "delay_jitter") {
		g.DelayJitter = 0
	}
	if field, msg := noParams(g); field != "" {
		return field, fmt.Sprintf("not a field of a %s fault (%s)", f.Kind, msg)
	}
	switch f.Direction {
	case "", DirBoth, DirIn, DirOut:
	default:
		return "direction", fmt.Sprintf("%q: must be %s, %s or %s", f.Direction, DirBoth, DirIn, DirOut)
	}
	for _, p := range f.PeerNodes {
		if slices.Contains(f.targetNodes(), p) {
			return "peers", fmt.Sprintf("%s is both a target and a peer of the %s fault", p, f.Kind)
		}
	}
	return "", ""
}

// validSpec checks a spec's parameters with netfault's own validation.
func validSpec(s netfault.Spec) error {
	_, err := netfault.New(func(context.Context, ...string) ([]byte, error) { return nil, nil }, s)
	return err
}

func netDirection(d string) netfault.Direction {
	switch d {
	case DirIn:
		return netfault.In
	case DirOut:
		return netfault.Out
	}
	return netfault.Both
}

// NetKey is the key a network fault is applied under in each target node (NetLab.ApplyNet): the fault's kind,
// target and instant, unique in a scenario (one fault per node at a time).
func NetKey(f Fault) string { return fmt.Sprintf("%s %s at %s", f.Kind, f.Target, f.At) }

// asNetLab returns l as a NetLab, or ErrUnsupported.
func asNetLab(l Lab) (NetLab, error) {
	nl, ok := l.(NetLab)
	if !ok {
		return nil, fmt.Errorf("%w: the %T backend cannot apply network faults", ErrUnsupported, l)
	}
	return nl, nil
}

// prefixes returns the host prefixes of every address of the nodes.
func prefixes(nl NetLab, nodes []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, n := range nodes {
		addrs, err := nl.NetAddrs(n)
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", n, err)
		}
		for _, a := range addrs {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out, nil
}

// applyNet injects the spec build returns in node's namespace under the fault's key.
func applyNet(build func(ctx context.Context, nl NetLab, f Fault, node string) (netfault.Spec, error)) func(
	context.Context, Lab, Fault, string) error {
	return func(ctx context.Context, l Lab, f Fault, node string) error {
		nl, err := asNetLab(l)
		if err != nil {
			return err
		}
		spec, err := build(ctx, nl, f, node)
		if err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		return nl.ApplyNet(ctx, node, NetKey(f), spec)
	}
}

func healNet(ctx context.Context, l Lab, f Fault, node string) error {
	nl, err := asNetLab(l)
	if err != nil {
		return err
	}
	return nl.HealNet(ctx, node, NetKey(f))
}

// partitionSpec is a partition fault's spec: the target cut off from its peers' addresses.
func partitionSpec(_ context.Context, nl NetLab, f Fault, _ string) (netfault.Spec, error) {
	peers, err := prefixes(nl, f.PeerNodes)
	if err != nil {
		return nil, err
	}
	return netfault.Partition{Peers: peers, Direction: netDirection(f.Direction), Reject: f.Reject}, nil
}

// isolateNet cuts node off from everyone (the isolate kind's spec) under the fault's key: dns-down in mode
// unreachable.
var isolateNet = applyNet(func(context.Context, NetLab, Fault, string) (netfault.Spec, error) {
	return netfault.Isolate{}, nil
})

// flapCut is the down phase of a flap in mode partition: the partition fault's spec when the flap has peers,
// isolate when it has none.
func flapCut(ctx context.Context, l Lab, f Fault, node string) error {
	if len(f.Peers) == 0 {
		return isolateNet(ctx, l, f, node)
	}
	if len(f.PeerNodes) == 0 {
		return fmt.Errorf("%s: the peers %v were not resolved (Scenario.Validate)", node, f.Peers)
	}
	return applyNet(partitionSpec)(ctx, l, f, node)
}

// needsNet reports whether the fault needs a NetLab: a network kind, a flap in mode partition or a dns-down in
// mode unreachable.
func (f Fault) needsNet() bool {
	return IsNetwork(f.Kind) || f.Kind == "flap" && f.Mode == ModePartition ||
		f.Kind == "dns-down" && f.Mode == ModeUnreachable
}

// NetworkFaults returns the scenario's network faults (the network kinds, flap in mode partition, dns-down in
// mode unreachable).
func (s *Scenario) NetworkFaults() []Fault {
	var out []Fault
	for _, f := range s.Faults {
		if f.needsNet() {
			out = append(out, f)
		}
	}
	return out
}

// ErrNeedsNetns: a scenario with a network fault on a backend that cannot apply it.
var ErrNeedsNetns = errors.New("network faults need every node in its own network namespace")

// netPrecheck returns a clear error before the run when the scenario has a network fault and the lab cannot
// apply it (not a NetLab, or NetCheck fails); cause is why.
func netPrecheck(s *Scenario, l any) error {
	nf := s.NetworkFaults()
	if len(nf) == 0 {
		return nil
	}
	var cause error
	if nl, ok := l.(NetLab); !ok {
		cause = fmt.Errorf("the %T backend cannot apply network faults", l)
	} else {
		cause = nl.NetCheck()
	}
	if cause == nil {
		return nil
	}
	return netNeedsError(s, cause)
}

func netNeedsError(s *Scenario, cause error) error {
	var kinds []string
	for _, f := range s.NetworkFaults() {
		k := f.Kind
		if !IsNetwork(f.Kind) {
			k += " mode " + f.Mode
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return fmt.Errorf("scenario %s has a network fault (%s); %w: run as root with `imslab run --netns` (Linux "+
		"network namespaces, nftables, iproute2) or `--backend compose` (%v)", s.Name, strings.Join(kinds, ", "),
		ErrNeedsNetns, cause)
}
