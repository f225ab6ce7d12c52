package study

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/provenance"
)

// Provenance says what produced a study's results: the code, the toolchain, the machine, the command and seeds.
type Provenance struct {
	// Info: the commit and dirty flag, the toolchains, the CPU, the kernel and the command line
	// (internal/provenance; the same fields at the top level of the JSON).
	provenance.Info
	// Seeds are the seeds of each experiment's repetitions (every scheme of repetition k has the k-th).
	Seeds    map[string][]int64 `json:"seeds"`
	Started  time.Time          `json:"started"`
	Finished time.Time          `json:"finished"`
	// RunCommits counts the runs in the results by the commit that ran them ("<sha>" or "<sha>+dirty", from
	// each run's study-env.json; "unrecorded" for runs without one): a study resumed on other code shows
	// more than one. LoadAvgMax is the highest 1-minute load average seen at the start or end of a run, and
	// CPUsAllowed the CPUs the last run could use (taskset).
	RunCommits  map[string]int `json:"run_commits,omitempty"`
	LoadAvgMax  float64        `json:"loadavg1_max,omitempty"`
	CPUsAllowed []int          `json:"cpus_allowed,omitempty"`
}

// addRuns fills the per-run part of the provenance from the results' run environments.
func (p *Provenance) addRuns(results []RunResult) {
	p.RunCommits, p.LoadAvgMax = map[string]int{}, 0
	for _, r := range results {
		if r.Summary == nil {
			continue
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
		p.CPUsAllowed = r.Env.CPUsAllowed
	}
	if len(p.RunCommits) == 0 {
		p.RunCommits = nil
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
	fmt.Fprintf(&b, " |\n| CPU | %s, %d cores |\n| kernel | %s (%s) |\n| command | `%s` |\n", p.CPUModel, p.CPUs,
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
	if len(p.CPUsAllowed) > 0 {
		fmt.Fprintf(&b, "| CPUs the runs could use | %v |\n", p.CPUsAllowed)
	}
	return b.String()
}
