package study

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// Files of a study.
const (
	FileJSON     = "study.json"
	FileMarkdown = "study.md"
	// FileResults is the fragment of docs/results.md made from study.json alone (Results).
	FileResults = "results.md"
	// FileRun is written into each run directory before the run: what the study asked for (experiment, variant,
	// repetition, seed and a fingerprint of the scenario as run), so a resumed study can tell its own finished
	// runs from a directory that holds something else.
	FileRun = "study-run.json"
)

// Exit codes of imslab study.
const (
	ExitOK    = 0 // every run was carried out (or found done) and the outputs written
	ExitRuns  = 1 // some runs could not be carried out; the outputs have the others, a rerun retries them
	ExitError = 2 // bad study file or arguments, a run directory that belongs to something else, interrupted
)

// ErrRunsFailed is returned (wrapped) by Execute when some runs could not be carried out.
var ErrRunsFailed = errors.New("some runs could not be carried out")

// ErrPending is returned (wrapped) by Execute with ResultsOnly when some runs of the plan are not done.
var ErrPending = errors.New("some runs are not done")

// Config configures Execute.
type Config struct {
	Plan *Plan
	// File is the study file (for the outputs).
	File string
	// OutDir receives <experiment>/<variant>/rep<k>/ and study.json, study.md.
	OutDir string
	// Run runs one scenario (compare.LabRunner for real runs).
	Run compare.RunFunc
	// Out receives a line per run (default io.Discard).
	Out io.Writer
	// Provenance is recorded in the outputs; Execute sets its start and end times and seeds.
	Provenance Provenance
	// ResultsOnly runs nothing: the outputs (study.json, study.md, results.md, figures) are made from the runs
	// found done, the others are reported pending (ErrPending) and their directories left as they are. Run
	// may be nil.
	ResultsOnly bool
	// NoFigures leaves the figures out (callers that need only the tables: the race detector makes drawing slow).
	NoFigures bool
}

// runRecord is study-run.json.
type runRecord struct {
	Study       string `json:"study"`
	Experiment  string `json:"experiment"`
	Variant     string `json:"variant"`
	Rep         int    `json:"rep"`
	Seed        int64  `json:"seed"`
	Fingerprint string `json:"fingerprint"`
}

// Fingerprint identifies the scenario a run runs and its seed: sha256 of the scenario's canonical JSON and the
// seed. Canonical: object keys sorted and every null, false, 0, "" and empty list or object left out, so a field a
// newer imslab adds with a zero default does not change the fingerprint (a study stays resumable across code
// versions), while any value that is set does.
func Fingerprint(sc *scenario.Scenario, seed int64) (string, error) {
	b, err := json.Marshal(sc)
	if err != nil {
		return "", fmt.Errorf("study: fingerprint: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("study: fingerprint: %w", err)
	}
	if b, err = json.Marshal(prune(v)); err != nil { // encoding/json writes map keys sorted
		return "", fmt.Errorf("study: fingerprint: %w", err)
	}
	h := sha256.New()
	h.Write(b)
	fmt.Fprintf(h, "\nseed %d", seed)
	return "v2:" + hex.EncodeToString(h.Sum(nil)), nil
}

// prune removes zero values from decoded JSON (nil when v is itself a zero value).
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if p := prune(e); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = prune(e) // positions matter in a list: a zero element stays, as null
		}
		return out
	case bool:
		if !x {
			return nil
		}
	case float64:
		if x == 0 {
			return nil
		}
	case string:
		if x == "" {
			return nil
		}
	case nil:
		return nil
	}
	return v
}

// state of a run directory.
type state int

const (
	stateNone    state = iota // no directory
	stateDone                 // summary.json and expectations.json, and the study's record matches
	statePartial              // a directory of this run without a complete result (interrupted, failed)
)

// check tells what dir holds; an error when it holds a complete run of something else.
func check(dir string, rec runRecord) (state, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return stateNone, nil
	}
	var got runRecord
	b, err := os.ReadFile(filepath.Join(dir, FileRun))
	if err == nil {
		err = json.Unmarshal(b, &got)
	}
	if err != nil || got != rec {
		if complete(dir) {
			what := "no " + FileRun
			if err == nil {
				what = fmt.Sprintf("%s %s/%s rep %d seed %d, fingerprint %.12s", FileRun, got.Experiment, got.Variant,
					got.Rep, got.Seed, got.Fingerprint)
			}
			return stateNone, fmt.Errorf("study: %s holds a finished run that is not this study's %s/%s rep %d "+
				"(seed %d, fingerprint %.12s; found %s): the study file or the scenario changed since it ran; "+
				"give another --out or remove the directory", dir, rec.Experiment, rec.Variant, rec.Rep, rec.Seed,
				rec.Fingerprint, what)
		}
		return statePartial, nil
	}
	if complete(dir) {
		return stateDone, nil
	}
	return statePartial, nil
}

