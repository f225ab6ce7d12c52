package lab

import (
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
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
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, n := range l.nodes {
			n.mu.Lock()
			p := n.proc
			n.mu.Unlock()
			if p == nil || p.exited() {
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
