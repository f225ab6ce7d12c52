// Package study runs a study file: a list of experiments (a scenario, the schemes to run it under, parameter
// overrides, a number of repetitions and a base seed), every run of every experiment interleaved and resumable,
// and writes study.json and study.md with the KPIs aggregated per experiment and scheme (n, mean, median, 95 %
// bootstrap CI over runs, min/max, p95 from 20 values) and the provenance of the results (docs/study.md).
package study

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// File is a parsed study file (docs/study.md).
type File struct {
	// Name names the study (study.json, the title of study.md).
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Out is the output directory, relative to the working directory (imslab study --out replaces it; with
	// --quick the default is Out + "-quick", so a quick study never mixes with the full one).
	Out         string       `yaml:"out"`
	Experiments []Experiment `yaml:"experiments"`
	// Quick is what --quick changes: its overrides apply to every experiment (an experiment's own quick block
	// wins), and Experiments, when given, limits the quick study to those experiments.
	Quick *Quick `yaml:"quick"`
	// Claims are the paper's claims the study tests, with the KPI bounds each stands by (claims.go).
	Claims []Claim `yaml:"claims"`
	// NRaised records every raise of an experiment's repeat after runs were made (docs/study.md, "Declared n"):
	// a study whose repeat rose without it refuses to run, and the claims show it with their verdicts.
	NRaised []NRaise `yaml:"n_raised"`
	// MaxReruns is how many times the runner runs a seed again whose run its health record declares invalid
	// (default DefaultMaxReruns; -1: never).
	MaxReruns *int `yaml:"max_reruns"`
	// Builds are the builds of the binaries (binaries.json) the study may aggregate: none (one build), "any", or
	// a list of revisions ("<12 hex>" or "<12 hex>+dirty").
	Builds Builds `yaml:"builds"`

	// dir is the directory of the study file: scenario paths are relative to it.
	dir string
}

// Overrides change an experiment's scenario (zero values keep the scenario's).
type Overrides struct {
	// Repeat is the number of runs per scheme (seeds seed, seed+1, …).
	Repeat int `yaml:"repeat"`
	// Duration replaces the scenario's duration (the faults must still fall inside it).
	Duration time.Duration `yaml:"duration"`
	// PoolSize is the number of active members of both pools (as imslab compare --pool-size).
	PoolSize int `yaml:"pool_size"`
	// Traffic holds fields of the scenario's traffic block (docs/scenarios.md) that replace the scenario's.
	Traffic yaml.Node `yaml:"traffic"`
	// Faults, when given, replace the scenario's faults (the scenario format's fault list, docs/scenarios.md):
	// e.g. the realistic P-CSCF kill scenario with an S-CSCF as the victim.
	Faults []scenario.Fault `yaml:"faults"`
}

// Experiment is one scenario run under one or more schemes, Repeat times each.
type Experiment struct {
	// Name names the experiment's directory and its section of the outputs.
	Name string `yaml:"name"`
	// Scenario is the scenario file, relative to the study file.
	Scenario string `yaml:"scenario"`
	// Schemes are variants as imslab compare takes them (quasi-pool, load-sharing+ignore-504, …); none = the
	// scenario as it is.
	Schemes []string `yaml:"schemes"`
	// Seed is the seed of the first repetition (required, not 0: a study must be reproducible); repetition k
	// runs with seed+k-1, the same for every scheme.
	Seed      int64 `yaml:"seed"`
	Overrides `yaml:",inline"`
	// Quick overrides this experiment's settings under --quick.
	Quick *Overrides `yaml:"quick"`
	// Sweep, when given, runs the experiment once per value of one parameter, each value its own experiment
	// <name>@<param>=<value> with the same seeds (docs/study.md, "Sweeps").
	Sweep *Sweep `yaml:"sweep"`
}

// Quick is the file's quick block.
type Quick struct {
	Overrides   `yaml:",inline"`
	Experiments []string `yaml:"experiments"`
}

// AsIs is the variant name of an experiment without schemes: the scenario as it is.
const AsIs = "as-is"

// FieldError is a problem with one field of a study file; Field is its path (experiments[1].schemes[0]).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("study: %s: %s", e.Field, e.Msg) }

// Load reads and checks a study file (it does not load the scenarios: Plan does).
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("study: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.dir = filepath.Dir(path)
	return f, nil
}

// Parse decodes a study file strictly (an unknown field is an error naming it) and validates it. Scenario paths
// are then relative to the working directory (Load makes them relative to the file).
func Parse(b []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("study: empty file")
		}
		return nil, fmt.Errorf("study: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// Validate checks the file and names every bad field (the errors are *FieldError, joined).
func (f *File) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if f.Name == "" {
		add("name", "missing")
	} else if strings.ContainsAny(f.Name, `/\ `) {
		add("name", "%q: must not contain '/', '\\' or spaces", f.Name)
	}
	if f.Out == "" {
		add("out", "missing (the output directory, e.g. runs/study-%s)", f.Name)
	}
	if len(f.Experiments) == 0 {
		add("experiments", "missing: give at least one experiment")
	}
	names := map[string]bool{}
	for i, e := range f.Experiments {
		p := fmt.Sprintf("experiments[%d]", i)
		switch {
		case e.Name == "":
			add(p+".name", "missing")
		case strings.ContainsAny(e.Name, `/\ @`) || e.Name == "." || e.Name == "..":
			add(p+".name", "%q: must not contain '/', '\\', '@' or spaces (it names a directory)", e.Name)
		case names[e.Name]:
			add(p+".name", "%q given twice", e.Name)
		}
		names[e.Name] = true
		if e.Scenario == "" {
			add(p+".scenario", "missing (a scenario file, relative to the study file)")
		}
		if e.Seed == 0 {
			add(p+".seed", "missing or 0: give the first repetition's seed (a study must be reproducible)")
		}
		if e.Repeat < 1 {
			add(p+".repeat", "must be at least 1, is %d", e.Repeat)
		}
		seen := map[string]bool{}
		for j, s := range e.Schemes {
			if _, err := compare.ParseVariant(s); err != nil {
				add(fmt.Sprintf("%s.schemes[%d]", p, j), "%v", strings.TrimPrefix(err.Error(), "compare: "))
			} else if seen[s] {
				add(fmt.Sprintf("%s.schemes[%d]", p, j), "%q given twice", s)
			} else if s == AsIs {
				add(fmt.Sprintf("%s.schemes[%d]", p, j), "%q is reserved", s)
			}
			seen[s] = true
		}
		checkOverrides(add, p, e.Overrides)
		if e.Quick != nil {
			checkOverrides(add, p+".quick", *e.Quick)
		}
		if e.Sweep != nil {
			ovs := []namedOverrides{{p, e.Overrides}}
			if e.Quick != nil {
				ovs = append(ovs, namedOverrides{p + ".quick", *e.Quick})
			}
			if f.Quick != nil && (len(f.Quick.Experiments) == 0 || slices.Contains(f.Quick.Experiments, e.Name)) {
				ovs = append(ovs, namedOverrides{"quick", f.Quick.Overrides})
			}
			checkSweep(add, p+".sweep", e.Sweep, ovs...)
		}
	}
	checkJoins(add, f.Experiments)
	checkClaims(add, f.Claims, f.Experiments)
	checkNRaised(add, f.NRaised, f.Experiments)
	if f.MaxReruns != nil && *f.MaxReruns < -1 {
		add("max_reruns", "must be -1 (never) or more, is %d", *f.MaxReruns)
	}
	if f.Quick != nil {
		checkOverrides(add, "quick", f.Quick.Overrides)
		for i, n := range f.Quick.Experiments {
			if !names[n] {
				add(fmt.Sprintf("quick.experiments[%d]", i), "%q is not an experiment of the study", n)
			}
		}
	}
	return errors.Join(errs...)
}

func checkOverrides(add func(string, string, ...any), p string, o Overrides) {
	if o.Repeat < 0 {
		add(p+".repeat", "must be at least 1, is %d", o.Repeat)
	}
	if o.Duration < 0 || (o.Duration > 0 && o.Duration < time.Second) {
		add(p+".duration", "must be at least 1s, is %s", o.Duration)
	}
	if o.PoolSize < 0 || o.PoolSize == 1 || o.PoolSize > 8 {
		add(p+".pool_size", "must be from 2 to 8 (active members of both pools), is %d", o.PoolSize)
	}
	if o.Traffic.Kind != 0 {
		if _, err := applyTraffic(&o.Traffic, scenario.Traffic{}); err != nil {
			add(p+".traffic", "%v", err)
		}
	}
}

// applyTraffic decodes the override's fields over a copy of tr, strictly: an unknown field is an error.
func applyTraffic(n *yaml.Node, tr scenario.Traffic) (scenario.Traffic, error) {
	if n.Kind != yaml.MappingNode {
		return tr, errors.New("want a mapping of traffic fields (docs/scenarios.md)")
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		return tr, err
	}
	// Fresh copies of the pointer fields, so that decoding into them leaves the scenario's alone.
	if tr.Mix != nil {
		m := *tr.Mix
		tr.Mix = &m
	}
	if tr.Holding != nil {
		h := *tr.Holding
		tr.Holding = &h
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&tr); err != nil {
		// The decoder's lines are those of the re-encoded block: name the field and its line in the study file.
		if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Value == m[1] {
					return tr, fmt.Errorf("line %d: unknown traffic field %q (docs/scenarios.md lists them)", k.Line, k.Value)
				}
			}
			return tr, fmt.Errorf("unknown traffic field %q (docs/scenarios.md lists them)", m[1])
		}
		return tr, errors.New(lineRef.ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: "), ""))
	}
	return tr, nil
}

