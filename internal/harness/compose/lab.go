package compose

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// Config configures a compose lab run by a scenario.
type Config struct {
	// Topology is the lab (as for the local lab; it is laid out for containers here). Required.
	Topology *topology.Topology
	// RunDir receives everything of the run, bind-mounted at /data in every container. Required.
	RunDir string
	// RepoDir is the repository root: from a source checkout (a go.mod there) the image is rebuilt at every Up;
	// otherwise it is built only when missing (or Build is set).
	RepoDir string
	// Image is the lab image (default DefaultImage).
	Image string
	// Build builds the image even when the engine has it.
	Build bool
	// Project is the compose project name (default imslab-<random>): several labs can run side by side.
	Project string
	// ReadyTimeout bounds the wait for a started or restarted node to be healthy (default 90s); the whole lab
	// gets three times that, at least 90s.
	ReadyTimeout time.Duration
	// GracePeriod is the wait between SIGTERM and SIGKILL of a graceful stop (default 5s).
	GracePeriod time.Duration
	// Seed is the run's seed, from which every node's seed is derived (Options.Seed).
	Seed int64
	// NoCapture turns off the packet capture of the lab networks (<run-dir>/capture.pcap, with dumpcap).
	NoCapture bool
	// EngineHealthchecks keeps the engine's healthchecks even as root (also IMSLAB_COMPOSE_SELF_READY=0). By
	// default a lab run as root checks readiness itself (selfReady): an idle lab then keeps 6.4 % of this 2-core
	// machine busy instead of 18.6 % (medians of 5 windows, docs/results/issue11/compose-idle-cpu/idle-cpu.txt).
	EngineHealthchecks bool
}

// Lab is a topology run as containers of one compose project, controlled for fault injection. Its methods
// are safe for concurrent use; actions on one node are serialised.
type Lab struct {
	cfg     Config
	log     *slog.Logger
	events  *obs.Recorder
	engine  *Engine
	bundle  *Bundle
	compose string // <run-dir>/compose/docker-compose.yml
	bridge  string // prefix of the bridges: <bridge>-a (access), -c (core), -x (cx)

	mu         sync.Mutex
	containers map[string]Container
	ops        map[string]*sync.Mutex
	capture    *exec.Cmd
	up         bool
	nets       map[string]*nodeNet // network faults by node, in the container's current namespace (netfaults.go)
	slowed     map[string]bool     // nodes whose container Throttle slowed (cpu.go)
	// selfReady: the containers have no healthcheck, and the lab checks each node ready itself, from inside the
	// container's network namespace (ProbeIn), once at start and after a restart. Each engine healthcheck runs a
	// process in its container (a runc exec) every 5 s for the container's whole life: an idle lab of twelve
	// containers spent a fifth of a 2-core machine on them (docs/results.md, "Network faults"). Root only (setns),
	// unless Config.EngineHealthchecks or IMSLAB_COMPOSE_SELF_READY=0; otherwise the engine's healthchecks are kept.
	selfReady bool
}

// Option configures optional collaborators.
type Option func(*Lab)

// WithLogger sets the lab's logger.
func WithLogger(l *slog.Logger) Option { return func(lb *Lab) { lb.log = l } }

// New prepares a compose lab: run directory, events file, engine client. Nothing is started.
func New(cfg Config, opts ...Option) (*Lab, error) {
	if cfg.Topology == nil {
		return nil, errors.New("compose lab: topology: missing")
	}
	if err := cfg.Topology.Validate(); err != nil {
		return nil, fmt.Errorf("compose lab: %w", err)
	}
	if cfg.RunDir == "" {
		return nil, errors.New("compose lab: run_dir: missing")
	}
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 90 * time.Second
	}
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = 5 * time.Second
	}
	var err error
	if cfg.RunDir, err = filepath.Abs(cfg.RunDir); err != nil {
		return nil, fmt.Errorf("compose lab: %w", err)
	}
	id := randomHex(4)
	if cfg.Project == "" {
		cfg.Project = "imslab-" + id
	}
	for _, d := range []string{"", "compose", "logs", "events", "trace", "data"} {
		if err := os.MkdirAll(filepath.Join(cfg.RunDir, d), 0o755); err != nil {
			return nil, fmt.Errorf("compose lab: run dir: %w", err)
		}
	}
	eng, err := NewEngine()
	if err != nil {
		return nil, err
	}
	rec, err := obs.OpenRecorder(filepath.Join(cfg.RunDir, "events", "lab.jsonl"), "lab")
	if err != nil {
		return nil, fmt.Errorf("compose lab: %w", err)
	}
	l := &Lab{cfg: cfg, log: slog.Default(), events: rec, engine: eng, bridge: "ims-" + id,
		compose: filepath.Join(cfg.RunDir, "compose", "docker-compose.yml"), ops: map[string]*sync.Mutex{},
		selfReady: os.Geteuid() == 0 && !cfg.EngineHealthchecks && os.Getenv("IMSLAB_COMPOSE_SELF_READY") != "0"}
	for _, o := range opts {
		o(l)
	}
	return l, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RunDir returns the run directory (absolute).
