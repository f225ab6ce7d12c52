// Package sitenet turns the links between the sites of a topology (topology.Link: delay, jitter, loss, rate) into
// network faults (internal/harness/netfault) to apply in the nodes' network namespaces, so that the packets between two
// sites see the link. It knows nothing of how a backend reaches a namespace: the namespace backend of internal/harness/lab
// and the compose backend both call Plan and apply the result through their netfault.Set.
//
// A link between sites A and B becomes, in the namespace of every node of A, a delay (netfault.Delay) and a loss
// (netfault.Loss) on what the node sends to the nodes of B (Peers = their addresses, direction out), and the same
// in every node of B towards A: each direction of the link then sees the delay and the loss once, as stated.
//
// A link's rate becomes, in the same way, a netfault.Rate with Peers on each node: an HTB whose shaped class gets
// only the packets to the other site's nodes (u32 filters on their addresses), so the traffic inside the site is
// not slowed. The cap is per node and direction: a site of n nodes can send up to n × rate across the link, which
// is a link between sites' nodes shaped at each sender, not one shared pipe.
package sitenet

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// Item is one fault to apply in one node's namespace for one link.
type Item struct {
	Node string // the node whose namespace gets the fault
	Link string // the link: "north–south"
	Key  string // the key to apply it under (netfault.Set): "link north–south delay"
	Spec netfault.Spec
}

// LinkName names a link "a–b".
func LinkName(l topology.Link) string { return strings.Join(l.Between, "–") }

// Plan returns the faults that apply the topology's links: for every link with a delay or a loss, every node of
// each of its sites gets them towards the nodes of the other. addrs gives a node's addresses; device is the
// interface of a node's namespace that carries its traffic to the other nodes ("eth0" in the namespace backend).
// A topology without links gives nothing.
func Plan(t *topology.Topology, addrs func(node string) ([]netip.Addr, error), device string) ([]Item, error) {
	var out []Item
	for _, l := range t.Links() {
		if len(l.Between) != 2 {
			return nil, fmt.Errorf("sitenet: link %v: want two sites", l.Between)
		}
		name := LinkName(l)
		if l.Delay <= 0 && l.Loss <= 0 && l.RateKbit <= 0 {
			continue
		}
		for side := range 2 {
			here, there := l.Between[side], l.Between[1-side]
			peers, err := prefixes(t.SiteNodes(there), addrs)
			if err != nil {
				return nil, fmt.Errorf("sitenet: link %s: %w", name, err)
			}
			if len(peers) == 0 {
				continue
			}
			for _, n := range t.SiteNodes(here) {
				if l.Delay > 0 {
					out = append(out, Item{Node: n, Link: name, Key: "link " + name + " delay",
						Spec: netfault.Delay{Device: device, Delay: l.Delay, Jitter: l.Jitter, Peers: peers,
							Direction: netfault.Out}})
				}
				if l.Loss > 0 {
					out = append(out, Item{Node: n, Link: name, Key: "link " + name + " loss",
						Spec: netfault.Loss{Percent: l.Loss, Peers: peers, Direction: netfault.Out}})
				}
				if l.RateKbit > 0 {
					out = append(out, Item{Node: n, Link: name, Key: "link " + name + " rate",
						Spec: netfault.Rate{Device: device, Rate: fmt.Sprintf("%dkbit", l.RateKbit), Peers: peers}})
				}
			}
		}
	}
	return out, nil
}

func prefixes(nodes []string, addrs func(string) ([]netip.Addr, error)) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, n := range nodes {
		as, err := addrs(n)
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", n, err)
		}
		for _, a := range as {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out, nil
}

// Describe summarises a plan for an event: per link, its parameters and how many nodes got them.
func Describe(t *topology.Topology, items []Item) []obs.SiteLink {
	var out []obs.SiteLink
	for _, l := range t.Links() {
		name := LinkName(l)
		nodes := map[string]bool{}
		for _, it := range items {
			if it.Link == name {
				nodes[it.Node] = true
			}
		}
		m := obs.SiteLink{Link: name, Nodes: len(nodes)}
		if l.Delay > 0 {
			m.DelayMs = float64(l.Delay) / 1e6
		}
		if l.Jitter > 0 {
			m.JitterMs = float64(l.Jitter) / 1e6
		}
		if l.Loss > 0 {
			m.LossPercent = l.Loss
		}
		out = append(out, m)
	}
	return out
}
