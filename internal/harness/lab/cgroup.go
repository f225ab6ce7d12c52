package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// CPUCgroupRoot is where the cgroup v1 cpu controller is mounted.
var CPUCgroupRoot = "/sys/fs/cgroup/cpu"

// cpuPeriodUs is the CFS period of a throttled node: its quota is a share of it.
const cpuPeriodUs = 100_000

// ErrNoCPUCgroup: the machine has no writable cgroup v1 cpu controller (or the lab does not run as root).
var ErrNoCPUCgroup = errors.New("needs the cgroup v1 cpu controller at " + "/sys/fs/cgroup/cpu" +
	" (cpu.cfs_quota_us) and root")

// cpuLimit is a process moved into its own cpu cgroup with a CFS quota.
type cpuLimit struct {
	pid      int
	dir      string // the cgroup made for it
	origin   string // the cgroup it came from (relative to CPUCgroupRoot)
	quotaUs  int    // as read back from cpu.cfs_quota_us
	periodUs int    // as read back from cpu.cfs_period_us
}

// limitCPU moves pid (every thread: cgroup.procs) into a new cpu cgroup named name whose quota is percent % of
// one CPU, and reads the applied quota back.
func limitCPU(pid int, name string, percent int) (*cpuLimit, error) {
	if percent < 1 || percent > 99 {
		return nil, fmt.Errorf("cpu percent %d: must be 1..99", percent)
	}
	if _, err := os.Stat(filepath.Join(CPUCgroupRoot, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCPUCgroup, err)
	}
	origin, err := cpuCgroupOf(pid)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(CPUCgroupRoot, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCPUCgroup, err)
	}
	c := &cpuLimit{pid: pid, dir: dir, origin: origin}
	fail := func(err error) (*cpuLimit, error) {
		_ = os.Remove(dir)
		return nil, err
	}
	if err := writeInt(filepath.Join(dir, "cpu.cfs_period_us"), cpuPeriodUs); err != nil {
		return fail(err)
	}
	if err := writeInt(filepath.Join(dir, "cpu.cfs_quota_us"), cpuPeriodUs*percent/100); err != nil {
		return fail(err)
	}
	if err := writeInt(filepath.Join(dir, "cgroup.procs"), pid); err != nil {
		return fail(err)
	}
	if c.quotaUs, err = readInt(filepath.Join(dir, "cpu.cfs_quota_us")); err != nil {
		return c, err
	}
	if c.periodUs, err = readInt(filepath.Join(dir, "cpu.cfs_period_us")); err != nil {
		return c, err
	}
	return c, nil
}

// remove moves the process back to its cgroup (when it still runs) and removes the cgroup.
func (c *cpuLimit) remove() error {
	back := filepath.Join(CPUCgroupRoot, c.origin, "cgroup.procs")
	if err := writeInt(back, c.pid); err != nil && !errors.Is(err, os.ErrNotExist) && !isESRCH(err) {
		return fmt.Errorf("moving pid %d back to %s: %w", c.pid, c.origin, err)
	}
	// The kernel drops a moved or dead process from cgroup.procs at once, but rmdir may see it busy for a moment.
	var err error
	for range 50 {
		if err = os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", c.dir, err)
}

func isESRCH(err error) bool { return err != nil && strings.Contains(err.Error(), "no such process") }

// cpuCgroupOf returns pid's cgroup of the cpu controller, relative to its mount point ("/" for the root).
func cpuCgroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("cgroup of pid %d: %w: no cpu controller in /proc/%d/cgroup", pid, ErrNoCPUCgroup, pid)
}