func (l *Lab) RunDir() string { return l.cfg.RunDir }

// Project returns the compose project name.
func (l *Lab) Project() string { return l.cfg.Project }

// Topology returns the topology as run (laid out for containers); nil before Up.
func (l *Lab) Topology() *topology.Topology {
	if l.bundle == nil {
		return nil
	}
	return l.bundle.Topology
}

// PhoneListen is where phones on the host listen to reach the lab: the host's address on the access network.
func (l *Lab) PhoneListen() string {
	if l.bundle == nil {
		return ""
	}
	return net.JoinHostPort(l.bundle.GatewayAddr(), "0")
}

// PhoneProxy is where phones on the host send everything: the BAC's address on the access network (the DNS
// records name core addresses, which a phone must not use).
func (l *Lab) PhoneProxy() string {
	if l.bundle == nil {
		return ""
	}
	return l.bundle.PhoneProxy()
}

// Close closes the lab's events file. Call it after Down.
func (l *Lab) Close() error { return l.events.Close() }

func (l *Lab) docker(ctx context.Context, args ...string) error {
	full := append([]string{"compose", "-p", l.cfg.Project, "-f", l.compose}, args...)
	cmd := exec.CommandContext(ctx, "docker", full...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %w\n%s", strings.Join(full, " "), err, tailLines(string(out), 30))
	}
	return nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Up makes sure the image exists (building it from RepoDir if not), generates the compose lab into
// <run-dir>/compose on free subnets, starts it and waits until every service is healthy, then starts the
// capture of the lab networks.
func (l *Lab) Up(ctx context.Context) error {
	if err := l.engine.Ping(ctx); err != nil {
		return fmt.Errorf("compose lab: %w", err)
	}
	ok, err := l.engine.ImageExists(ctx, l.cfg.Image)
	if err != nil {
		return fmt.Errorf("compose lab: %w", err)
	}
	// From a source checkout the image is always rebuilt: an image left by an older checkout runs binaries that do
	// not read today's node configurations (a stale image failed at start on a new config field). The Go build
	// cache and Docker's layer cache make a rebuild of unchanged sources take seconds.
	fromSource := false
	if l.cfg.RepoDir != "" {
		if _, err := os.Stat(filepath.Join(l.cfg.RepoDir, "go.mod")); err == nil {
			fromSource = true
		}
	}
	if !ok || l.cfg.Build || fromSource {
		if l.cfg.RepoDir == "" {
			return fmt.Errorf("compose lab: image %s not found (make lab-image builds it)", l.cfg.Image)
		}
		l.log.Info("building the lab image", "image", l.cfg.Image)
		if err := BuildImage(ctx, l.cfg.RepoDir, l.cfg.Image, l.log); err != nil {
			return fmt.Errorf("compose lab: %w", err)
		}
	}
	user := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		subnet, err := l.freeSubnet(ctx)
		if err != nil {
			return fmt.Errorf("compose lab: %w", err)
		}
		b, err := Generate(l.cfg.Topology, Options{Subnet: subnet, Image: l.cfg.Image, ConfigDir: ".",
			DataDir: l.cfg.RunDir, User: user, Bridge: l.bridge, Source: "the scenario's topology", Seed: l.cfg.Seed,
			Labels: OwnerLabels(l.cfg.RunDir), GoMaxProcs: l.cfg.Topology.NodeGoMaxProcsSetting(runtime.NumCPU()),
			NoHealthcheck: l.selfReady})
		if err != nil {
			return fmt.Errorf("compose lab: %w", err)
		}
		dir := filepath.Dir(l.compose)
		if err := b.Write(l.compose, dir); err != nil {
			return fmt.Errorf("compose lab: %w", err)
		}
		if err := b.Topology.WriteFile(filepath.Join(l.cfg.RunDir, "topology.yaml")); err != nil {
			return fmt.Errorf("compose lab: %w", err)
		}
		l.bundle = b
		l.events.Emit(obs.LabUp{RunDir: l.cfg.RunDir, Backend: "compose",
			Project: l.cfg.Project, Subnet: subnet.String(), Access: b.Networks.Access.String(),
			Cx: b.Networks.Cx.String(), Nodes: ServiceNames(b.Topology)})
		began := time.Now()
		upCtx, cancel := context.WithTimeout(ctx, max(3*l.cfg.ReadyTimeout, 90*time.Second))
		lastErr = l.docker(upCtx, "up", "-d", "--wait")
		cancel()
		if lastErr == nil {
			l.log.Info("compose lab up", "project", l.cfg.Project, "subnet", subnet, "took", time.Since(began).Round(time.Millisecond))
			break
		}
		l.mu.Lock()
		l.up = true // something may have been created: Down removes it
		l.mu.Unlock()
		if !strings.Contains(lastErr.Error(), "overlap") && !strings.Contains(lastErr.Error(), "Pool overlaps") {
			break
		}
		_ = l.downProject()
	}
	l.mu.Lock()
	l.up = true
	l.mu.Unlock()
	if lastErr != nil {
		l.collectLogs()
		_ = l.downProject()
		return fmt.Errorf("compose lab: %w", lastErr)
	}
	cs, err := l.engine.Containers(ctx, l.cfg.Project)
	if err != nil {
		return fmt.Errorf("compose lab: %w", err)
	}
	l.mu.Lock()
	l.containers = cs
	l.mu.Unlock()
	for _, name := range ServiceNames(l.bundle.Topology) {
		c, ok := cs[name]
		if !ok {
			return fmt.Errorf("compose lab: service %s has no container", name)
		}
		in, _ := l.engine.Inspect(ctx, c.ID)
		ev := obs.NodeReady{Target: name, PID: in.PID, Container: c.ID[:12]}
		if l.selfReady {
			began := time.Now()
			if err := l.probeReady(ctx, name, in.PID); err != nil {
				_ = l.Down() // collects the nodes' logs
				return fmt.Errorf("compose lab: %w", err)
			}
			ev.ReadyBy, ev.ReadyMs = "lab probe", time.Since(began).Milliseconds()
		}
		l.events.Emit(ev)
	}
	if err := l.applyLinks(ctx, ""); err != nil {
		_ = l.Down()
		return err
	}
	if !l.cfg.NoCapture {
		l.startCapture()
	}
	return nil
}

