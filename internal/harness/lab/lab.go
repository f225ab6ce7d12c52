// Package lab runs a topology as local processes, one per node, and controls them for fault injection: start,
// stop (graceful or not), kill, pause, resume, restart. Every action and every exit is an event in
// <run-dir>/events/lab.jsonl.
//
// Layout of a run directory:
//
//	bin/<kind>            node binaries (go build ./cmd/<kind>)
//	topology.yaml         the topology, defaults spelled out (dnsd reads it)
//	config/<node>.yaml    node configurations (topology.NodeConfig; the HSS gets its own format)
//	logs/<node>.log       stdout and stderr of each node, appended across restarts
//	events/<node>.jsonl   events of each node; events/lab.jsonl those of the lab
//	data/hss/             the HSS database
package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// Errors returned by the process control methods (checked with errors.Is).
var (
	ErrUnknownNode = errors.New("no such node")
	ErrNotBuilt    = errors.New("not built yet (no cmd/<kind> in the repository)")
	ErrSkipped     = errors.New("not selected for this run")
	ErrRunning     = errors.New("already running")
	ErrNotRunning  = errors.New("not running")
)

// Config configures a lab.
type Config struct {
	// Topology is the topology to run (required).
	Topology *topology.Topology
	// RunDir receives configurations, logs, events, data and the record of the binaries that ran
	// (binaries.json; required; created if missing).
	RunDir string
	// RepoDir is the module root: the lab builds ./cmd/<kind> there, into the build cache (CacheDir), one
	// directory per distinct build. Empty: found from the working directory.
	RepoDir string
	// BinDir holds prebuilt binaries named after the kinds; when set nothing is built and a node runs if its
	// binary exists there.
	BinDir string
	// Race builds the nodes with the race detector (when the lab builds them).
	Race bool
	// Only restricts the run to these nodes (names). Empty: every node whose command exists.
	Only []string
	// ReadyTimeout bounds the wait for one node to become ready (default 30s).
	ReadyTimeout time.Duration
	// GracePeriod is the wait between SIGTERM and SIGKILL when a node is stopped gracefully (default 5s).
	GracePeriod time.Duration
	// Netns runs every node in its own network namespace with its own address (internal/harness/netns): New creates a
	// bridge with a /24 (NetnsSubnet, or the first free 10.89.<n>.0/24), one namespace and veth pair per node, and
	// lays the topology out on it with the standard ports (Topology.ForNamespaces); Close removes it all. It needs
	// root on Linux; without it New fails saying so. Off: every node is a process on the topology's addresses.
	Netns bool
	// NetnsSubnet is the /24 of the namespace network (zero: the first free one).
	NetnsSubnet netip.Prefix
	// NetnsRecordDir holds the ownership records of namespace networks (default /run/imslab).
	NetnsRecordDir string
	// Seed is the run's seed: every node's configuration gets a seed derived from it and the node's name
	// (topology.RunSeed), so the nodes' random choices repeat with the seed; 0 = the nodes seed from the clock.
	Seed int64
}

// Validate checks the configuration and names the bad field.
func (c *Config) Validate() error {
	if c.Topology == nil {
		return errors.New("lab config: topology: missing")
	}
	if err := c.Topology.Validate(); err != nil {
		return fmt.Errorf("lab config: %w", err)
	}
	if c.RunDir == "" {
		return errors.New("lab config: run_dir: missing")
	}
	for _, name := range c.Only {
		if _, ok := c.Topology.Node(name); !ok {
			return fmt.Errorf("lab config: only: %q is not a node of the topology", name)
		}
	}
	if c.ReadyTimeout < 0 {
		return errors.New("lab config: ready_timeout: must not be negative")
	}
	if c.GracePeriod < 0 {
		return errors.New("lab config: grace_period: must not be negative")
	}
	return nil
}

// Option configures optional collaborators of a Lab.
type Option func(*Lab)

// WithLogger sets the lab's own logger (node logs go to their files).
func WithLogger(l *slog.Logger) Option { return func(lb *Lab) { lb.log = l } }

