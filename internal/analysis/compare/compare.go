package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/imslab/quasipool/internal/analysis/provenance"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// Exit codes of imslab compare and imslab sweep.
const (
	ExitOK    = 0 // every run was carried out and the comparison written (expectations that fail are reported, not fatal)
	ExitRuns  = 1 // with --keep-going: at least one run could not be carried out; the comparison has the others
	ExitError = 2 // bad arguments or scenario, a run could not be carried out (without --keep-going), interrupted
)

// RunFunc runs one scenario into runDir with the given seed and returns its outcome and its report's summary.
// The error is non-nil when the run could not be carried out.
type RunFunc func(ctx context.Context, sc *scenario.Scenario, runDir string, seed int64) (*scenario.Outcome, *report.Summary, error)

// LabRunner runs scenarios for real: scenario.Run with the report built by report.Build. base supplies the lab
// settings (RepoDir, BinDir, timeouts, KeepGoing, Progress); its Scenario, RunDir and Seed are replaced per run.
// After the first run that built the node binaries, the later runs reuse them (the tree does not change during
// a comparison).
func LabRunner(base scenario.RunConfig, opts ...scenario.RunOption) RunFunc {
	binDir := base.BinDir
	return func(ctx context.Context, sc *scenario.Scenario, runDir string, seed int64) (*scenario.Outcome, *report.Summary, error) {
		cfg := base
		cfg.Scenario, cfg.RunDir, cfg.Seed, cfg.BinDir = sc, runDir, seed, binDir
		var sum *report.Summary
		build := func(dir string, eval scenario.Evaluator) (scenario.Metrics, error) {
			s, err := report.Build(dir, scenario.ReportChecks(eval))
			if err != nil {
				return nil, err
			}
			sum = s
			return s, nil
		}
		o, err := scenario.Run(ctx, cfg, append(append([]scenario.RunOption(nil), opts...),
			scenario.WithReportBuilder(build))...)
		if binDir == "" && err == nil {
			// The next runs use the binaries this one built (lab's build cache, named in binaries.json).
			if b, berr := lab.ReadBinaries(runDir); berr == nil && b.Dir != "" && slices.ContainsFunc(b.Binaries,
				func(x provenance.Binary) bool { return x.Name == "pcscf" }) {
				binDir = b.Dir
			}
		}
		return o, sum, err
	}
}

// Config configures a comparison.
type Config struct {
	Scenario     *scenario.Scenario
	ScenarioFile string
	Variants     []Variant
	// OutDir receives <variant>/ run directories and the comparison files.
	OutDir string
	// Seed of the phones' traffic, the same for every variant (0: the scenario's, else a new one).
	Seed int64
	// KeepGoing: a run that cannot be carried out is recorded in its row and the next variant runs.
	KeepGoing bool
	// Repeat runs every variant this many times (default 1) with the seeds Seed, Seed+1, …, interleaved (the
	// first repetition of every variant, then the second, …) into <out>/<variant>/rep<k>/, and writes
	// <out>/<variant>/repeat.json and repeat.md; the rows' single-run columns are those of the first repetition.
	Repeat int
	// Run runs one scenario (LabRunner for real runs).
	Run RunFunc
	// Out receives one line per run (default io.Discard).
	Out io.Writer
	// PoolSize, when > 0, replaces the scenario's pool sizes: the active members of both pools (e.g. 4, so that
	// mutual can pair them).
	PoolSize int
	// Provenance is recorded in compare.json and compare.md (optional).
	Provenance *provenance.Info
}