// complete: the run's report and expectations were written (expectations.json last) and parse, and the run did
// not end in an error after them (phones that did not stop: scenario.Outcome.PhonesNotStopped), which the study
// counted as a failed run and a rerun retries.
func complete(dir string) bool {
	for _, f := range []string{report.FileSummary, "expectations.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !json.Valid(b) {
			return false
		}
		if f == "expectations.json" {
			var o scenario.Outcome
			if json.Unmarshal(b, &o) != nil || o.PhonesNotStopped != "" {
				return false
			}
		}
	}
	return true
}

// States tells for every run of the plan what its directory under dir holds: "done", "done, invalid (…)" (by its
// health record: set aside and run again, or left out when its seed used its reruns), "unfinished" (it would be
// removed and run again) or "to run"; an error when one holds a finished run of another configuration.
func States(p *Plan, dir string) ([]string, error) {
	out := make([]string, len(p.Runs))
	for i, r := range p.Runs {
		fp, err := Fingerprint(r.Scenario, r.Seed)
		if err != nil {
			return nil, err
		}
		st, err := check(filepath.Join(dir, r.Dir), runRecord{Study: p.Name, Experiment: r.Experiment,
			Variant: r.Variant, Rep: r.Rep, Seed: r.Seed, Fingerprint: fp})
		if err != nil {
			return nil, err
		}
		out[i] = [...]string{"to run", "done", "unfinished"}[st]
		if st == stateDone {
			if sum, err := loadDone(filepath.Join(dir, r.Dir)); err == nil && invalid(sum) {
				out[i] = "done, invalid (left out)"
				if len(setAsideRuns(dir, r.Dir)) < p.MaxReruns {
					out[i] = "done, invalid (set aside and run again)"
				}
			}
		}
	}
	return out, nil
}

// loadDone reads a finished run's summary.
func loadDone(dir string) (*report.Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, report.FileSummary))
	if err != nil {
		return nil, err
	}
	var s report.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", report.FileSummary, err)
	}
	return &s, nil
}

// RunResult is what became of one run of the plan.
type RunResult struct {
	Run
	// Skipped: the run was found done in its directory and not run again.
	Skipped bool
	Summary *report.Summary
	Err     error
	Elapsed time.Duration
	// Env is the run's study-env.json (nil for a run of an older imslab).
	Env *RunEnv
	// Build is the build of the run's binaries (binaries.json; "" without one); SetAside the directories of
	// earlier runs of this seed set aside as invalid by their health record.
	Build    string
	SetAside []string
}