var (
	unknownField = regexp.MustCompile(`field (\S+) not found in type`)
	lineRef      = regexp.MustCompile(`line \d+: `)
)

// Run is one run of a study: an experiment under one variant, one repetition.
type Run struct {
	Experiment string
	Variant    string
	Rep        int
	Seed       int64
	// Dir is the run directory relative to the study's output directory: <experiment>/<variant>/rep<k>.
	Dir      string
	Scenario *scenario.Scenario
}

// PlannedExperiment is an experiment with its overrides applied.
type PlannedExperiment struct {
	Name         string
	ScenarioFile string
	Scenario     string // the scenario's name
	Variants     []string
	Repeat       int
	Seed         int64
	// Base is the scenario with the study's overrides, before a scheme is applied (pool sizes: active members).
	Base *scenario.Scenario
	// Scenarios are the scenario copies each variant runs, by variant.
	Scenarios map[string]*scenario.Scenario
	// Sweep is the value of the experiment's sweep this is (nil for an experiment without a sweep).
	Sweep *SweepPoint
}

// Plan is what a study runs: its experiments and the runs in the order they run.
type Plan struct {
	Name        string
	Description string
	Quick       bool
	Experiments []PlannedExperiment
	// Claims are the study file's claims.
	Claims []Claim
	// NRaised, MaxReruns and Builds are the study file's (MaxReruns with its default applied).
	NRaised   []NRaise
	MaxReruns int
	Builds    Builds
	// Runs are interleaved: repetition 1 of every experiment and scheme, then repetition 2, …
	Runs []Run
}