// Result is a finished comparison: compare.json.
type Result struct {
	Scenario     string `json:"scenario"`
	Description  string `json:"description,omitempty"`
	ScenarioFile string `json:"scenario_file,omitempty"`
	Seed         int64  `json:"seed"`
	// Repeat is the number of runs per variant (seeds Seed, Seed+1, …); above 1 every row has its Repeat.
	Repeat  int       `json:"repeat"`
	Started time.Time `json:"started"`
	Setup   Setup     `json:"setup"`
	Rows    []Row     `json:"rows"`
	Files   []string  `json:"files"`
	// Provenance: the code, toolchain, machine and command of the comparison.
	Provenance *provenance.Info `json:"provenance,omitempty"`
	// summaries of the runs (by variant), for the plots; not in compare.json (each run has its summary.json).
	summaries map[string]*report.Summary
}

// Setup describes what ran, for the report's setup section.
type Setup struct {
	DurationS      float64 `json:"duration_s"`
	Phones         int     `json:"phones"`
	CallRate       float64 `json:"call_rate"`
	ProbeIntervalS float64 `json:"probe_interval_s"`
	HoldS          float64 `json:"hold_s"`
	ExpiresS       float64 `json:"registration_expires_s"`
	ProbingS       float64 `json:"probing_interval_s"`
	FailuresToDown int     `json:"failures_to_down"`
	// ProvisionalTimeoutS is fast failure detection's timer (topology failover.provisional_timeout); 0: off.
	ProvisionalTimeoutS float64  `json:"provisional_timeout_s,omitempty"`
	ActivePCSCF         int      `json:"active_pcscf"`
	ActiveSCSCF         int      `json:"active_scscf"`
	Faults              []string `json:"faults"`
	Variants            []string `json:"variants"`
}

func setupOf(sc *scenario.Scenario, vs []Variant) Setup {
	s := Setup{DurationS: sc.Duration.Seconds(), Phones: sc.Traffic.Phones, CallRate: sc.Traffic.CallRate,
		ProbeIntervalS: sc.Traffic.ProbeInterval.Seconds(), HoldS: sc.Traffic.Hold.Seconds(),
		ExpiresS: sc.Topology.Registration.Expires.Seconds(), ProbingS: sc.Topology.Probing.Interval.Seconds(),
		FailuresToDown:      sc.Topology.Probing.FailuresToDown,
		ProvisionalTimeoutS: sc.Topology.Failover.ProvisionalTimeout.Seconds(), ActivePCSCF: sc.Topology.Pools.PCSCF.Size,
		ActiveSCSCF: sc.Topology.Pools.SCSCF.Size, Faults: []string{}}
	for _, f := range sc.Faults {
		s.Faults = append(s.Faults, f.String())
	}
	for _, v := range vs {
		s.Variants = append(s.Variants, v.Name)
	}
	return s
}

// Seed returns the seed every run of a comparison uses: the given one, else the scenario's, else a new one.
func Seed(given int64, sc *scenario.Scenario) int64 {
	switch {
	case given != 0:
		return given
	case sc.Seed != 0:
		return sc.Seed
	}
	for {
		if s := rand.Int64(); s != 0 {
			return s
		}
	}
}

// ErrRunsFailed is returned (wrapped) by Run when, with KeepGoing, some runs could not be carried out.
var ErrRunsFailed = errors.New("some runs could not be carried out")

