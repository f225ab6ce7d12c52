package compose

import (
	"context"
	"errors"
	"fmt"

	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// cpuPeriodUs is the CFS period of a slowed container: its quota is a share of it (as on the local backend).
const cpuPeriodUs = 100_000

// ErrNotSlowed: Unthrottle of a node that Throttle did not slow.
var ErrNotSlowed = errors.New("not slowed")

// Throttle gives a running node's container percent % of one CPU (the `slow` fault, a gray failure): the engine
// sets its cgroup's CFS quota to percent % of a 100 ms period (`docker update --cpu-period --cpu-quota`). The
// node stays alive and answers, late. The quota is read back from the kernel (the cgroup of the container's init
// process, lab.CPUQuota) and recorded with the fault in a "cpu_limit" event; a quota the kernel does not show is
// an error.
func (l *Lab) Throttle(name string, percent int) error {
	if percent < 1 || percent > 99 {
		return fmt.Errorf("compose lab: slow %s: cpu percent %d: must be 1..99", name, percent)
	}
	c, op, err := l.container(name)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	l.mu.Lock()
	already := l.slowed[name]
	l.mu.Unlock()
	if already {
		return fmt.Errorf("compose lab: slow %s: already slowed", name)
	}
	ctx := context.Background()
	want := int64(cpuPeriodUs * percent / 100)
	if err := l.engine.UpdateCPU(ctx, c.ID, cpuPeriodUs, want); err != nil {
		return fmt.Errorf("compose lab: slow %s: %w", name, err)
	}
	l.mu.Lock()
	if l.slowed == nil {
		l.slowed = map[string]bool{}
	}
	l.slowed[name] = true
	l.mu.Unlock()
	in, err := l.engine.Inspect(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("compose lab: slow %s: %w", name, err)
	}
	quota, period, err := lab.CPUQuota(in.PID)
	if err != nil {
		return fmt.Errorf("compose lab: slow %s: reading the applied quota back: %w", name, err)
	}
	if int64(quota) != want || period != cpuPeriodUs {
		return fmt.Errorf("compose lab: slow %s: the kernel shows a quota of %d µs per %d µs, not %d per %d", name,
			quota, period, want, cpuPeriodUs)
	}
	l.events.Emit(obs.CPULimit{Target: name, PID: in.PID, Container: c.ID[:12],
		CPUPercent: percent, CPUCFSQuotaUs: quota, CPUCFSPeriodUs: period})
	l.log.Info("node slowed", "target", name, "container", c.ID[:12], "quota_us", quota, "period_us", period)
	return nil
}

// Unthrottle lifts a slowed node's CPU limit (quota -1) and checks the kernel shows none ("cpu_limit_removed").
func (l *Lab) Unthrottle(name string) error {
	c, op, err := l.container(name)
	if err != nil {
		return err
	}
	op.Lock()
	defer op.Unlock()
	l.mu.Lock()
	slowed := l.slowed[name]
	delete(l.slowed, name)
	l.mu.Unlock()
	if !slowed {
		return fmt.Errorf("compose lab: unslow %s: %w", name, ErrNotSlowed)
	}
	ctx := context.Background()
	if err := l.engine.UpdateCPU(ctx, c.ID, cpuPeriodUs, -1); err != nil {
		return fmt.Errorf("compose lab: unslow %s: %w", name, err)
	}
	in, err := l.engine.Inspect(ctx, c.ID)
	if err != nil {
		return fmt.Errorf("compose lab: unslow %s: %w", name, err)
	}
	if in.PID != 0 {
		if quota, _, err := lab.CPUQuota(in.PID); err != nil || quota != -1 {
			return fmt.Errorf("compose lab: unslow %s: the kernel still shows a quota of %d µs (%v)", name, quota, err)
		}
	}
	l.events.Emit(obs.CPULimitRemoved{Target: name, PID: in.PID, Container: c.ID[:12]})
	l.log.Info("node no longer slowed", "target", name, "container", c.ID[:12])
	return nil
}