// Plan loads the experiments' scenarios, applies the overrides (with quick, the quick blocks too), checks every
// resulting scenario and orders the runs. Errors name the study field.
func (f *File) Plan(quick bool) (*Plan, error) {
	p := &Plan{Name: f.Name, Description: f.Description, Quick: quick, Claims: f.Claims, NRaised: f.NRaised,
		MaxReruns: DefaultMaxReruns, Builds: f.Builds}
	if f.MaxReruns != nil {
		p.MaxReruns = max(*f.MaxReruns, 0)
	}
	var errs []error
	for i, e := range f.Experiments {
		if quick && f.Quick != nil && len(f.Quick.Experiments) > 0 && !slices.Contains(f.Quick.Experiments, e.Name) {
			continue
		}
		for _, pt := range expandSweep(e) {
			pe, err := f.planExperiment(i, e, quick, pt)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.Experiments = append(p.Experiments, *pe)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p.Runs = Interleave(p.Experiments)
	return p, nil
}

// Interleave orders the runs: for k = 1, 2, …: every experiment (in file order) with Repeat ≥ k, every variant of
// it (in file order), repetition k. A slow drift of the machine then does not favour what ran first.
func Interleave(exps []PlannedExperiment) []Run {
	maxRep := 0
	for _, e := range exps {
		maxRep = max(maxRep, e.Repeat)
	}
	var runs []Run
	for k := 1; k <= maxRep; k++ {
		for _, e := range exps {
			if k > e.Repeat {
				continue
			}
			for _, v := range e.Variants {
				runs = append(runs, Run{Experiment: e.Name, Variant: v, Rep: k, Seed: compare.RepSeed(e.Seed, k),
					Dir: filepath.Join(e.Name, v, fmt.Sprintf("rep%d", k)), Scenario: e.Scenarios[v]})
			}
		}
	}
	return runs
}

func (f *File) planExperiment(i int, e Experiment, quick bool, pt *SweepPoint) (*PlannedExperiment, error) {
	field := fmt.Sprintf("experiments[%d] (%s)", i, e.Name)
	name := e.Name
	if pt != nil {
		name = pt.Name()
		field = fmt.Sprintf("experiments[%d] (%s)", i, name)
	}
	o := e.Overrides
	if quick {
		if f.Quick != nil {
			o = merge(o, f.Quick.Overrides)
		}
		if e.Quick != nil {
			o = merge(o, *e.Quick)
		}
	}
	path := e.Scenario
	if !filepath.IsAbs(path) && f.dir != "" {
		path = filepath.Join(f.dir, path)
	}
	sc, err := scenario.Load(path)
	if err != nil {
		return nil, &FieldError{Field: field + ".scenario", Msg: err.Error()}
	}
	base := compare.Clone(sc)
	if o.Duration > 0 {
		base.Duration = o.Duration
	}
	if o.Traffic.Kind != 0 {
		if base.Traffic, err = applyTraffic(&o.Traffic, base.Traffic); err != nil {
			return nil, &FieldError{Field: field + ".traffic", Msg: err.Error()}
		}
	}
	if o.Faults != nil {
		base.Faults = slices.Clone(o.Faults)
	}
	if pt != nil {
		def := sweepParams[pt.Param]
		if def.poolSize {
			o.PoolSize = int(pt.X)
		}
		def.apply(base, pt.X)
	}
	if o.PoolSize > 0 {
		base.Topology.Pools.PCSCF.Size, base.Topology.Pools.SCSCF.Size = o.PoolSize, o.PoolSize
	}
	pe := &PlannedExperiment{Name: name, ScenarioFile: path, Scenario: sc.Name, Repeat: o.Repeat, Seed: e.Seed,
		Base: base, Scenarios: map[string]*scenario.Scenario{}, Sweep: pt}
	if len(e.Schemes) == 0 {
		if err := base.Validate(); err != nil {
			return nil, &FieldError{Field: field, Msg: "the scenario with the study's overrides: " + err.Error()}
		}
		pe.Variants = []string{AsIs}
		pe.Scenarios[AsIs] = base
		return pe, nil
	}
	for j, s := range e.Schemes {
		v, err := compare.ParseVariant(s)
		if err != nil {
			return nil, &FieldError{Field: fmt.Sprintf("%s.schemes[%d]", field, j), Msg: err.Error()}
		}
		c, err := v.Apply(base, o.PoolSize)
		if err != nil {
			return nil, &FieldError{Field: fmt.Sprintf("%s.schemes[%d]", field, j),
				Msg: "the scenario with the study's overrides: " + err.Error()}
		}
		pe.Variants = append(pe.Variants, v.Name)
		pe.Scenarios[v.Name] = c
	}
	return pe, nil
}

// merge returns o with the non-zero fields of q.
func merge(o, q Overrides) Overrides {
	if q.Repeat > 0 {
		o.Repeat = q.Repeat
	}
	if q.Duration > 0 {
		o.Duration = q.Duration
	}
	if q.PoolSize > 0 {
		o.PoolSize = q.PoolSize
	}
	if q.Faults != nil {
		o.Faults = q.Faults
	}
	if q.Traffic.Kind != 0 {
		if o.Traffic.Kind != yaml.MappingNode || q.Traffic.Kind != yaml.MappingNode {
			o.Traffic = q.Traffic
		} else {
			// Both: the quick fields over the experiment's.
			m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			m.Content = append(append(m.Content, o.Traffic.Content...), q.Traffic.Content...)
			o.Traffic = *dedupe(m)
		}
	}
	return o
}

// dedupe keeps the last value of each key of a mapping node.
func dedupe(m *yaml.Node) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	idx := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i].Value
		if j, ok := idx[k]; ok {
			out.Content[j+1] = m.Content[i+1]
			continue
		}
		idx[k] = len(out.Content)
		out.Content = append(out.Content, m.Content[i], m.Content[i+1])
	}
	return out
}

// Only keeps the named experiments of the plan (a sweep's name keeps all its points; a point's full name,
// exp@param=value, keeps that one) and orders their runs again. It drops the claims, which read experiments
// across the study: a part of a study is run with Only, and the whole is aggregated, claims included, by a
// results-only pass without it. An unknown name is an error that lists the experiments.
func (p *Plan) Only(names []string) error {
	if len(names) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	found := map[string]bool{}
	var keep []PlannedExperiment
	var all []string
	for _, e := range p.Experiments {
		base, _, _ := strings.Cut(e.Name, "@")
		if !slices.Contains(all, base) {
			all = append(all, base)
		}
		switch {
		case want[e.Name]:
			found[e.Name] = true
		case want[base]:
			found[base] = true
		default:
			continue
		}
		keep = append(keep, e)
	}
	var missing []string
	for _, n := range names {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("study %s: no experiment %s (the study has %s)", p.Name, strings.Join(missing, ", "),
			strings.Join(all, ", "))
	}
	p.Experiments, p.Claims = keep, nil
	p.Runs = Interleave(keep)
	return nil
}
