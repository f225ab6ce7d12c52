package study

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FileEnv is the per-run record of what ran it and how busy the machine was: a study may be resumed on another
// day, so the study-wide provenance is not enough to say which code produced each run.
const FileEnv = "study-env.json"

// RunEnv is study-env.json: the commit of the repository when the run started (and whether tracked files
// differed from it), the CPUs the run could use (the process's affinity: a study pinned with taskset records
// it), and the 1-minute load average before and after the run (a lab's timings depend on what else ran).
type RunEnv struct {
	Commit       string    `json:"commit"`
	Dirty        bool      `json:"dirty"`
	CPUsAllowed  []int     `json:"cpus_allowed,omitempty"`
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished,omitzero"`
	LoadAvgStart float64   `json:"loadavg1_start"`
	LoadAvgEnd   float64   `json:"loadavg1_end,omitempty"`
}

// newRunEnv records the environment at the start of a run.
func newRunEnv(prov Provenance) RunEnv {
	e := RunEnv{Commit: prov.Commit, Dirty: prov.Dirty, Started: time.Now().UTC(), LoadAvgStart: loadAvg1()}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		for c := 0; c < 1024; c++ {
			if set.IsSet(c) {
				e.CPUsAllowed = append(e.CPUsAllowed, c)
			}
		}
	}
	return e
}

// finish records the end of the run.
func (e *RunEnv) finish() {
	e.Finished, e.LoadAvgEnd = time.Now().UTC(), loadAvg1()
}

// loadAvg1 is the 1-minute load average from /proc/loadavg (0 when it cannot be read).
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func writeEnv(dir string, e RunEnv) error {
	b, _ := json.MarshalIndent(e, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, FileEnv), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	return nil
}

// readEnv reads a run's study-env.json; nil when the run has none (a run of an older imslab).
func readEnv(dir string) (*RunEnv, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileEnv))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var e RunEnv
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("%s: %w", FileEnv, err)
	}
	return &e, nil
}