// WithNetnsCheck replaces the check that this process can build network namespaces (netns.Check) under
// Config.Netns; tests use it to see the error a user without root gets.
func WithNetnsCheck(check func() error) Option { return func(lb *Lab) { lb.netnsCheck = check } }

// Lab is a topology run as local processes. Its methods are safe for concurrent use; actions on one node are
// serialised.
type Lab struct {
	cfg    Config
	log    *slog.Logger
	events labEvents
	nodes  []*node // in start order
	byName map[string]*node

	netnsCheck func() error
	net        *netns.Network // Config.Netns: the lab network (nil otherwise)
	faults     *netfault.Set  // Config.Netns: the network faults applied (site links, scenario faults)

	// goMaxProcs is the GOMAXPROCS every node starts with (topology.NodeGoMaxProcsSetting).
	goMaxProcs string

	samplerMu   sync.Mutex
	samplerStop chan struct{} // closed to stop sampleResources (nil when it is not running)
	samplerDone chan struct{}
}

// startSampler starts sampleResources unless it runs already.
func (l *Lab) startSampler() {
	l.samplerMu.Lock()
	defer l.samplerMu.Unlock()
	if l.samplerStop != nil {
		return
	}
	l.samplerStop, l.samplerDone = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) {
		defer close(done)
		l.sampleResources(stop)
	}(l.samplerStop, l.samplerDone)
}

// stopSampler stops sampleResources and waits for it.
func (l *Lab) stopSampler() {
	l.samplerMu.Lock()
	defer l.samplerMu.Unlock()
	if l.samplerStop == nil {
		return
	}
	close(l.samplerStop)
	<-l.samplerDone
	l.samplerStop, l.samplerDone = nil, nil
}

// node is one node of the topology and its current process, if any.
type node struct {
	topology.Node
	runnable bool   // its binary exists (or will be built)
	selected bool   // in Config.Only (or Only is empty)
	bin      string // binary path
	config   string // --config path
	logPath  string
	ns       string // Config.Netns: the node's network namespace

	op sync.Mutex // serialises Start, Stop, Kill, Pause, Resume, Restart

	mu     sync.Mutex
	proc   *process // nil when never started
	paused bool
	cpu    *cpuLimit // set while the node is slowed (Throttle)
}

// New prepares a lab: it creates the run directory and opens the lab's events file. Nothing is built or started.
func New(cfg Config, opts ...Option) (*Lab, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = 5 * time.Second
	}
	var err error
	if cfg.RunDir, err = filepath.Abs(cfg.RunDir); err != nil {
		return nil, fmt.Errorf("lab: run dir: %w", err)
	}
	if cfg.BinDir == "" {
		if cfg.RepoDir == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, fmt.Errorf("lab: %w", err)
			}
			if cfg.RepoDir, err = FindRepo(wd); err != nil {
				return nil, err
			}
		}
		if cfg.RepoDir, err = filepath.Abs(cfg.RepoDir); err != nil {
			return nil, fmt.Errorf("lab: repo dir: %w", err)
		}
	} else if cfg.BinDir, err = filepath.Abs(cfg.BinDir); err != nil {
		return nil, fmt.Errorf("lab: bin dir: %w", err)
	}
	for _, d := range []string{"", "config", "logs", "events", "trace", "data"} {
		if err := os.MkdirAll(filepath.Join(cfg.RunDir, d), 0o755); err != nil {
			return nil, fmt.Errorf("lab: run dir: %w", err)
		}
	}
	rec, err := obs.OpenRecorder(filepath.Join(cfg.RunDir, "events", "lab.jsonl"), "lab")
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	l := &Lab{cfg: cfg, log: slog.Default(), events: labEvents{rec}, byName: map[string]*node{}, netnsCheck: netns.Check,
		goMaxProcs: cfg.Topology.NodeGoMaxProcsSetting(runtime.NumCPU())}
	for _, o := range opts {
		o(l)
	}
	if cfg.Netns {
		if err := l.createNetwork(); err != nil {
			rec.Close()
			return nil, err
		}
		cfg = l.cfg
	}
	for _, tn := range startOrder(cfg.Topology.Nodes()) {
		n := &node{
			Node:     tn,
			selected: len(cfg.Only) == 0 || slices.Contains(cfg.Only, tn.Name),
			bin:      filepath.Join(cfg.BinDir, string(tn.Kind)), // set by Build when the lab builds
			config:   filepath.Join(cfg.RunDir, "config", tn.Name+".yaml"),
			logPath:  filepath.Join(cfg.RunDir, "logs", tn.Name+".log"),
		}
		if tn.Vendor == topology.VendorKamailio {
			n.bin = KamailioBinary()
			n.runnable = n.bin != "" && isExecutable(n.bin)
			n.config = KamailioPaths(cfg.RunDir, tn.Name).Config
		} else if cfg.BinDir != "" {
			n.runnable = isExecutable(n.bin)
		} else {
			n.runnable = dirExists(filepath.Join(cfg.RepoDir, "cmd", string(tn.Kind)))
		}
		l.nodes = append(l.nodes, n)
		l.byName[n.Name] = n
	}
	if l.net != nil {
		if err := l.addNamespaces(); err != nil {
			_ = l.Close()
			return nil, err
		}
	}
	return l, nil
}