// freeSubnet picks a core /24 in 172.28.101.0–172.28.248.0 such that neither it nor the /24s just below and just
// above it (access and Cx, topology.NetworksAround) are used by an engine network or a host interface.
func (l *Lab) freeSubnet(ctx context.Context) (netip.Prefix, error) {
	used, err := l.engine.NetworkSubnets(ctx)
	if err != nil {
		return netip.Prefix{}, err
	}
	var taken []netip.Prefix
	for _, s := range used {
		if p, err := netip.ParsePrefix(s); err == nil {
			taken = append(taken, p)
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				taken = append(taken, p)
			}
		}
	}
	start, _ := rand.Int(rand.Reader, big.NewInt(148))
	for i := range 148 {
		third := 101 + (int(start.Int64())+i)%148
		free := true
		for k := third - 1; k <= third+1; k++ { // access, core, cx
			block := netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 28, byte(k), 0}), 24)
			for _, t := range taken {
				free = free && !t.Overlaps(block)
			}
		}
		if free {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 28, byte(third), 0}), 24), nil
		}
	}
	return netip.Prefix{}, errors.New("no three free /24s in a row in 172.28.100.0–172.28.249.0")
}

// startCapture runs dumpcap on the bridges of the three lab networks, into one file: the phones' traffic with the
// BAC (access), the SIP between the BAC and the CSCFs and the DNS (core), the Diameter between the CSCFs and
// the HSS (cx). Without dumpcap the run goes on with a warning (the report's trace.pcap, built from the
// nodes' message traces, is still there).
func (l *Lab) startCapture() {
	bin, err := exec.LookPath("dumpcap")
	if err != nil {
		l.log.Warn("no dumpcap (apt install tshark): no capture of the lab networks")
		l.events.Emit(obs.Capture{Error: "dumpcap not found"})
		return
	}
	path := filepath.Join(l.cfg.RunDir, "capture.pcap")
	ifaces := l.bridges()
	args := []string{"-q"}
	for _, i := range ifaces {
		args = append(args, "-i", i)
	}
	cmd := exec.Command(bin, append(args, "-w", path)...) // pcapng: one file, three interfaces
	logf, _ := os.Create(filepath.Join(l.cfg.RunDir, "logs", "capture.log"))
	if logf != nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		l.log.Warn("capture did not start", "err", err)
		return
	}
	l.mu.Lock()
	l.capture = cmd
	l.mu.Unlock()
	// dumpcap needs a moment to open the interface; traffic starts after Up returns.
	for range 20 {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.events.Emit(obs.Capture{Interfaces: ifaces, File: "capture.pcap"})
}

