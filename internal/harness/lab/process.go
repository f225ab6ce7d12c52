package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// process is one run of a node's binary.
type process struct {
	pid     int
	cmd     *exec.Cmd
	log     *os.File
	logFrom int64 // size of the log file when the process started: readiness is looked for after it
	started time.Time
	done    chan struct{} // closed when the process has been reaped

	mu       sync.Mutex
	ready    bool
	expected bool // the lab asked it to end (stop, kill, down)
	state    *os.ProcessState
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) isReady() bool    { p.mu.Lock(); defer p.mu.Unlock(); return p.ready }
func (p *process) isExpected() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.expected }
func (p *process) expect()          { p.mu.Lock(); p.expected = true; p.mu.Unlock() }

func (p *process) exitString() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return ""
	}
	return p.state.String()
}

// signal sends sig to the node's process group (each node runs in its own group).
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return ErrNotRunning
	}
	if err := syscall.Kill(-p.pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return ErrNotRunning
		}
		return err
	}
	return nil
}

func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// current returns the node's live process, or ErrNotRunning.
func (n *node) current() (*process, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.exited() {
		return nil, ErrNotRunning
	}
	return n.proc, nil
}

// PID returns the process id of a running node, or 0.
func (l *Lab) PID(name string) int {
	n, ok := l.byName[name]
	if !ok {
		return 0
	}
	p, err := n.current()
	if err != nil {
		return 0
	}
	return p.pid
}

// Exited returns a channel closed when the node's current (or last) process has ended, or nil if it was never
// started.
func (l *Lab) Exited(name string) <-chan struct{} {
	n, ok := l.byName[name]
	if !ok {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return nil
	}
	return n.proc.done
}

// Start starts a node (<run-dir>/bin/<kind> --config <run-dir>/config/<node>.yaml) and waits until it is ready
// or ReadyTimeout passes. A node that does not become ready is killed and the error is a *StartError.
func (l *Lab) Start(ctx context.Context, name string) error {
	n, err := l.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	return l.start(ctx, n)
}

func (l *Lab) start(ctx context.Context, n *node) error {
	switch {
	case !n.runnable:
		return fmt.Errorf("lab: start %s: %w", n.Name, ErrNotBuilt)
	case !n.selected:
		return fmt.Errorf("lab: start %s: %w", n.Name, ErrSkipped)
	}
	if _, err := n.current(); err == nil {
		return fmt.Errorf("lab: start %s: %w", n.Name, ErrRunning)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("lab: start %s: %w", n.Name, err)
	}
	st, err := logf.Stat()
	if err != nil {
		logf.Close()
		return fmt.Errorf("lab: start %s: %w", n.Name, err)
	}
	args := []string{"--config", n.config}
	if n.Vendor == topology.VendorKamailio {
		args = kamailioArgs(l.cfg.RunDir, n.Name)
	}
	cmd := exec.Command(n.bin, args...)
	if n.ns != "" {
		// ip netns exec enters the namespace and execs the binary: the PID is the node's, not a wrapper's.
		cmd = netns.Command(n.ns, n.bin, args...)
	}
	cmd.Dir = l.cfg.RunDir
	// Every node runs with the lab's GOMAXPROCS (topology.NodeGoMaxProcs: the machine's CPUs shared among the
	// nodes), not with every CPU each.
	cmd.Env = append(os.Environ(), topology.GoMaxProcsEnv+"="+l.goMaxProcs)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return &StartError{Node: n.Name, Log: n.logPath, Err: err}
	}
	p := &process{pid: cmd.Process.Pid, cmd: cmd, log: logf, logFrom: st.Size(), started: time.Now(),
		done: make(chan struct{})}
	n.mu.Lock()
	n.proc, n.paused = p, false
	n.mu.Unlock()
	l.events.Record(obs.NodeStart{Target: n.Name, NodeKind: string(n.Kind), PID: p.pid,
		GoMaxProcs: l.goMaxProcs})
	l.log.Info("node started", "target", n.Name, "pid", p.pid)
	go l.reap(n, p)

	if err := l.waitReady(ctx, n, p); err != nil {
		p.expect()
		_ = p.signal(syscall.SIGKILL)
		p.wait(5 * time.Second)
		return &StartError{Node: n.Name, Log: n.logPath, Err: err, Tail: tail(n.logPath, p.logFrom, 20)}
	}
	p.mu.Lock()
	p.ready = true
	p.mu.Unlock()
	ms := time.Since(p.started).Milliseconds()
	l.events.Record(obs.NodeReady{Target: n.Name, PID: p.pid, ReadyMs: ms})
	l.log.Info("node ready", "target", n.Name, "pid", p.pid, "ready_ms", ms)
	return nil
}

