package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// Files of a repetition (imslab run/compare/sweep --repeat K), next to its runs.
const (
	FileRepeatJSON = "repeat.json"
	FileRepeatMD   = "repeat.md"
)

// RepSeed is the seed of the k-th repetition (k from 1): seed, seed+1, … (never 0).
func RepSeed(seed int64, k int) int64 {
	s := seed + int64(k-1)
	if s == 0 {
		s = 1
	}
	return s
}

// RepDir is the run directory of the k-th of K repetitions under dir: dir itself when K is 1, else dir/rep<k>.
func RepDir(dir string, k, repeat int) string {
	if repeat <= 1 {
		return dir
	}
	return filepath.Join(dir, fmt.Sprintf("rep%d", k))
}

// Repeat is repeat.json: the KPIs of K runs of one scenario (one variant) summarised over the runs
// (internal/analysis/stats: median, mean, 95 % CIs over runs as docs/compare.md says per KPI, min/max, p95 from
// 20 values).
type Repeat struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant,omitempty"`
	// Runs is the number of runs asked for; Seeds and RunDirs (relative to the repeat's directory) are those of
	// the runs that produced a summary; Failed counts the others.
	Runs    int      `json:"runs"`
	Seeds   []int64  `json:"seeds"`
	RunDirs []string `json:"run_dirs"`
	Failed  int      `json:"failed"`
	// Metrics are the aggregated KPIs, in a fixed order.
	Metrics []RepeatMetric `json:"metrics"`
}

// RepeatMetric is one KPI over the runs.
type RepeatMetric struct {
	Name string `json:"name"`
	// Unit ("s", "users", "share") and Per: "run" (one value per run) or "user" (one per affected user, pooled;
	// the CI still resamples runs).
	Unit string        `json:"unit"`
	Per  string        `json:"per"`
	Doc  string        `json:"doc"`
	Stat stats.Summary `json:"stat"`
}

// Metric returns the named metric (nil when absent: no run had a value).
func (r *Repeat) Metric(name string) *RepeatMetric {
	for i := range r.Metrics {
		if r.Metrics[i].Name == name {
			return &r.Metrics[i]
		}
	}
	return nil
}

type repeatKPI struct {
	name, unit, per, doc string
	run                  func(*report.Summary) *float64 // per run
	user                 func(report.UserKPI) *float64  // per affected user
	// trials (a share of users, per run): the users the run's share was measured on, the trials of its interval
	// over Korn–Graubard's effective n; 0 where unknown (then the runs are the trials).
	trials func(*report.Summary) float64
}

var repeatKPIs = []repeatKPI{
	{name: "affected_users", unit: "users", per: "run", doc: "users registered through the faulted node when the fault began",
		run: func(s *report.Summary) *float64 { return fp(float64(s.AffectedUsers)) }},
	{name: "time_to_detect_s", unit: "s", per: "run", doc: "fault → first node reporting the faulted node down",
		run: func(s *report.Summary) *float64 {
			if len(s.TimeToDetectS) == 0 {
				return nil
			}
			first := math.Inf(1)
			for _, t := range s.TimeToDetectS {
				first = min(first, t)
			}
			return &first
		}},
	{name: "mo_interruption_s", unit: "s", per: "user", doc: "per affected user: fault → first successful outgoing call",
		user: func(u report.UserKPI) *float64 { return u.MOInterruptionS }},
	{name: "mt_interruption_s", unit: "s", per: "user", doc: "per affected user: fault → first successful incoming call",
		user: func(u report.UserKPI) *float64 { return u.MTInterruptionS }},
	{name: "rereg_s", unit: "s", per: "user", doc: "per affected user: fault → next successful registration",
		user: func(u report.UserKPI) *float64 { return u.ReregS }},
	{name: "mo_taken_over", unit: "share", per: "run", doc: "share of the affected users tested (users_tested) served (MO) by a call started before re-registering",
		run:    func(s *report.Summary) *float64 { return s.MO.TakenOverBeforeReregistration },
		trials: func(s *report.Summary) float64 { return float64(s.MO.UsersTested) }},
	{name: "mt_taken_over", unit: "share", per: "run", doc: "share of the affected users tested (users_tested) served (MT) by a call started before re-registering",
		run:    func(s *report.Summary) *float64 { return s.MT.TakenOverBeforeReregistration },
		trials: func(s *report.Summary) float64 { return float64(s.MT.UsersTested) }},
	{name: "mo_success_after_detection", unit: "share", per: "run", doc: "affected users' MO calls answered after detection",
		run: func(s *report.Summary) *float64 { return s.MO.SuccessRatioAfterDetection }},
	{name: "mt_success_after_detection", unit: "share", per: "run", doc: "affected users' MT calls answered after detection",
		run: func(s *report.Summary) *float64 { return s.MT.SuccessRatioAfterDetection }},
	{name: "peak_load_ratio", unit: "ratio", per: "run", doc: "faulted pool: busiest survivor's SIP requests/s " +
		"after the takeover over an active member's before the fault (summary member_load; Table 1 redundancy)",
		run: func(s *report.Summary) *float64 {
			if p := FaultedPoolLoad(s); p != nil {
				return p.PeakLoadRatio
			}
			return nil
		}},
	{name: "cpu_peak_ratio", unit: "ratio", per: "run", doc: "the same for CPU seconds per second (the lab's resource samples)",
		run: func(s *report.Summary) *float64 {
			if p := FaultedPoolLoad(s); p != nil {
				return p.CPUPeakRatio
			}
			return nil
		}},
}

