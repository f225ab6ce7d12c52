// Package provenance says what produced a result: the code (commit and whether tracked files differed from it),
// the toolchain, the machine and the command. Runs, comparisons and studies record it in their outputs
// (docs/report.md, docs/study.md), so a published number can be traced to the code and machine behind it.
package provenance

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
)

// Info is the provenance of one invocation.
type Info struct {
	// Commit is the repository's HEAD ("unknown" outside a git checkout: then the commit imslab was built
	// from, when the build recorded it); Dirty is true when tracked files differ from it, the published results
	// and documentation under docs/ left out (regenerating one study's numbers in docs/ before the next would
	// otherwise mark the next as made from changed code).
	Commit string `json:"commit"`
	Dirty  bool   `json:"dirty"`
	// GoVersion is the toolchain imslab was built with; GoBuild the `go version` on PATH, which builds the nodes.
	GoVersion string `json:"go_version"`
	GoBuild   string `json:"go_build,omitempty"`
	// CPUModel and CPUs from /proc/cpuinfo (CPUs: processors listed); Kernel from /proc or uname -r.
	CPUModel string `json:"cpu_model"`
	CPUs     int    `json:"cpus"`
	Kernel   string `json:"kernel"`
	OS       string `json:"os"`
	// CommandLine is the invoking program's argv.
	CommandLine []string `json:"command_line,omitempty"`
}

// Collect gathers the provenance from the repository at repo (the working directory when "") and argv.
func Collect(repo string, argv []string) Info {
	p := Info{Commit: "unknown", GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		CommandLine: slices.Clone(argv), CPUs: runtime.NumCPU(), Kernel: "unknown", CPUModel: "unknown"}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	if c, err := git("rev-parse", "HEAD"); err == nil && c != "" {
		p.Commit = c
		if st, err := git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs"); err == nil {
			p.Dirty = st != ""
		}
	} else if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				p.Commit = s.Value
			case "vcs.modified":
				p.Dirty = s.Value == "true"
			}
		}
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		p.GoBuild = strings.TrimSpace(string(out))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		p.CPUModel, p.CPUs = ParseCPUInfo(b, p.CPUs)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		p.Kernel = strings.TrimSpace(string(b))
	} else if out, err := exec.Command("uname", "-r").Output(); err == nil {
		p.Kernel = strings.TrimSpace(string(out))
	}
	return p
}

// Short is the commit in a few characters with "+dirty" when tracked files differed ("unknown" stays).
func (p Info) Short() string {
	c := p.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if p.Dirty {
		c += "+dirty"
	}
	return c
}

// ParseCPUInfo returns the first "model name" and the number of "processor" entries (def when none).
func ParseCPUInfo(b []byte, def int) (string, int) {
	model, n := "unknown", 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "processor":
			n++
		case "model name":
			if model == "unknown" {
				model = strings.TrimSpace(v)
			}
		}
	}
	if n == 0 {
		n = def
	}
	return model, n
}