// startOrder puts the nodes in dependency order: dnsd, hss, then the core from the inside out (S-CSCFs,
// I-CSCF, P-CSCFs) and the BAC last, so that each SIP node finds its next hops already up.
func startOrder(nodes []topology.Node) []topology.Node {
	rank := map[topology.Kind]int{topology.KindDNS: 0, topology.KindHSS: 1, topology.KindSCSCF: 2,
		topology.KindICSCF: 3, topology.KindPCSCF: 4, topology.KindBAC: 5}
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b topology.Node) int { return rank[a.Kind] - rank[b.Kind] })
	return out
}

// RunDir returns the run directory (absolute).
func (l *Lab) RunDir() string { return l.cfg.RunDir }

// HSSAPI returns the HTTP address of the lab's HSS and its API token file ("" when the topology has no HSS or
// it is not run).
func (l *Lab) HSSAPI() (addr, tokenFile string) {
	for _, n := range l.nodes {
		if n.Kind == topology.KindHSS && n.runnable && n.selected {
			return n.Endpoint(topology.PortHTTP), HSSTokenFile(l.cfg.RunDir, n.Name)
		}
	}
	return "", ""
}

// LogFile returns the path of a node's log file.
func (l *Lab) LogFile(name string) string { return filepath.Join(l.cfg.RunDir, "logs", name+".log") }

// EventsFile returns the path of a node's events file ("lab" for the lab's own).
func (l *Lab) EventsFile(name string) string {
	return filepath.Join(l.cfg.RunDir, "events", name+".jsonl")
}

// Topology returns the topology the lab runs: Config.Topology, or under Config.Netns its layout on the
// namespace network.
func (l *Lab) Topology() *topology.Topology { return l.cfg.Topology }

// Close closes the lab's events file and, under Config.Netns, removes the namespace network. Call it after Down.
func (l *Lab) Close() error {
	l.stopSampler()
	var errs []error
	if l.net != nil {
		if err := l.healAllNet(); err != nil {
			errs = append(errs, err)
		}
		if err := l.net.Destroy(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("lab: removing the namespace network: %w", err))
		} else {
			l.events.Record(obs.NetnsDown{Bridge: l.net.Bridge})
		}
		l.net = nil
	}
	errs = append(errs, l.events.Close())
	return errors.Join(errs...)
}

func (l *Lab) node(name string) (*node, error) {
	n, ok := l.byName[name]
	if !ok {
		return nil, fmt.Errorf("lab: %s: %w", name, ErrUnknownNode)
	}
	return n, nil
}