// bridges are the host interfaces of the access, core and cx networks (Options.Bridge).
func (l *Lab) bridges() []string { return []string{l.bridge + "-a", l.bridge + "-c", l.bridge + "-x"} }

func (l *Lab) stopCapture() {
	l.mu.Lock()
	cmd := l.capture
	l.capture = nil
	l.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Down heals the network faults still applied, stops the capture, saves every service's log to
// <run-dir>/logs/<node>.log and removes the project (containers and network; the data is in the run directory).
func (l *Lab) Down() error {
	l.mu.Lock()
	up := l.up
	l.up = false
	l.mu.Unlock()
	if !up {
		return nil
	}
	// Heal first: a fault left in a namespace would be removed with the container anyway, but a heal checks
	// that the namespace is as it was, and the nodes' last words (their files) are written over healed links.
	healCtx, cancelHeal := context.WithTimeout(context.Background(), 60*time.Second)
	healErr := l.healAllNet(healCtx)
	cancelHeal()
	l.events.Emit(obs.LabDown{})
	// Stop the nodes first so that they end their files; then the capture.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stopErr := l.docker(ctx, "stop", "-t", fmt.Sprint(int(l.cfg.GracePeriod.Seconds())))
	l.stopCapture()
	l.collectLogs()
	return errors.Join(healErr, stopErr, l.downProject())
}

func (l *Lab) downProject() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The nodes are stopped already: the removal's own stop timeout only matters for one that was not.
	res, err := DownProject(ctx, l.cfg.Project, l.compose, time.Second, l.log)
	if len(res.Forced) > 0 {
		l.events.Emit(obs.NetworkEndpointForced{Project: l.cfg.Project, Endpoints: res.Forced})
	}
	if err == nil && len(res.Left) > 0 {
		// The run's nodes are gone and their files written, so the run stands: the network is left behind,
		// said in a warning and this event, and later labs take other subnets (freeSubnet skips those in use).
		l.events.Emit(obs.NetworkLeft{Project: l.cfg.Project, Networks: res.Left})
	}
	return err
}

func (l *Lab) collectLogs() {
	if l.bundle == nil {
		return
	}
	for _, name := range ServiceNames(l.bundle.Topology) {
		f, err := os.Create(filepath.Join(l.cfg.RunDir, "logs", name+".log"))
		if err != nil {
			continue
		}
		cmd := exec.Command("docker", "compose", "-p", l.cfg.Project, "-f", l.compose, "logs", "--no-color",
			"--no-log-prefix", name)
		cmd.Stdout, cmd.Stderr = f, f
		_ = cmd.Run()
		f.Close()
	}
}

func (l *Lab) container(name string) (Container, *sync.Mutex, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.containers[name]
	if !ok {
		return Container{}, nil, fmt.Errorf("compose lab: %s: no such service", name)
	}
	op := l.ops[name]
	if op == nil {
		op = &sync.Mutex{}
		l.ops[name] = op
	}
	return c, op, nil
}

func (l *Lab) fault(fault, name, id string) {
	pid := 0
	if in, err := l.engine.Inspect(context.Background(), id); err == nil {
		pid = in.PID
	}
	l.events.Emit(obs.Fault{Fault: fault, Target: name, PID: pid, Container: id[:12]})
}

