package study

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/analysis/provenance"
)

// Provenance says what produced a study's results: the code, the toolchain, the machine, the command and seeds.
type Provenance struct {
	// Info: the commit and dirty flag, the toolchains, the CPU, the kernel and the command line
	// (internal/analysis/provenance; the same fields at the top level of the JSON).
	provenance.Info
	// Seeds are the seeds of each experiment's repetitions (every scheme of repetition k has the k-th).
	Seeds    map[string][]int64 `json:"seeds"`
	Started  time.Time          `json:"started"`
	Finished time.Time          `json:"finished"`
	// RunCommits counts the runs in the results by the commit that ran them ("<sha>" or "<sha>+dirty", from
	// each run's study-env.json; "unrecorded" for runs without one): a study resumed on other code shows
	// more than one. LoadAvgMax is the highest 1-minute load average seen at the start or end of a run.
	RunCommits map[string]int `json:"run_commits,omitempty"`
	LoadAvgMax float64        `json:"loadavg1_max,omitempty"`
	// CPUsAllowed is every CPU a run could use (taskset), and RunCPUs counts the runs by the set they could use
	// ("[0]": 80, "[1]": 80 for a study run as two halves pinned one per CPU).
	CPUsAllowed []int          `json:"cpus_allowed,omitempty"`
	RunCPUs     map[string]int `json:"run_cpus,omitempty"`
	// RunCommands counts the runs by the command line that made them (each run's summary.json provenance): the
	// commands that ran a study resumed or run in parts, where CommandLine is the one that aggregated it.
	RunCommands map[string]int `json:"run_commands,omitempty"`
	// RunMachines counts the runs by the machine that made them ("<CPU model>, <n> cores, kernel <release>", from
	// each run's summary.json provenance): Info's CPU and kernel are those of the machine that aggregated them.
	RunMachines map[string]int `json:"run_machines,omitempty"`
	// Builds lists the runs by the build of their binaries (binaries.json: the revisions Go embedded, "+dirty"
	// for a tree with changes), and BuildCheck says what the check of one build found ("one build: …", "build
	// check skipped: …" for runs without binaries.json).
	Builds     map[string][]string `json:"builds,omitempty"`
	BuildCheck string              `json:"build_check,omitempty"`
}

// addRuns fills the per-run part of the provenance from the results' run environments.
func (p *Provenance) addRuns(results []RunResult) {
	p.RunCommits, p.LoadAvgMax = map[string]int{}, 0
	p.CPUsAllowed, p.RunCPUs, p.RunCommands, p.RunMachines = nil, map[string]int{}, map[string]int{}, map[string]int{}
	for _, r := range results {
		if r.Summary == nil {
			continue
		}
		if pv := r.Summary.Provenance; pv != nil {
			if len(pv.CommandLine) > 0 {
				p.RunCommands[strings.Join(pv.CommandLine, " ")]++
			}
			if pv.CPUModel != "" {
				p.RunMachines[fmt.Sprintf("%s, %d cores, kernel %s", pv.CPUModel, pv.CPUs, pv.Kernel)]++
			}
		}
		if r.Env == nil {
			p.RunCommits["unrecorded"]++
			continue
		}
		k := r.Env.Commit
		if r.Env.Dirty {
			k += "+dirty"
		}
		p.RunCommits[k]++
		p.LoadAvgMax = max(p.LoadAvgMax, r.Env.LoadAvgStart, r.Env.LoadAvgEnd)
		if len(r.Env.CPUsAllowed) > 0 {
			p.RunCPUs[fmt.Sprint(r.Env.CPUsAllowed)]++
			for _, c := range r.Env.CPUsAllowed {
				if !slices.Contains(p.CPUsAllowed, c) {
					p.CPUsAllowed = append(p.CPUsAllowed, c)
				}
			}
		}
	}
	slices.Sort(p.CPUsAllowed)
	if len(p.RunCommits) == 0 {
		p.RunCommits = nil
	}
	if len(p.RunCPUs) == 0 {
		p.RunCPUs = nil
	}
	if len(p.RunCommands) == 0 {
		p.RunCommands = nil
	}
	if len(p.RunMachines) == 0 {
		p.RunMachines = nil
	}
}

// Collect gathers the provenance of a study run from the repository at repo (the working directory when "").
func Collect(repo string, argv []string) Provenance {
	return Provenance{Info: provenance.Collect(repo, argv)}
}

// Markdown renders the provenance section of study.md.
func (p Provenance) Markdown() string {
	var b strings.Builder
	b.WriteString("## Provenance\n\n| | |\n|---|---|\n")
	dirty := "no"
	if p.Dirty {
		dirty = "**yes**: tracked files differed from the commit"
	}
	fmt.Fprintf(&b, "| commit | `%s` |\n| uncommitted changes | %s |\n| Go | %s", p.Commit, dirty, p.GoVersion)
	if p.GoBuild != "" {
		fmt.Fprintf(&b, " (nodes built with: %s)", p.GoBuild)
	}
	fmt.Fprintf(&b, " |\n| CPU (aggregation) | %s, %d cores |\n| kernel (aggregation) | %s (%s) |\n| command | `%s` |\n", p.CPUModel, p.CPUs,
		p.Kernel, p.OS, strings.Join(p.CommandLine, " "))
	var names []string
	for n := range p.Seeds {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		var s []string
		for _, x := range p.Seeds[n] {
			s = append(s, fmt.Sprint(x))
		}
		fmt.Fprintf(&b, "| seeds of %s | %s |\n", n, strings.Join(s, ", "))
	}
	fmt.Fprintf(&b, "| started | %s |\n| finished | %s |\n", p.Started.Format(time.RFC3339), p.Finished.Format(time.RFC3339))
	if len(p.RunCommits) > 0 {
		var cs []string
		for c, n := range p.RunCommits {
			cs = append(cs, fmt.Sprintf("`%s`: %d", c, n))
		}
		slices.Sort(cs)
		fmt.Fprintf(&b, "| runs by commit | %s |\n", strings.Join(cs, ", "))
		fmt.Fprintf(&b, "| highest 1-min load average at a run's start or end | %.2f |\n", p.LoadAvgMax)
	}
	if len(p.RunCPUs) > 0 {
		fmt.Fprintf(&b, "| runs by the CPUs they could use | %s |\n", countsText(p.RunCPUs))
	}
	if len(p.RunCommands) > 0 {
		fmt.Fprintf(&b, "| runs by the command that made them | %s |\n", countsText(p.RunCommands))
	}
	if len(p.RunMachines) > 0 {
		fmt.Fprintf(&b, "| runs by the machine that made them | %s |\n", countsText(p.RunMachines))
	}
	if p.BuildCheck != "" {
		fmt.Fprintf(&b, "| build of the binaries | %s |\n", p.BuildCheck)
	}
	if len(p.Builds) > 1 {
		for _, k := range slices.Sorted(maps.Keys(p.Builds)) {
			fmt.Fprintf(&b, "| runs of build `%s` | %d: %s |\n", k, len(p.Builds[k]), listRuns(p.Builds[k]))
		}
	}
	return b.String()
}

// countsText renders counts by key, in key order: "`[0]`: 80, `[1]`: 80".
func countsText(m map[string]int) string {
	var out []string
	for k, n := range m {
		out = append(out, fmt.Sprintf("`%s`: %d", k, n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