// Up writes the run directory, builds the binaries and starts every selected node that can run, in order,
// each waiting for the previous to be ready. If one fails, the ones already started are stopped and the error
// is a *StartError naming the node, with the tail of its log.
func (l *Lab) Up(ctx context.Context) error {
	if err := l.Prepare(); err != nil {
		return err
	}
	if err := l.Build(ctx); err != nil {
		return err
	}
	if err := l.checkPorts(); err != nil {
		return err
	}
	if stale := RemoveStaleCPUCgroups(); len(stale) > 0 {
		l.log.Info("removed cpu cgroups a crashed run left behind", "cgroups", stale)
	}
	l.events.Record(obs.LabUp{RunDir: l.cfg.RunDir, Nodes: l.runNames()})
	if err := l.applyLinks(ctx); err != nil {
		return err
	}
	for _, n := range l.nodes {
		if !n.runnable || !n.selected {
			continue
		}
		if err := l.Start(ctx, n.Name); err != nil {
			_ = l.Down()
			return err
		}
	}
	l.startSampler()
	return nil
}

// Run is Up, then waits for ctx and stops every node (Down). It returns nil after a clean shutdown.
func (l *Lab) Run(ctx context.Context) error {
	if err := l.Up(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return l.Down()
}

// Down stops every running node, in reverse start order, gracefully (SIGTERM, then SIGKILL after the grace
// period).
func (l *Lab) Down() error {
	l.stopSampler()
	l.events.Record(obs.LabDown{})
	var errs []error
	for i := len(l.nodes) - 1; i >= 0; i-- {
		n := l.nodes[i]
		if err := l.stop(n, true, ""); err != nil && !errors.Is(err, ErrNotRunning) {
			errs = append(errs, err)
		}
		n.mu.Lock()
		slowed := n.cpu != nil
		n.mu.Unlock()
		if slowed { // a slow fault still in place: its cgroup goes with the lab
			if err := l.unthrottle(n); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := l.healAllNet(); err != nil { // the site links and the network faults still in place
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (l *Lab) runNames() []string {
	var out []string
	for _, n := range l.nodes {
		if n.runnable && n.selected {
			out = append(out, n.Name)
		}
	}
	return out
}

// State is what the lab knows of a node.
type State string

// Node states.
const (
	StateNotBuilt State = "not built yet"
	StateSkipped  State = "not selected"
	StateStopped  State = "stopped" // never started, or stopped
	StateStarting State = "starting"
	StateReady    State = "ready"
	StatePaused   State = "paused"
	StateExited   State = "exited" // ended without being asked to
)

// NodeStatus is one row of the lab's table.
type NodeStatus struct {
	Name      string
	Kind      topology.Kind
	Addresses []string // "sip 127.0.0.1:5061/udp", …
	PID       int      // 0 when not running
	State     State
	Exit      string // how the last process ended ("exit status 1", "signal: killed"), if it has
}

// Status returns one row per node, in start order.
func (l *Lab) Status() []NodeStatus {
	out := make([]NodeStatus, 0, len(l.nodes))
	for _, n := range l.nodes {
		s := NodeStatus{Name: n.Name, Kind: n.Kind}
		for _, p := range n.Ports {
			s.Addresses = append(s.Addresses, fmt.Sprintf("%s %s/%s", p.Name, n.Endpoint(p.Name), p.Proto))
		}
		switch {
		case !n.runnable:
			s.State = StateNotBuilt
		case !n.selected:
			s.State = StateSkipped
		default:
			n.mu.Lock()
			p, paused := n.proc, n.paused
			n.mu.Unlock()
			s.State = StateStopped
			if p != nil {
				switch {
				case !p.exited():
					s.PID, s.State = p.pid, StateStarting
					if p.isReady() {
						s.State = StateReady
					}
					if paused {
						s.State = StatePaused
					}
				default:
					s.Exit = p.exitString()
					if !p.isExpected() {
						s.State = StateExited
					}
				}
			}
		}
		out = append(out, s)
	}
	return out
}