// reap waits for the process and records its exit.
func (l *Lab) reap(n *node, p *process) {
	_ = p.cmd.Wait()
	p.mu.Lock()
	p.state = p.cmd.ProcessState
	expected := p.expected
	p.mu.Unlock()
	p.log.Close()
	ev := obs.NodeExit{Target: n.Name, PID: p.pid, Expected: expected,
		UptimeMs: time.Since(p.started).Milliseconds(), Status: p.state.String(), ExitCode: p.state.ExitCode()}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ev.Signal = unixSignalName(ws.Signal())
	}
	l.events.Record(ev)
	if expected {
		l.log.Info("node exited", "target", n.Name, "pid", p.pid, "status", p.state.String())
	} else {
		l.log.Warn("node exited unexpectedly", "target", n.Name, "pid", p.pid, "status", p.state.String(),
			"log", n.logPath)
	}
	close(p.done)
}

func unixSignalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	}
	return s.String()
}

// Stop ends a node: gracefully (SIGTERM, then SIGKILL after the grace period) or not (SIGKILL). It returns once
// the process has ended. Recorded as a fault "stop" (graceful) or "kill".
func (l *Lab) Stop(name string, graceful bool) error {
	n, err := l.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	fault := "kill"
	if graceful {
		fault = "stop"
	}
	return l.stop(n, graceful, fault)
}

// Kill sends SIGKILL to a node and returns once it has ended. Recorded as a fault "kill".
func (l *Lab) Kill(name string) error { return l.Stop(name, false) }

// stop ends n's process. fault != "" records a fault event first.
func (l *Lab) stop(n *node, graceful bool, fault string) error {
	p, err := n.current()
	if err != nil {
		return fmt.Errorf("lab: stop %s: %w", n.Name, err)
	}
	if fault != "" {
		l.events.Record(obs.Fault{Fault: fault, Target: n.Name, PID: p.pid})
	}
	p.expect()
	n.mu.Lock()
	paused := n.paused
	n.paused = false
	n.mu.Unlock()
	if graceful {
		_ = p.signal(syscall.SIGTERM)
		if paused {
			_ = p.signal(syscall.SIGCONT) // a stopped process handles SIGTERM only once continued
		}
		if p.wait(l.cfg.GracePeriod) {
			return nil
		}
		l.log.Warn("node did not stop in time, killing it", "target", n.Name, "pid", p.pid, "grace", l.cfg.GracePeriod)
	}
	if err := p.signal(syscall.SIGKILL); err != nil && !errors.Is(err, ErrNotRunning) {
		return fmt.Errorf("lab: kill %s: %w", n.Name, err)
	}
	if !p.wait(10 * time.Second) {
		return fmt.Errorf("lab: %s (pid %d) still running after SIGKILL", n.Name, p.pid)
	}
	return nil
}

// Pause freezes a node with SIGSTOP: its sockets stay open but it answers nothing. Recorded as a fault "pause".
func (l *Lab) Pause(name string) error {
	return l.freeze(name, true)
}

// Resume continues a paused node with SIGCONT. Recorded as a fault "resume".
func (l *Lab) Resume(name string) error {
	return l.freeze(name, false)
}

func (l *Lab) freeze(name string, pause bool) error {
	n, err := l.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	fault, sig := "resume", syscall.SIGCONT
	if pause {
		fault, sig = "pause", syscall.SIGSTOP
	}
	p, err := n.current()
	if err != nil {
		return fmt.Errorf("lab: %s %s: %w", fault, name, err)
	}
	l.events.Record(obs.Fault{Fault: fault, Target: name, PID: p.pid})
	if err := p.signal(sig); err != nil {
		return fmt.Errorf("lab: %s %s: %w", fault, name, err)
	}
	n.mu.Lock()
	n.paused = pause
	n.mu.Unlock()
	l.log.Info("node "+fault+"d", "target", name, "pid", p.pid)
	return nil
}

// Restart stops a node gracefully (if it runs) and starts it again. Recorded as a fault "restart".
func (l *Lab) Restart(ctx context.Context, name string) error {
	n, err := l.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	pid := 0
	if p, err := n.current(); err == nil {
		pid = p.pid
	}
	l.events.Record(obs.Fault{Fault: "restart", Target: name, PID: pid})
	if err := l.stop(n, true, ""); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return l.start(ctx, n)
}
