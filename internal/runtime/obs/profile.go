package obs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// CPUProfileEnv names a directory: when it is set, a node writes a CPU profile of its whole life to
// <dir>/<node>.cpu.pprof, stopped when the node stops on SIGINT or SIGTERM (a node killed with SIGKILL leaves an
// unreadable file). The lab's nodes inherit the variable from imslab, so one setting profiles a whole run
// (docs/performance.md, "Profiling a lab run").
const CPUProfileEnv = "IMSLAB_CPUPROFILE_DIR"

// StartCPUProfileFromEnv starts the CPU profile CPUProfileEnv asks for, named after the node, and returns the
// function that stops it; without the variable it does nothing.
func StartCPUProfileFromEnv(node string) (stop func(), err error) {
	dir := os.Getenv(CPUProfileEnv)
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, node+".cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