func writeInt(path string, v int) error {
	return os.WriteFile(path, []byte(strconv.Itoa(v)), 0o644)
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Throttle gives a running node percent % of one CPU: its process goes into a cgroup v1 cpu cgroup of its own
// (imslab.<node>.<pid>) with cpu.cfs_quota_us = percent % of cpu.cfs_period_us (100 ms). It stays alive and
// answers, late. The fault and the applied quota, read back from the cgroup, are recorded as a "cpu_limit" event.
func (l *Lab) Throttle(name string, percent int) error {
	n, err := l.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	p, err := n.current()
	if err != nil {
		return fmt.Errorf("lab: slow %s: %w", name, err)
	}
	n.mu.Lock()
	already := n.cpu != nil
	n.mu.Unlock()
	if already {
		return fmt.Errorf("lab: slow %s: already slowed", name)
	}
	c, err := limitCPU(p.pid, fmt.Sprintf("imslab.%s.%d", name, p.pid), percent)
	if err != nil {
		return fmt.Errorf("lab: slow %s: %w", name, err)
	}
	n.mu.Lock()
	n.cpu = c
	n.mu.Unlock()
	l.events.Record(obs.CPULimit{Target: name, PID: p.pid, Cgroup: c.dir, CPUPercent: percent,
		CPUCFSQuotaUs: c.quotaUs, CPUCFSPeriodUs: c.periodUs})
	l.log.Info("node slowed", "target", name, "pid", p.pid, "cgroup", c.dir, "quota_us", c.quotaUs, "period_us", c.periodUs)
	return nil
}

// Unthrottle moves a slowed node back to its cgroup and removes the one Throttle made ("cpu_limit_removed").
func (l *Lab) Unthrottle(name string) error {
	n, err := l.node(name)
	if err != nil {
		return err
	}
	n.op.Lock()
	defer n.op.Unlock()
	return l.unthrottle(n)
}

func (l *Lab) unthrottle(n *node) error {
	n.mu.Lock()
	c := n.cpu
	n.cpu = nil
	n.mu.Unlock()
	if c == nil {
		return fmt.Errorf("lab: unslow %s: %w", n.Name, ErrNotSlowed)
	}
	if err := c.remove(); err != nil {
		return fmt.Errorf("lab: unslow %s: %w", n.Name, err)
	}
	l.events.Record(obs.CPULimitRemoved{Target: n.Name, PID: c.pid, Cgroup: c.dir})
	l.log.Info("node no longer slowed", "target", n.Name, "pid", c.pid)
	return nil
}

// ErrNotSlowed: Unthrottle of a node that Throttle did not slow.
var ErrNotSlowed = errors.New("not slowed")

// Event records an event of the scenario's faults in the lab's events (events/lab.jsonl).
func (l *Lab) Event(ev obs.Event) { l.events.Record(ev) }

// RemoveStaleCPUCgroups removes the cpu cgroups a crashed run left behind (imslab.<node>.<pid> under
// CPUCgroupRoot). rmdir only removes an empty cgroup, so the cgroup of a node another lab is slowing right now
// stays. It returns the cgroups it removed; Up calls it before starting anything.
func RemoveStaleCPUCgroups() []string {
	dirs, _ := filepath.Glob(filepath.Join(CPUCgroupRoot, "imslab.*"))
	var removed []string
	for _, d := range dirs {
		if os.Remove(d) == nil {
			removed = append(removed, d)
		}
	}
	return removed
}

// CPUQuota reads, from the kernel, the CFS bandwidth of the cpu cgroup pid is in: quota and period in µs (quota
// -1: no limit). It reads the cgroup v1 cpu controller's cpu.cfs_quota_us and cpu.cfs_period_us when pid has one,
// else the cgroup v2 cpu.max of its unified cgroup under /sys/fs/cgroup. The compose backend uses it to check,
// beside the engine's word, what a container's processes are given.
func CPUQuota(pid int) (quotaUs, periodUs int, err error) {
	if cg, err := cpuCgroupOf(pid); err == nil {
		dir := filepath.Join(CPUCgroupRoot, cg)
		if quotaUs, err = readInt(filepath.Join(dir, "cpu.cfs_quota_us")); err != nil {
			return 0, 0, err
		}
		periodUs, err = readInt(filepath.Join(dir, "cpu.cfs_period_us"))
		return quotaUs, periodUs, err
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("cgroup of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if cg, ok := strings.CutPrefix(line, "0::"); ok {
			max, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cg, "cpu.max"))
			if err != nil {
				return 0, 0, fmt.Errorf("cgroup v2 cpu.max of pid %d: %w", pid, err)
			}
			f := strings.Fields(string(max)) // "max 100000" or "5000 100000"
			if len(f) != 2 {
				return 0, 0, fmt.Errorf("cgroup v2 cpu.max of pid %d: %q", pid, max)
			}
			if periodUs, err = strconv.Atoi(f[1]); err != nil {
				return 0, 0, fmt.Errorf("cgroup v2 cpu.max of pid %d: %q", pid, max)
			}
			if f[0] == "max" {
				return -1, periodUs, nil
			}
			quotaUs, err = strconv.Atoi(f[0])
			return quotaUs, periodUs, err
		}
	}
	return 0, 0, fmt.Errorf("cgroup of pid %d: %w", pid, ErrNoCPUCgroup)
}