// Execute runs the plan's runs in order, skipping those whose directory already holds their finished run, and
// writes study.json and study.md after every run (so an interrupted study leaves its outputs so far). Before
// running anything it checks every run directory: one holding a finished run of another configuration stops the
// study. A run that fails is recorded and the next one runs (ErrRunsFailed at the end); a rerun of the study
// retries it.
func Execute(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Plan == nil || cfg.Run == nil && !cfg.ResultsOnly || cfg.OutDir == "" {
		return nil, errors.New("study: plan, runner and out dir are required")
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	prov := cfg.Provenance
	prov.Started = time.Now().UTC()
	prov.Seeds = map[string][]int64{}
	recs := make([]runRecord, len(cfg.Plan.Runs))
	states := make([]state, len(cfg.Plan.Runs))
	for i, r := range cfg.Plan.Runs {
		fp, err := Fingerprint(r.Scenario, r.Seed)
		if err != nil {
			return nil, err
		}
		recs[i] = runRecord{Study: cfg.Plan.Name, Experiment: r.Experiment, Variant: r.Variant, Rep: r.Rep,
			Seed: r.Seed, Fingerprint: fp}
		if states[i], err = check(filepath.Join(cfg.OutDir, r.Dir), recs[i]); err != nil {
			return nil, err
		}
		key := r.Experiment
		if len(prov.Seeds[key]) < r.Rep {
			prov.Seeds[key] = append(prov.Seeds[key], r.Seed)
		}
	}
	if err := checkDeclaredN(cfg.Plan, cfg.OutDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("study: %w", err)
	}
	results := make([]RunResult, 0, len(cfg.Plan.Runs))
	failed, pending := 0, 0
	for i, r := range cfg.Plan.Runs {
		if err := ctx.Err(); err != nil {
			return write(cfg, prov, results, fmt.Errorf("study: %w", err))
		}
		dir := filepath.Join(cfg.OutDir, r.Dir)
		label := fmt.Sprintf("%s/%s rep %d (seed %d)", r.Experiment, r.Variant, r.Rep, r.Seed)
		rr := RunResult{Run: r, SetAside: setAsideRuns(cfg.OutDir, r.Dir)}
		if states[i] == stateDone {
			s, err := loadDone(dir)
			if err == nil && invalid(s) && !cfg.ResultsOnly && len(rr.SetAside) < cfg.Plan.MaxReruns {
				to, err := setAside(dir)
				if err != nil {
					return write(cfg, prov, results, err)
				}
				fmt.Fprintf(out, "== [%d/%d] %s: done but INVALID (%s): set aside as %s, running the seed again\n",
					i+1, len(cfg.Plan.Runs), label, strings.Join(s.Health.Reasons, "; "), to)
				rr.SetAside = setAsideRuns(cfg.OutDir, r.Dir)
				states[i] = stateNone
			} else if err == nil {
				rr.Skipped, rr.Summary = true, s
				if rr.Env, err = readEnv(dir); err != nil {
					fmt.Fprintf(out, "== [%d/%d] %s: %v (its commit is not recorded)\n", i+1, len(cfg.Plan.Runs), label, err)
				}
				if rr.Build, err = runBuild(dir); err != nil {
					return write(cfg, prov, results, fmt.Errorf("study: %s: %w", label, err))
				}
				results = append(results, rr)
				fmt.Fprintf(out, "== [%d/%d] %s: skipped, done (%s)\n", i+1, len(cfg.Plan.Runs), label, dir)
				continue
			} else {
				if cfg.ResultsOnly {
					fmt.Fprintf(out, "== [%d/%d] %s: %v; pending\n", i+1, len(cfg.Plan.Runs), label, err)
					pending++
					continue
				}
				fmt.Fprintf(out, "== [%d/%d] %s: %v; running it again\n", i+1, len(cfg.Plan.Runs), label, err)
				states[i] = statePartial
			}
		}
		if cfg.ResultsOnly {
			what := "not run yet"
			if states[i] == statePartial {
				what = "unfinished"
			}
			fmt.Fprintf(out, "== [%d/%d] %s: %s, pending (results only: nothing is run)\n", i+1, len(cfg.Plan.Runs),
				label, what)
			pending++
			continue
		}
		if states[i] == statePartial {
			fmt.Fprintf(out, "== [%d/%d] %s: %s holds an unfinished run of it: removed, running it again\n",
				i+1, len(cfg.Plan.Runs), label, dir)
			if err := os.RemoveAll(dir); err != nil {
				return write(cfg, prov, results, fmt.Errorf("study: %w", err))
			}
		}
		for {
			if err := writeRecord(dir, recs[i]); err != nil {
				return write(cfg, prov, results, err)
			}
			fmt.Fprintf(out, "== [%d/%d] %s: run dir %s\n", i+1, len(cfg.Plan.Runs), label, dir)
			env := newRunEnv(prov)
			if err := writeEnv(dir, env); err != nil {
				return write(cfg, prov, results, err)
			}
			began := time.Now()
			_, s, err := cfg.Run(ctx, r.Scenario, dir, r.Seed)
			rr.Elapsed = time.Since(began)
			env.finish()
			rr.Env = &env
			if werr := writeEnv(dir, env); werr != nil && err == nil {
				err = werr
			}
			rr.Summary, rr.Err = s, err
			if err == nil && s == nil {
				rr.Err = errors.New("the run produced no report")
			}
			if rr.Err == nil {
				if rr.Build, err = runBuild(dir); err != nil {
					rr.Err = err
				}
			}
			if rr.Err != nil || !invalid(s) || len(rr.SetAside) >= cfg.Plan.MaxReruns || ctx.Err() != nil {
				break
			}
			// Invalid by its own health record: its timings measure the machine. Set it aside and run the seed
			// again, up to max_reruns times; the last one stays, and the aggregate leaves it out and counts it.
			to, err := setAside(dir)
			if err != nil {
				return write(cfg, prov, results, err)
			}
			rr.SetAside = setAsideRuns(cfg.OutDir, r.Dir)
			fmt.Fprintf(out, "== %s: INVALID (%s): set aside as %s, running the seed again (%d of at most %d)\n",
				label, strings.Join(s.Health.Reasons, "; "), to, len(rr.SetAside), cfg.Plan.MaxReruns)
		}
		s := rr.Summary
		results = append(results, rr)
		if rr.Err != nil {
			if ctx.Err() != nil {
				return write(cfg, prov, results, fmt.Errorf("study: %s: %w", label, ctx.Err()))
			}
			if errors.Is(rr.Err, lab.ErrPortInUse) {
				// Another lab holds the ports: every run after this one would fail the same way at once and be
				// marked failed; stop instead, and let a rerun resume from this run.
				return write(cfg, prov, results, fmt.Errorf("study: %s: %w; the study stopped here (run it "+
					"again when the other lab is gone: it resumes from this run)", label, rr.Err))
			}
			failed++
			fmt.Fprintf(out, "== %s: the run could not be carried out (a rerun of the study retries it): %v\n", label, rr.Err)
		} else if invalid(s) {
			fmt.Fprintf(out, "== %s done in %s but INVALID (%s) after %d reruns: left out of the aggregate\n", label,
				rr.Elapsed.Round(time.Second), strings.Join(s.Health.Reasons, "; "), len(rr.SetAside))
		} else {
			fmt.Fprintf(out, "== %s done in %s: %d affected users\n", label, rr.Elapsed.Round(time.Second), s.AffectedUsers)
		}
		if _, err := writeProgress(cfg, prov, results); err != nil {
			return nil, err
		}
	}
	var err error
	switch {
	case failed > 0:
		err = fmt.Errorf("study: %d of %d runs: %w", failed, len(cfg.Plan.Runs), ErrRunsFailed)
	case pending > 0:
		err = fmt.Errorf("study: %d of %d runs: %w", pending, len(cfg.Plan.Runs), ErrPending)
	}
	return write(cfg, prov, results, err)
}

func writeRecord(dir string, rec runRecord) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	b, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, FileRun), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	return nil
}

