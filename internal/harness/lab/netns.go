package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// createNetwork checks that namespaces can be built, creates the lab network (after removing what dead runs
// left behind) and lays the topology out on it.
func (l *Lab) createNetwork() error {
	if err := l.netnsCheck(); err != nil {
		return fmt.Errorf("lab: netns: %w", err)
	}
	ctx := context.Background()
	rm, err := netns.Clean(ctx, l.cfg.NetnsRecordDir)
	if err != nil {
		return fmt.Errorf("lab: netns: removing what earlier runs left behind: %w", err)
	}
	if !rm.Empty() {
		l.log.Info("netns: left behind by dead runs, removed", "removed", rm.String())
	}
	nw, err := netns.Create(ctx, netns.Options{RecordDir: l.cfg.NetnsRecordDir, Subnet: l.cfg.NetnsSubnet})
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	t, err := l.cfg.Topology.ForNamespaces(nw.Subnet)
	if err != nil {
		_ = nw.Destroy(ctx)
		return fmt.Errorf("lab: netns: %w", err)
	}
	l.net, l.cfg.Topology = nw, t
	l.faults = l.newFaultSet()
	return nil
}

// addNamespaces gives every node its namespace and address.
func (l *Lab) addNamespaces() error {
	ctx := context.Background()
	for _, n := range l.nodes {
		a, err := netip.ParseAddr(n.Address)
		if err != nil {
			return fmt.Errorf("lab: netns: %s: %w", n.Name, err)
		}
		if n.ns, err = l.net.AddNode(ctx, n.Name, a); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
	}
	l.events.Record(obs.NetnsUp{Bridge: l.net.Bridge, Subnet: l.net.Subnet.String(),
		Gateway: l.net.Gateway.String(), ID: l.net.ID})
	l.log.Info("namespace network created", "bridge", l.net.Bridge, "subnet", l.net.Subnet.String())
	return nil
}

// Namespace returns the network namespace a node runs in ("" without Config.Netns).
func (l *Lab) Namespace(name string) string {
	if n, ok := l.byName[name]; ok {
		return n.ns
	}
	return ""
}

// Network returns the namespace network (nil without Config.Netns).
func (l *Lab) Network() *netns.Network { return l.net }

// PhoneListen is where simulated phones in this process listen: the bridge's gateway address under
// Config.Netns (the host's side of the lab network), 127.0.0.1 otherwise; port 0.
func (l *Lab) PhoneListen() string {
	if l.net != nil {
		return net.JoinHostPort(l.net.Gateway.String(), "0")
	}
	return "127.0.0.1:0"
}
