package compose

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/sitenet"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Network faults (partition, isolate, loss, rate, delay) on the compose backend are applied from the host in each
// container's own network namespace, entered through its init process (`nsenter -t PID -n`, the host's nft and
// tc): nothing is installed into the image and nothing runs inside the container.
//
// A container's network namespace lives as long as the container runs: a container killed or stopped and started
// again has a new init PID and a fresh namespace, and the faults applied in the old one are gone with it. The lab
// therefore keeps its faults per life of a container (PID and start time, netLife): ApplyNet looks the container
// up every time and applies in the namespace it has now; HealNet of a fault whose namespace is gone (the
// container stopped, or started again since) has nothing to undo and returns nil, recording a "net_fault_gone"
// event. A fault is not carried over into the new namespace: a scenario that restarts a partitioned node
// applies the partition again if it wants it to last.

// netLife is one life of a container: its init PID and when it started.
type netLife struct {
	pid     int
	started string
}

// nodeNet holds the faults applied in one life of one node's container.
type nodeNet struct {
	life netLife
	set  *netfault.Set
	keys map[string]bool
}

// NetCheck returns nil when the host can apply network faults in the containers' namespaces: root, the nsenter,
// nft and tc binaries, and a Docker engine that answers.
func (l *Lab) NetCheck() error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("not root: entering a container's network namespace (nsenter) and changing its nftables rules and qdiscs need root"))
	}
	for _, bin := range []struct{ name, pkg string }{{"nsenter", "util-linux"}, {"nft", "nftables"}, {"tc", "iproute2"}} {
		if _, err := exec.LookPath(bin.name); err != nil {
			errs = append(errs, fmt.Errorf("%s not found on the host (apt install %s)", bin.name, bin.pkg))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.engine.Ping(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("compose lab: network faults cannot be applied: %w", err)
	}
	return nil
}

// NetAddrs returns a node's addresses on every lab network its container is on (access, core, cx), as the
// generated compose file fixes them. The lab must be up.
func (l *Lab) NetAddrs(node string) ([]netip.Addr, error) {
	if l.bundle == nil {
		return nil, fmt.Errorf("compose lab: %s: addresses are known once the lab is up", node)
	}
	t := l.bundle.Topology
	n, ok := t.Node(node)
	if !ok {
		return nil, fmt.Errorf("compose lab: %s: no such node", node)
	}
	var out []netip.Addr
	for _, nw := range networksOf(n.Kind) {
		a, err := netip.ParseAddr(addrOn(t, n, nw))
		if err != nil {
			return nil, fmt.Errorf("compose lab: %s: address on %s: %w", node, nw, err)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// ApplyNet applies spec in the network namespace the node's container has now, under key (netfault.Set.Apply:
// idempotent for the same key and spec). The container must be running or paused.
func (l *Lab) ApplyNet(ctx context.Context, node, key string, spec netfault.Spec) error {
	c, op, err := l.container(node)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	return l.applyNetLocked(ctx, node, c, key, spec)
}

// applyNetLocked is ApplyNet with the node's operation lock held.
func (l *Lab) applyNetLocked(ctx context.Context, node string, c Container, key string, spec netfault.Spec) error {
	life, err := l.netLife(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("compose lab: network fault %s on %s: %w", key, node, err)
	}
	if life.pid == 0 {
		return fmt.Errorf("compose lab: network fault %s on %s: the container is not running: it has no network namespace", key, node)
	}
	nn := l.nodeNet(node, life)
	if err := nn.set.Apply(ctx, node, key, spec); err != nil {
		return fmt.Errorf("compose lab: %w", err)
	}
	l.mu.Lock()
	nn.keys[key] = true
	l.mu.Unlock()
	return nil
}

// HealNet heals the fault under key on node. When the namespace it was applied in is gone (the container stopped,
// or was started again since) the fault went with it: nothing is left to undo, and HealNet returns nil.
func (l *Lab) HealNet(ctx context.Context, node, key string) error {
	c, op, err := l.container(node)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	l.mu.Lock()
	nn := l.nets[node]
	l.mu.Unlock()
	if nn == nil || !l.netHas(nn, key) {
		return nil
	}
	life, err := l.netLife(ctx, c.ID)
	if err == nil && life != nn.life {
		l.netGone(node, nn, key)
		return nil
	}
	// Inspect failed (the engine is busy, say): try the heal in the namespace the fault was applied in; if that
	// namespace is gone the heal fails, and the second look below tells.
	herr := nn.set.Heal(ctx, node, key)
	l.mu.Lock()
	delete(nn.keys, key)
	l.mu.Unlock()
	if herr == nil {
		return nil
	}
	if life, err := l.netLife(context.WithoutCancel(ctx), c.ID); err == nil && life != nn.life {
		// The container died while we healed: the namespace and the fault are gone.
		l.netGone(node, nn, key)
		return nil
	}
	return fmt.Errorf("compose lab: %w", herr)
}

// healAllNet heals every network fault still applied in a namespace that still exists (Down).
func (l *Lab) healAllNet(ctx context.Context) error {
	l.mu.Lock()
	nets := l.nets
	l.nets = nil
	containers := l.containers
	l.mu.Unlock()
	var errs []error
	for node, nn := range nets {
		l.mu.Lock()
		applied := len(nn.keys)
		l.mu.Unlock()
		if applied == 0 {
			continue
		}
		if c, ok := containers[node]; ok {
			if life, err := l.netLife(ctx, c.ID); err == nil && life != nn.life {
				l.netGone(node, nn, "")
				continue
			}
		}
		if err := nn.set.HealAll(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("compose lab: healing the network faults: %w", err)
	}
	return nil
}

// netLife inspects the container: its life now ({0, ""} when it is not running or paused).
func (l *Lab) netLife(ctx context.Context, id string) (netLife, error) {
	in, err := l.engine.Inspect(ctx, id)
	if err != nil {
		return netLife{}, err
	}
	if (in.State != "running" && in.State != "paused") || in.PID == 0 {
		return netLife{}, nil
	}
	return netLife{pid: in.PID, started: in.StartedAt}, nil
}

// nodeNet returns the fault set of node's container in its life now, forgetting the faults of an earlier life
// (gone with its namespace).
func (l *Lab) nodeNet(node string, life netLife) *nodeNet {
	l.mu.Lock()
	nn := l.nets[node]
	l.mu.Unlock()
	if nn != nil && nn.life == life {
		return nn
	}
	if nn != nil {
		l.netGone(node, nn, "")
	}
	path := "/proc/" + strconv.Itoa(life.pid) + "/ns/net"
	ns := netfault.Namespace{Exec: netfault.InPID(life.pid), Path: path}
	nn = &nodeNet{life: life, keys: map[string]bool{},
		set: &netfault.Set{Resolve: func(context.Context, string) (netfault.Namespace, error) { return ns, nil }}}
	l.mu.Lock()
	if l.nets == nil {
		l.nets = map[string]*nodeNet{}
	}
	l.nets[node] = nn
	l.mu.Unlock()
	return nn
}

func (l *Lab) netHas(nn *nodeNet, key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return nn.keys[key]
}

// netGone forgets the faults of a namespace that no longer exists (key, or all of them when key is "") and records
// it: they ended with the container's life, not with a heal.
func (l *Lab) netGone(node string, nn *nodeNet, key string) {
	l.mu.Lock()
	var keys []string
	for k := range nn.keys {
		if key == "" || k == key {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		delete(nn.keys, k)
	}
	if len(nn.keys) == 0 && l.nets[node] == nn {
		delete(l.nets, node)
	}
	l.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	slices.Sort(keys)
	l.log.Info("network faults gone with the container's namespace", "node", node, "keys", keys, "pid", nn.life.pid)
	l.events.Emit(obs.NetFaultGone{Target: node, Keys: keys, PID: nn.life.pid,
		Reason: "the container stopped or started again: its network namespace, and the faults in it, are gone"})
}

// Site links. The topology's links (delay, jitter, loss, rate between two sites) are applied as on the namespace
// backend (internal/harness/sitenet): every node of a site gets them, in its container's namespace, towards every address
// of the other site's nodes. They are applied once the containers are up (the nodes' first connections, before
// the phones register, cross the links without them), and again in a container's new namespace whenever a
// node is started again (Start, Restart): a link belongs to the topology, not to one life of a container.

// applyLinks applies the site links of every node, or of node alone when it is not "" (its operation lock held).
// Without what network faults need (NetCheck: root, nsenter, nft, tc) the run goes on without them, said in a
// links_not_applied event and the log, as on the local backend without --netns. A link that cannot be applied
// fails with an error naming it.
func (l *Lab) applyLinks(ctx context.Context, node string) error {
	t := l.bundle.Topology
	if len(t.Links()) == 0 {
		return nil
	}
	if err := l.NetCheck(); err != nil {
		if node == "" {
			l.log.Warn("the topology's site links are not applied", "reason", err.Error())
			l.events.Emit(obs.LinksNotApplied{Reason: err.Error(), Links: len(t.Links())})
		}
		return nil
	}
	items, err := sitenet.Plan(t, l.NetAddrs, "") // no device: NFQUEUE or nft rules on every interface, by peer
	if err != nil {
		return fmt.Errorf("compose lab: site links: %w", err)
	}
	var mine []sitenet.Item
	for _, it := range items {
		if node != "" && it.Node != node {
			continue
		}
		mine = append(mine, it)
		c, op, err := l.container(it.Node)
		if err == nil {
			if node == "" {
				op.Lock()
			}
			err = l.applyNetLocked(ctx, it.Node, c, it.Key, it.Spec)
			if node == "" {
				op.Unlock()
			}
		}
		if err != nil {
			what := ""
			if _, ok := it.Spec.(netfault.Delay); ok && errors.Is(err, netfault.ErrUnsupported) {
				what = " (a link's delay needs sch_netem or netfault's NFQUEUE delay line; this kernel has neither)"
			}
			return fmt.Errorf("compose lab: site link %s cannot be applied on %s: %s%s: %w", it.Link, it.Node, it.Spec, what, err)
		}
	}
	if node == "" {
		l.events.Emit(obs.Links{Links: sitenet.Describe(t, items), Faults: len(items)})
	} else if len(mine) > 0 {
		l.events.Emit(obs.LinksReapplied{Target: node, Faults: len(mine)})
	}
	return nil
}