// Kill sends SIGKILL to a node's container: the process dies and the container's address disappears from the
// network. Recorded as a fault "kill".
func (l *Lab) Kill(name string) error { return l.Stop(name, false) }

// Stop stops a node: gracefully (SIGTERM, SIGKILL after the grace period) or at once (SIGKILL).
func (l *Lab) Stop(name string, graceful bool) error {
	c, op, err := l.container(name)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	ctx := context.Background()
	if graceful {
		l.fault("stop", name, c.ID)
		return l.engine.Stop(ctx, c.ID, l.cfg.GracePeriod)
	}
	l.fault("kill", name, c.ID)
	if err := l.engine.Kill(ctx, c.ID, "KILL"); err != nil {
		return fmt.Errorf("compose lab: kill %s: %w", name, err)
	}
	return nil
}

// Start starts a stopped node's container again and waits until it is healthy.
func (l *Lab) Start(ctx context.Context, name string) error {
	c, op, err := l.container(name)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	l.events.Emit(obs.NodeStart{Target: name, Container: c.ID[:12]})
	if err := l.engine.Start(ctx, c.ID); err != nil {
		return fmt.Errorf("compose lab: start %s: %w", name, err)
	}
	if err := l.applyLinks(ctx, name); err != nil { // its new namespace
		return err
	}
	return l.waitReady(ctx, name, c.ID)
}

func (l *Lab) waitReady(ctx context.Context, name, id string) error {
	began := time.Now()
	// Without a healthcheck (selfReady) this waits for the container to run; the lab's probe follows.
	if err := l.engine.WaitHealthy(ctx, id, l.cfg.ReadyTimeout); err != nil {
		return fmt.Errorf("compose lab: %s: %w", name, err)
	}
	in, _ := l.engine.Inspect(ctx, id)
	ev := obs.NodeReady{Target: name, PID: in.PID}
	if l.selfReady {
		if err := l.probeReady(ctx, name, in.PID); err != nil {
			return fmt.Errorf("compose lab: %w", err)
		}
		ev.ReadyBy = "lab probe"
	}
	ev.ReadyMs = time.Since(began).Milliseconds()
	l.events.Emit(ev)
	return nil
}

// probeReady probes node name, whose container's init process is pid, from inside its network namespace every
// 200 ms until it answers as readiness says (the probe the engine's healthcheck would run) or ReadyTimeout passes.
func (l *Lab) probeReady(ctx context.Context, name string, pid int) error {
	n, ok := l.bundle.Topology.Node(name)
	if !ok {
		return fmt.Errorf("%s: not a node of the topology", name)
	}
	if pid <= 0 {
		return fmt.Errorf("%s: its container has no process", name)
	}
	kind, addr, domain := readiness(l.bundle.Topology, n)
	if err := waitProbe(ctx, l.cfg.ReadyTimeout, func() error {
		return ProbeIn(fmt.Sprintf("/proc/%d/ns/net", pid), kind, addr, domain, time.Second)
	}); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Pause freezes a node's container (cgroup freezer): its address stays, it answers nothing.
func (l *Lab) Pause(name string) error {
	c, op, err := l.container(name)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	l.fault("pause", name, c.ID)
	return l.engine.Pause(context.Background(), c.ID)
}

// Resume thaws a paused node's container.
func (l *Lab) Resume(name string) error {
	c, op, err := l.container(name)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	l.fault("resume", name, c.ID)
	return l.engine.Unpause(context.Background(), c.ID)
}

// Restart stops a node gracefully and starts it again (empty), waiting until it is healthy.
func (l *Lab) Restart(ctx context.Context, name string) error {
	c, op, err := l.container(name)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	l.fault("restart", name, c.ID)
	if err := l.engine.Stop(ctx, c.ID, l.cfg.GracePeriod); err != nil {
		return fmt.Errorf("compose lab: restart %s: %w", name, err)
	}
	if err := l.engine.Start(ctx, c.ID); err != nil {
		return fmt.Errorf("compose lab: restart %s: %w", name, err)
	}
	if err := l.applyLinks(ctx, name); err != nil {
		return err
	}
	return l.waitReady(ctx, name, c.ID)
}

// Event records an event of the scenario's faults in the lab's events (events/lab.jsonl).
func (l *Lab) Event(ev obs.Event) { l.events.Emit(ev) }