// FaultedPoolLoad is the member load of the pool the first fault hit (nil when the run has none).
func FaultedPoolLoad(s *report.Summary) *report.PoolLoad {
	if s == nil || s.MemberLoad == nil {
		return nil
	}
	for _, m := range s.MemberLoad.Members {
		if m.Faulted {
			return s.MemberLoad.Pools[m.Pool]
		}
	}
	return nil
}

// RepeatRun is one finished run of a repetition.
type RepeatRun struct {
	Seed    int64
	RunDir  string          // relative to the repeat's directory
	Summary *report.Summary // nil: the run produced no report
}

// Aggregate summarises the runs of a repetition. The bootstrap is seeded from the first seed, so the same runs
// give the same intervals.
func Aggregate(scenarioName, variant string, runs []RepeatRun) (*Repeat, error) {
	r := &Repeat{Scenario: scenarioName, Variant: variant, Runs: len(runs), Seeds: []int64{}, RunDirs: []string{},
		Metrics: []RepeatMetric{}}
	var sums []*report.Summary
	for _, x := range runs {
		if x.Summary == nil {
			r.Failed++
			continue
		}
		r.Seeds = append(r.Seeds, x.Seed)
		r.RunDirs = append(r.RunDirs, x.RunDir)
		sums = append(sums, x.Summary)
	}
	if len(sums) == 0 {
		return r, errors.New("repeat: no run produced a report")
	}
	bootSeed := uint64(r.Seeds[0])
	for _, k := range repeatKPIs {
		groups := make([][]float64, len(sums))
		for i, s := range sums {
			if k.run != nil {
				if v := k.run(s); v != nil {
					groups[i] = []float64{*v}
				}
				continue
			}
			for _, u := range s.Users {
				if v := k.user(u); v != nil {
					groups[i] = append(groups[i], *v)
				}
			}
		}
		st, err := summarise(k, groups, sums, bootSeed)
		if errors.Is(err, stats.ErrNoValues) {
			continue
		}
		if err != nil {
			return r, err
		}
		r.Metrics = append(r.Metrics, RepeatMetric{Name: k.name, Unit: k.unit, Per: k.per, Doc: k.doc, Stat: st})
	}
	return r, nil
}

// summarise is a KPI's summary over the runs: a share's interval is Clopper–Pearson with the runs as the trials
// (a share of users with k.trials: on the users' effective n), a per-run mean's Student's t, a per-user mean's
// cluster-robust t (docs/compare.md, "Repetitions").
func summarise(k repeatKPI, groups [][]float64, sums []*report.Summary, seed uint64) (stats.Summary, error) {
	if k.unit != "share" || k.run == nil {
		return stats.Clustered(groups, seed)
	}
	vals := make([]float64, len(groups))
	for i, g := range groups {
		vals[i] = math.NaN()
		if len(g) > 0 {
			vals[i] = g[0]
		}
	}
	var users []float64
	if k.trials != nil {
		users = make([]float64, len(sums))
		for i, s := range sums {
			users[i] = k.trials(s) // 0 in any run with a value: stats.Share falls back to the runs
		}
	}
	return stats.Share(vals, users, seed)
}

// WriteRepeat writes repeat.json and repeat.md into dir.
func WriteRepeat(dir string, r *Repeat) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("repeat: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileRepeatJSON), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("repeat: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileRepeatMD), []byte(repeatMarkdown(r)), 0o644); err != nil {
		return fmt.Errorf("repeat: %w", err)
	}
	return nil
}

