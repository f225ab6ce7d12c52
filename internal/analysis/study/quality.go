package study

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/harness/lab"
)

// DefaultMaxReruns is how many times a seed whose run is invalid by its health record is run again when the
// study file does not say (max_reruns).
const DefaultMaxReruns = 2

// invalidSuffix names a run directory the runner set aside because its health record declares it invalid:
// <dir>.invalid-<k>.
const invalidSuffix = ".invalid-"

// BuildCheckSkipped is the build check's note for runs without binaries.json (runs made before it existed).
const BuildCheckSkipped = "build check skipped"

// Builds is a study file's builds: empty (the runs must be of one build), "any", or a list of the builds allowed.
type Builds struct {
	Any  bool
	List []string
}

// UnmarshalYAML takes "any" or a list of revisions.
func (b *Builds) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value != "any" {
			return fmt.Errorf("line %d: builds: %q: want \"any\" or a list of revisions", n.Line, n.Value)
		}
		b.Any = true
		return nil
	case yaml.SequenceNode:
		if err := n.Decode(&b.List); err != nil {
			return fmt.Errorf("line %d: builds: %w", n.Line, err)
		}
		for _, r := range b.List {
			if strings.TrimSuffix(r, "+dirty") == "" {
				return fmt.Errorf("line %d: builds: an empty revision", n.Line)
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: builds: want \"any\" or a list of revisions", n.Line)
}

// allows tells whether a run's build (its binaries' revisions, comma-separated) is one the file lists: each
// revision must start with a listed one, dirty as listed.
func (b Builds) allows(build string) bool {
	for _, r := range strings.Split(build, ",") {
		ok := slices.ContainsFunc(b.List, func(l string) bool {
			return strings.HasSuffix(l, "+dirty") == strings.HasSuffix(r, "+dirty") &&
				strings.HasPrefix(strings.TrimSuffix(r, "+dirty"), strings.TrimSuffix(l, "+dirty"))
		})
		if !ok {
			return false
		}
	}
	return true
}

// runBuild is the build of a run's binaries (binaries.json): their distinct revisions, comma-separated; "" when
// the run has no binaries.json.
func runBuild(dir string) (string, error) {
	b, err := lab.ReadBinaries(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.Join(b.Revisions(), ","), nil
}

// checkBuilds fills the provenance's builds from the runs and fails on a mix of builds the file does not allow,
// naming the builds and their runs.
func checkBuilds(p *Plan, prov *Provenance, results []RunResult) error {
	prov.Builds, prov.BuildCheck = map[string][]string{}, ""
	var skipped []string
	for _, r := range results {
		if r.Summary == nil || r.Err != nil {
			continue
		}
		if r.Build == "" {
			skipped = append(skipped, r.Dir)
			continue
		}
		prov.Builds[r.Build] = append(prov.Builds[r.Build], r.Dir)
	}
	builds := slices.Sorted(maps.Keys(prov.Builds))
	switch {
	case len(builds) == 0 && len(skipped) == 0:
		prov.Builds = nil
		return nil
	case len(builds) == 0:
		prov.Builds = nil
		prov.BuildCheck = fmt.Sprintf("%s: no run has %s (runs made before it existed)", BuildCheckSkipped,
			lab.BinariesFile)
		return nil
	case len(skipped) > 0:
		prov.BuildCheck = fmt.Sprintf("%s for %d runs without %s", BuildCheckSkipped, len(skipped), lab.BinariesFile)
	}
	var bad []string
	if !p.Builds.Any {
		for _, b := range builds {
			if len(p.Builds.List) > 0 && !p.Builds.allows(b) || len(p.Builds.List) == 0 && len(builds) > 1 {
				bad = append(bad, b)
			}
		}
	}
	if len(bad) == 0 {
		if prov.BuildCheck == "" {
			prov.BuildCheck = fmt.Sprintf("%d builds", len(builds))
			if len(builds) == 1 {
				prov.BuildCheck = "one build: " + builds[0]
			}
		}
		return nil
	}
	var parts []string
	for _, b := range builds {
		parts = append(parts, fmt.Sprintf("%s (%s)", b, listRuns(prov.Builds[b])))
	}
	why := "a study aggregates runs of one build unless its file allows more (builds: any, or a list of revisions)"
	if len(p.Builds.List) > 0 {
		why = fmt.Sprintf("builds %s are not in the study file's builds (%s)", strings.Join(bad, ", "),
			strings.Join(p.Builds.List, ", "))
	}
	return fmt.Errorf("study %s: runs of %d builds: %s; %s", p.Name, len(builds), strings.Join(parts, "; "), why)
}

// listRuns names at most five runs.
func listRuns(dirs []string) string {
	if len(dirs) <= 5 {
		return strings.Join(dirs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(dirs[:5], ", "), len(dirs)-5)
}

// setAside renames an invalid run's directory to <dir>.invalid-<k> (the first k free) and returns the new path.
func setAside(dir string) (string, error) {
	for k := 1; ; k++ {
		to := fmt.Sprintf("%s%s%d", dir, invalidSuffix, k)
		if _, err := os.Stat(to); errors.Is(err, os.ErrNotExist) {
			if err := os.Rename(dir, to); err != nil {
				return "", fmt.Errorf("study: %w", err)
			}
			return to, nil
		}
	}
}

// setAsideRuns lists the directories set aside for a run (<dir>.invalid-<k>), relative to the study's directory.
func setAsideRuns(outDir, rel string) []string {
	m, _ := filepath.Glob(filepath.Join(outDir, rel) + invalidSuffix + "*")
	var out []string
	for _, x := range m {
		if r, err := filepath.Rel(outDir, x); err == nil {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// checkDeclaredN refuses a study whose experiments' repeat rose after runs were made (the previous study.json in
// dir had runs of it with a smaller repeat) unless the study file records the raise in n_raised.
func checkDeclaredN(p *Plan, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		return nil // no study so far
	}
	var prev Result
	if err := json.Unmarshal(b, &prev); err != nil {
		return nil // not a study.json this imslab can read: nothing to compare with
	}
	was := map[string]int{}
	for _, e := range prev.Experiments {
		ran := slices.ContainsFunc(e.Variants, func(v VariantResult) bool { return v.Runs+v.Failed+v.Invalid > 0 })
		if base, _, _ := strings.Cut(e.Name, "@"); ran {
			was[base] = max(was[base], e.Repeat)
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, e := range p.Experiments {
		base, _, _ := strings.Cut(e.Name, "@")
		if seen[base] || was[base] == 0 || e.Repeat <= was[base] {
			continue
		}
		seen[base] = true
		if !slices.ContainsFunc(p.NRaised, func(n NRaise) bool {
			return n.Experiment == base && n.From <= was[base] && n.To >= e.Repeat
		}) {
			errs = append(errs, fmt.Errorf("study %s: experiment %s: repeat rose from %d to %d after its runs were "+
				"made; record the raise in the study file's n_raised (experiment, from, to, why), which the "+
				"verdicts then show (docs/study.md, \"Declared n\")", p.Name, base, was[base], e.Repeat))
		}
	}
	return errors.Join(errs...)
}
