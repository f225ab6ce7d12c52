package lab

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
	"github.com/prometheus/procfs"
)

// ResourceInterval is how often the lab samples each running node's CPU time and resident memory.
const ResourceInterval = time.Second

// sampleResources writes a "resource" event per running node every ResourceInterval until stop is closed:
// cumulative CPU seconds (user + system, /proc/<pid>/stat) and resident memory. The report turns them into each
// pool member's CPU share before a fault and after its takeover (docs/report.md, "Member load"). A node in
// its own network namespace is still a process of this PID namespace, so the same file serves --netns.
func (l *Lab) sampleResources(stop <-chan struct{}) {
	t := time.NewTicker(ResourceInterval)
	defer t.Stop()
	var m machineSampler
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ours := map[int]bool{}
		for _, n := range l.nodes {
			n.mu.Lock()
			if n.proc != nil && !n.proc.exited() {
				ours[n.proc.pid] = true
			}
			n.mu.Unlock()
		}
		if ev, ok := m.sample(ours); ok {
			l.events.Record(ev)
		}
		for _, n := range l.nodes {
			n.mu.Lock()
			p := n.proc
			n.mu.Unlock()
			if p == nil || p.exited() {
				continue
			}
			if n.Vendor == topology.VendorKamailio { // its children do the work: sum the process group
				if cpu, rss, ok := groupUsage(p.pid); ok {
					l.events.Record(obs.Resource{Target: n.Name, PID: p.pid, CPUS: cpu, RSSBytes: rss})
				}
				continue
			}
			proc, err := procfs.NewProc(p.pid)
			if err != nil {
				continue
			}
			st, err := proc.Stat()
			if err != nil {
				continue // it ended between the check and the read
			}
			l.events.Record(obs.Resource{Target: n.Name, PID: p.pid,
				CPUS: st.CPUTime(), RSSBytes: st.ResidentMemory()})
		}
	}
}

// nodeCommands are the process names of lab nodes: a process with one of them that is not this lab's is another
// lab (local, in namespaces or in containers: their processes are this kernel's).
var nodeCommands = map[string]bool{"bac": true, "pcscf": true, "icscf": true, "scscf": true, "hss": true, "dnsd": true}

// machineSampler samples the machine for the run's health record (an obs.Machine event per sample).
type machineSampler struct {
	steal, total float64 // /proc/stat's counters at the last sample
}

func (m *machineSampler) sample(ours map[int]bool) (obs.Machine, bool) {
	ev := obs.Machine{CPUs: runtime.NumCPU()}
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ev, false // not Linux: no health record
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return ev, false
	}
	ev.Load1, _ = strconv.ParseFloat(f[0], 64)
	if r, _, ok := strings.Cut(f[3], "/"); ok {
		ev.ProcsRunning, _ = strconv.Atoi(r)
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return ev, true
	}
	if st, err := fs.Stat(); err == nil {
		c := st.CPUTotal
		total := c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
		if m.total > 0 && total > m.total {
			ev.StealRatio = (c.Steal - m.steal) / (total - m.total)
		}
		m.steal, m.total = c.Steal, total
	}
	if procs, err := fs.AllProcs(); err == nil {
		for _, p := range procs {
			if ours[p.PID] || p.PID == os.Getpid() {
				continue
			}
			if c, err := p.Comm(); err == nil && nodeCommands[c] {
				ev.OtherLabs++
			}
		}
	}
	return ev, true
}