// writeProgress rewrites study.json, study.md and results.md after a run, without the figures: drawing them
// (a bootstrap of every restoration curve, PNG encoding) is left to the end of the invocation (write).
func writeProgress(cfg Config, prov Provenance, results []RunResult) (*Result, error) {
	return writeOutputs(cfg, prov, results, nil, false)
}

// write aggregates the results so far and writes study.json, study.md, results.md and the figures; runErr is
// returned unless writing fails. Execute calls it when it returns (done, failed runs or interrupted).
func write(cfg Config, prov Provenance, results []RunResult, runErr error) (*Result, error) {
	return writeOutputs(cfg, prov, results, runErr, true)
}

// validRuns leaves out the runs the aggregate leaves out as invalid by their health record.
func validRuns(results []RunResult) []RunResult {
	var out []RunResult
	for _, r := range results {
		if !invalid(r.Summary) {
			out = append(out, r)
		}
	}
	return out
}

func writeOutputs(cfg Config, prov Provenance, results []RunResult, runErr error, figures bool) (*Result, error) {
	prov.Finished = time.Now().UTC()
	prov.addRuns(results)
	res, err := Aggregate(cfg.Plan, cfg.File, prov, results)
	if err != nil {
		return nil, errors.Join(runErr, err)
	}
	if !figures {
		// The figures of the last invocation stay listed (they are redrawn when this one ends).
		if prev, err := readFigures(cfg.OutDir); err == nil {
			for i := range res.Experiments {
				pe := prev[res.Experiments[i].Name]
				res.Experiments[i].Figures, res.Experiments[i].FigureNotes = pe.Figures, pe.FigureNotes
			}
		}
		if prev, err := readSweepFigures(cfg.OutDir); err == nil {
			for i := range res.Sweeps {
				res.Sweeps[i].Figures = prev[res.Sweeps[i].Name]
			}
		}
	} else if cfg.NoFigures {
		for i := range res.Experiments {
			res.Experiments[i].Figures, res.Experiments[i].FigureNotes = nil, nil
		}
		for i := range res.Sweeps {
			res.Sweeps[i].Figures = nil
		}
	} else if err := WriteFigures(cfg.OutDir, res, validRuns(results)); err != nil {
		return res, errors.Join(runErr, err)
	}
	if err := WriteOutputs(cfg.OutDir, res); err != nil {
		return res, errors.Join(runErr, err)
	}
	return res, runErr
}

// invalid tells whether a run's own health record declares it invalid (a run without one is not: its health is
// unknown, and the aggregate lists it so).
func invalid(s *report.Summary) bool { return s != nil && s.Health != nil && !s.Health.Valid }

// ExitCode maps Execute's error to the exit status.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrRunsFailed), errors.Is(err, ErrPending):
		return ExitRuns
	}
	return ExitError
}