func repeatMarkdown(r *Repeat) string {
	var b bytes.Buffer
	title := r.Scenario
	if r.Variant != "" {
		title += " — " + r.Variant
	}
	fmt.Fprintf(&b, "# Repetitions of %s\n\n", title)
	fmt.Fprintf(&b, "%d runs asked for, %d with a report (seeds %s)", r.Runs, len(r.Seeds), seedList(r.Seeds))
	if r.Failed > 0 {
		fmt.Fprintf(&b, ", %d without", r.Failed)
	}
	b.WriteString(".\n\n")
	b.WriteString("The 95 % confidence interval of a mean is Student's t over the runs; for a per-user metric a " +
		"cluster-robust t with the runs as clusters (the users of one run share its fault instant and probe phases, " +
		"so they are not independent); for a share Clopper–Pearson with the runs as the trials, which never has " +
		"zero width. A median's interval is a percentile bootstrap that resamples whole runs. With one run there is " +
		"none (docs/compare.md, \"Repetitions\"). p95 is given from 20 values on.\n\n")
	b.WriteString("| metric | per | runs | values | median [95 % CI] | mean [95 % CI] | mean's CI | min | max | p95 |\n")
	b.WriteString("|---|---|---:|---:|---|---|---|---:|---:|---:|\n")
	for _, m := range r.Metrics {
		s := m.Stat
		p95 := "–"
		if s.P95 != nil {
			p95 = num(*s.P95)
		}
		method := s.Method
		if method == "" {
			method = "–"
		}
		fmt.Fprintf(&b, "| %s (%s) | %s | %d | %d | %s %s | %s %s | %s | %s | %s | %s |\n", m.Name, m.Unit, m.Per,
			s.Runs, s.Values, num(s.Median), ci(s.MedianCI), num(s.Mean), ci(s.MeanCI), method, num(s.Min), num(s.Max),
			p95)
	}
	b.WriteString("\n")
	for _, m := range r.Metrics {
		fmt.Fprintf(&b, "- **%s**: %s.\n", m.Name, m.Doc)
	}
	b.WriteString("\nRuns:")
	for i, d := range r.RunDirs {
		fmt.Fprintf(&b, " [%s](%s/report.md) (seed %d)", d, d, r.Seeds[i])
		if i < len(r.RunDirs)-1 {
			b.WriteString(",")
		}
	}
	b.WriteString("\n")
	return b.String()
}

func seedList(s []int64) string {
	var out []string
	for _, x := range s {
		out = append(out, fmt.Sprint(x))
	}
	return strings.Join(out, ", ")
}

func num(x float64) string { return fmt.Sprintf("%.3g", x) }

func ci(i *stats.Interval) string {
	if i == nil {
		return "[–]"
	}
	return fmt.Sprintf("[%s, %s]", num(i.Low), num(i.High))
}

// MeanCI formats a metric for a table as "mean [CI low, high] n=runs" (a share's Clopper–Pearson interval need
// not be symmetric, so both ends are given); "–" when absent.
func (r *Repeat) MeanCI(name string) string {
	if r == nil {
		return "–"
	}
	m := r.Metric(name)
	if m == nil {
		return "–"
	}
	s := fmt.Sprintf("%s %s n=%d", num(m.Stat.Mean), ci(m.Stat.MeanCI), m.Stat.Runs)
	if m.Per == "user" {
		s += fmt.Sprintf(" (%d users)", m.Stat.Values)
	}
	return s
}

// RepeatConfig configures RunRepeat.
type RepeatConfig struct {
	Scenario *scenario.Scenario
	// Dir receives rep1/ … rep<K>/ and repeat.json, repeat.md.
	Dir string
	// Seed of the first run (0: the scenario's, else a new one); run k has Seed+k-1.
	Seed int64
	// Repeat is K (at least 2).
	Repeat int
	// KeepGoing: a run that cannot be carried out is counted in repeat.json and the next one runs.
	KeepGoing bool
	Run       RunFunc
	Out       io.Writer
}

// RunRepeat runs one scenario K times (imslab run --repeat K) and writes the aggregate. It returns every run's
// outcome (nil for a run that could not be carried out) and the aggregate.
func RunRepeat(ctx context.Context, cfg RepeatConfig) ([]*scenario.Outcome, *Repeat, error) {
	if cfg.Scenario == nil || cfg.Run == nil || cfg.Dir == "" || cfg.Repeat < 2 {
		return nil, nil, errors.New("repeat: scenario, out dir, runner and a repeat of at least 2 are required")
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("repeat: %w", err)
	}
	seed := Seed(cfg.Seed, cfg.Scenario)
	var outcomes []*scenario.Outcome
	var runs []RepeatRun
	failed := 0
	for k := 1; k <= cfg.Repeat; k++ {
		if err := ctx.Err(); err != nil {
			return outcomes, nil, fmt.Errorf("repeat: %w", err)
		}
		s := RepSeed(seed, k)
		rel := RepDir("", k, cfg.Repeat)
		fmt.Fprintf(out, "== repetition %d/%d: seed %d, run dir %s\n", k, cfg.Repeat, s, filepath.Join(cfg.Dir, rel))
		o, sum, err := cfg.Run(ctx, cfg.Scenario, filepath.Join(cfg.Dir, rel), s)
		if err != nil {
			if !cfg.KeepGoing || ctx.Err() != nil || errors.Is(err, lab.ErrPortInUse) { // another lab: every later run would fail too
				return outcomes, nil, fmt.Errorf("repeat: run %d (seed %d): %w", k, s, err)
			}
			failed++
			fmt.Fprintf(out, "== repetition %d: the run could not be carried out: %v\n", k, err)
			o = nil
		}
		outcomes = append(outcomes, o)
		runs = append(runs, RepeatRun{Seed: s, RunDir: rel, Summary: sum})
	}
	agg, err := Aggregate(cfg.Scenario.Name, "", runs)
	if err != nil {
		return outcomes, agg, err
	}
	if err := WriteRepeat(cfg.Dir, agg); err != nil {
		return outcomes, agg, err
	}
	if failed > 0 {
		return outcomes, agg, fmt.Errorf("repeat: %d of %d: %w", failed, cfg.Repeat, ErrRunsFailed)
	}
	return outcomes, agg, nil
}
