package scenario

import (
	"os"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/prometheus/procfs"
)

// PhonesTarget is the target of the "resource" events the runner records for its own process, which runs the
// phones (internal/harness/ue) in-process: the lab samples only its nodes, and a memory point (imslab memory, docs/
// performance.md) reports the phones apart from them.
const PhonesTarget = "phones"

// sampleSelf records a "resource" event for the runner's own process (target PhonesTarget) every
// ResourceInterval until stop is closed, in the same form as the lab's node samples (cpu_s, rss_bytes).
func sampleSelf(rec EventRecorder, stop <-chan struct{}) {
	proc, err := procfs.Self()
	if err != nil {
		return // not Linux /proc: no samples
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if st, err := proc.Stat(); err == nil {
			rec.Event(obs.Resource{Target: PhonesTarget, PID: os.Getpid(), CPUS: st.CPUTime(),
				RSSBytes: st.ResidentMemory()})
		}
	}
}
