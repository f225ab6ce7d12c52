package ue

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far, all threads, from getrusage.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuClock is the process's CPU time and the wall time from one starting point.
type cpuClock struct {
	wall time.Time
	cpu  time.Duration
}

func startCPUClock() cpuClock { return cpuClock{wall: time.Now(), cpu: processCPU()} }

// since returns the CPU time used and the wall time passed since the clock started (zeros if it never did).
func (c cpuClock) since() (cpu, wall time.Duration) {
	if c.wall.IsZero() {
		return 0, 0
	}
	return processCPU() - c.cpu, time.Since(c.wall)
}