// Run runs the scenario once per variant (same traffic, same seed, the scenario's pool sizes as the active
// members) in <out>/<variant>/ and writes the comparison (Write). The scenario's expectations are evaluated per
// run and reported; they do not make the comparison fail.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Scenario == nil || cfg.Run == nil || cfg.OutDir == "" || len(cfg.Variants) == 0 {
		return nil, errors.New("compare: scenario, variants, out dir and runner are required")
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	sc := cfg.Scenario
	if cfg.PoolSize > 0 {
		sc = Clone(sc)
		sc.Topology.Pools.PCSCF.Size, sc.Topology.Pools.SCSCF.Size = cfg.PoolSize, cfg.PoolSize
	}
	res := &Result{Scenario: sc.Name, Description: sc.Description, ScenarioFile: cfg.ScenarioFile, Provenance: cfg.Provenance,
		Seed: Seed(cfg.Seed, sc), Started: time.Now().UTC(), Setup: setupOf(sc, cfg.Variants),
		summaries: map[string]*report.Summary{}}
	active := [2]int{sc.Topology.Pools.PCSCF.Size, sc.Topology.Pools.SCSCF.Size}
	// Validate every variant before running any.
	scs := make([]*scenario.Scenario, len(cfg.Variants))
	for i, v := range cfg.Variants {
		c, err := v.Apply(sc, 0)
		if err != nil {
			return nil, err
		}
		scs[i] = c
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	failed := 0
	repeat := max(cfg.Repeat, 1)
	reps := make([][]RepeatRun, len(cfg.Variants))
	rows := make([]Row, len(cfg.Variants))
	for k := 1; k <= repeat; k++ {
		for i, v := range cfg.Variants {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("compare: %w", err)
			}
			seed := RepSeed(res.Seed, k)
			rel := RepDir(v.Name, k, repeat)
			dir := filepath.Join(cfg.OutDir, rel)
			label := v.Name
			if repeat > 1 {
				label = fmt.Sprintf("%s rep %d/%d", v.Name, k, repeat)
			}
			fmt.Fprintf(out, "== %s (%d/%d): pools %d+%d members, seed %d, run dir %s\n", label, i+1,
				len(cfg.Variants), scs[i].Topology.Pools.PCSCF.Size, scs[i].Topology.Pools.SCSCF.Size, seed, dir)
			began := time.Now()
			o, s, err := cfg.Run(ctx, scs[i], dir, seed)
			if err != nil {
				if !cfg.KeepGoing || ctx.Err() != nil || errors.Is(err, lab.ErrPortInUse) { // another lab: every later run would fail too
					return nil, fmt.Errorf("compare: %s: %w", label, err)
				}
				failed++
				fmt.Fprintf(out, "== %s: the run could not be carried out: %v\n", label, err)
			}
			row := RowOf(v, active, rel, s, o, err)
			if k == 1 {
				rows[i] = row
				if s != nil {
					res.summaries[v.Name] = s
				}
			}
			reps[i] = append(reps[i], RepeatRun{Seed: seed, RunDir: filepath.Base(rel), Summary: s})
			fmt.Fprintf(out, "== %s done in %s: %s\n", label, time.Since(began).Round(time.Second), row.Line())
			for _, w := range row.Warnings {
				fmt.Fprintf(out, "== %s: warning: %s\n", label, w)
			}
		}
	}
	res.Repeat = repeat
	for i, v := range cfg.Variants {
		if repeat > 1 {
			agg, err := Aggregate(sc.Name, v.Name, reps[i])
			if err == nil {
				err = WriteRepeat(filepath.Join(cfg.OutDir, v.Name), agg)
			}
			if err != nil {
				fmt.Fprintf(out, "== %s: %v\n", v.Name, err)
			} else {
				rows[i].Repeat = agg
			}
		}
		res.Rows = append(res.Rows, rows[i])
	}
	if err := Write(cfg.OutDir, res); err != nil {
		return res, err
	}
	if failed > 0 {
		return res, fmt.Errorf("compare: %d of %d: %w", failed, len(cfg.Variants)*repeat, ErrRunsFailed)
	}
	return res, nil
}

// Line summarises a row in one line for the terminal.
func (r Row) Line() string {
	if r.Error != "" && r.AffectedUsers == 0 {
		return "error: " + r.Error
	}
	return fmt.Sprintf("affected %d · taken over MO %s MT %s · interruption p95 MO %s MT %s · expectations %d/%d",
		r.AffectedUsers, pct(r.MO.TakenOver), pct(r.MT.TakenOver), secs(p95(r.MO.InterruptionS)),
		secs(p95(r.MT.InterruptionS)), r.ExpectationsOK, r.ExpectationsAll)
}

// ExitCode maps the result of Run (or Sweep) to the exit status.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrRunsFailed):
		return ExitRuns
	}
	return ExitError
}
