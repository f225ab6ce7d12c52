package compare

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
)

// Sweep parameters: name → how a value is parsed and applied to a scenario copy.
var sweepParams = map[string]struct {
	doc   string
	apply func(sc *scenario.Scenario, v string) (float64, error)
}{
	"pool_size": {"active members N of both pools (2..8); n-plus-1 adds a spare, active-standby a standby each; mutual: even N",
		func(sc *scenario.Scenario, v string) (float64, error) {
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 || n > 8 {
				return 0, fmt.Errorf("pool_size %q: want an integer from 2 to 8", v)
			}
			sc.Topology.Pools.PCSCF.Size, sc.Topology.Pools.SCSCF.Size = n, n
			return float64(n), nil
		}},
	"probe_interval": {"OPTIONS probing interval of every node (topology.probing.interval), e.g. 1s",
		func(sc *scenario.Scenario, v string) (float64, error) {
			d, err := time.ParseDuration(v)
			if err != nil || d < topology.MinProbeInterval {
				return 0, fmt.Errorf("probe_interval %q: want a duration of at least %s", v, topology.MinProbeInterval)
			}
			sc.Topology.Probing.Interval = d
			if sc.Topology.Probing.Timeout >= d {
				sc.Topology.Probing.Timeout = d / 2
			}
			return d.Seconds(), nil
		}},
	"provisional_timeout": {"fast failure detection (topology.failover.provisional_timeout): an INVITE to a pool " +
		"member with no provisional answer within it fails over; 0 = off, the probe-based reference; e.g. 0,200ms",
		func(sc *scenario.Scenario, v string) (float64, error) {
			d, err := time.ParseDuration(v)
			if v == "0" {
				d, err = 0, nil
			}
			if err != nil || d < 0 || d > 0 && d < topology.MinProvisionalTimeout {
				return 0, fmt.Errorf("provisional_timeout %q: want 0 (off) or a duration of at least %s", v,
					topology.MinProvisionalTimeout)
			}
			sc.Topology.Failover.ProvisionalTimeout = d
			return d.Seconds(), nil
		}},
	"expires": {"registration period (topology.registration.expires, whole seconds); phones refresh at about half",
		func(sc *scenario.Scenario, v string) (float64, error) {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second || d%time.Second != 0 {
				return 0, fmt.Errorf("expires %q: want whole seconds, e.g. 60s", v)
			}
			sc.Topology.Registration.Expires = d
			return d.Seconds(), nil
		}},
	"seed": {"the phones' seed (repetitions: seed=1,2,3,4,5 runs everything once per seed; overrides --seed)",
		func(sc *scenario.Scenario, v string) (float64, error) {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n == 0 {
				return 0, fmt.Errorf("seed %q: want a non-zero integer", v)
			}
			sc.Seed = n
			return float64(n), nil
		}},
	"call_rate": {"random calls per second in total (traffic.call_rate)",
		func(sc *scenario.Scenario, v string) (float64, error) {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || r < 0 {
				return 0, fmt.Errorf("call_rate %q: want a number >= 0", v)
			}
			sc.Traffic.CallRate = r
			return r, nil
		}},
}

// SweepParamNames lists the sweep parameters with what they set.
func SweepParamNames() []string {
	var out []string
	for n, p := range sweepParams {
		out = append(out, n+": "+p.doc)
	}
	slices.Sort(out)
	return out
}

// Param is one varied parameter and its values, from "--param name=v1,v2".
type Param struct {
	Name   string
	Values []string
}

// ParseParam reads "name=v1,v2,…" and checks every value.
func ParseParam(s string) (Param, error) {
	name, list, ok := strings.Cut(s, "=")
	p := Param{Name: strings.TrimSpace(name)}
	def, known := sweepParams[p.Name]
	if !ok || !known {
		var names []string
		for n := range sweepParams {
			names = append(names, n)
		}
		slices.Sort(names)
		return p, fmt.Errorf("sweep: --param %q: want name=v1,v2 with name one of %s", s, strings.Join(names, ", "))
	}
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		if _, err := def.apply(Clone(&scenario.Scenario{}), v); err != nil {
			return p, fmt.Errorf("sweep: %w", err)
		}
		p.Values = append(p.Values, v)
	}
	if len(p.Values) == 0 {
		return p, fmt.Errorf("sweep: --param %s: no values", p.Name)
	}
	return p, nil
}

// SweepConfig configures a sweep.
type SweepConfig struct {
	Scenario     *scenario.Scenario
	ScenarioFile string
	Params       []Param
	Variants     []Variant
	OutDir       string
	Seed         int64
	KeepGoing    bool
	// Repeat runs every combination this many times (default 1), seeds seed, seed+1, …, interleaved (every
	// combination once, then again, …) into <combination>/<variant>/rep<k>/, each combination's runs summarised
	// in its repeat.json and repeat.md; the plots then show the mean over the runs with its 95 % CI.
	Repeat int
	Run    RunFunc
	Out    io.Writer
}

// SweepRow is one run of a sweep: sweep.csv.
type SweepRow struct {
	Values  map[string]string  `json:"values"`
	Numbers map[string]float64 `json:"-"`
	Row     Row                `json:"row"`
	// Rep is the repetition (1…Repeat) and Seed the run's seed.
	Rep  int   `json:"rep"`
	Seed int64 `json:"seed"`
}

// FileSweep is the sweep's CSV.
const FileSweep = "sweep.csv"

// Sweep runs one run per combination of the parameters' values and variant, in
// <out>/<name>=<value>_…/<variant>/, and writes sweep.csv and one plot per varied parameter.
func Sweep(ctx context.Context, cfg SweepConfig) ([]SweepRow, error) {
	if cfg.Scenario == nil || cfg.Run == nil || cfg.OutDir == "" || len(cfg.Variants) == 0 || len(cfg.Params) == 0 {
		return nil, errors.New("sweep: scenario, parameters, variants, out dir and runner are required")
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	seed := Seed(cfg.Seed, cfg.Scenario)
	combos := [][]string{{}}
	for _, p := range cfg.Params {
		var next [][]string
		for _, c := range combos {
			for _, v := range p.Values {
				next = append(next, append(slices.Clone(c), v))
			}
		}
		combos = next
	}
	type job struct {
		sc      *scenario.Scenario
		v       Variant
		values  map[string]string
		numbers map[string]float64
		dir     string
		active  [2]int
	}
	var jobs []job
	for _, c := range combos {
		base := Clone(cfg.Scenario)
		values, numbers := map[string]string{}, map[string]float64{}
		var name []string
		for i, p := range cfg.Params {
			x, err := sweepParams[p.Name].apply(base, c[i])
			if err != nil {
				return nil, fmt.Errorf("sweep: %w", err)
			}
			values[p.Name], numbers[p.Name] = c[i], x
			name = append(name, p.Name+"="+c[i])
		}
		for _, v := range cfg.Variants {
			sc, err := v.Apply(base, 0)
			if err != nil {
				return nil, fmt.Errorf("sweep: %s: %w", strings.Join(name, " "), err)
			}
			jobs = append(jobs, job{sc: sc, v: v, values: values, numbers: numbers,
				dir:    filepath.Join(strings.Join(name, "_"), v.Name),
				active: [2]int{base.Topology.Pools.PCSCF.Size, base.Topology.Pools.SCSCF.Size}})
		}
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	var rows []SweepRow
	failed := 0
	repeat := max(cfg.Repeat, 1)
	reps := make([][]RepeatRun, len(jobs))
	for k := 1; k <= repeat; k++ {
		for i, j := range jobs {
			if err := ctx.Err(); err != nil {
				return rows, fmt.Errorf("sweep: %w", err)
			}
			jseed := seed
			if _, ok := j.values["seed"]; ok {
				jseed = j.sc.Seed // a repetition: the swept seed, not the sweep's
			}
			jseed = RepSeed(jseed, k)
			rel := RepDir(j.dir, k, repeat)
			n := k*len(jobs) - len(jobs) + i + 1
			fmt.Fprintf(out, "== run %d/%d: %s (seed %d)\n", n, len(jobs)*repeat, rel, jseed)
			o, s, err := cfg.Run(ctx, j.sc, filepath.Join(cfg.OutDir, rel), jseed)
			if err != nil {
				if !cfg.KeepGoing || ctx.Err() != nil || errors.Is(err, lab.ErrPortInUse) { // another lab: every later run would fail too
					return rows, fmt.Errorf("sweep: %s: %w", rel, err)
				}
				failed++
				fmt.Fprintf(out, "== %s: the run could not be carried out: %v\n", rel, err)
			}
			row := RowOf(j.v, j.active, rel, s, o, err)
			fmt.Fprintf(out, "== %s: %s\n", rel, row.Line())
			rows = append(rows, SweepRow{Values: j.values, Numbers: j.numbers, Row: row, Rep: k, Seed: jseed})
			reps[i] = append(reps[i], RepeatRun{Seed: jseed, RunDir: filepath.Base(rel), Summary: s})
			// Write as we go: a sweep is long, and what ran is kept if it is interrupted.
			if err := writeSweep(cfg.OutDir, cfg.Params, rows); err != nil {
				return rows, err
			}
		}
	}
	if repeat > 1 {
		for i, j := range jobs {
			agg, err := Aggregate(cfg.Scenario.Name, j.v.Name, reps[i])
			if err == nil {
				err = WriteRepeat(filepath.Join(cfg.OutDir, j.dir), agg)
			}
			if err != nil {
				fmt.Fprintf(out, "== %s: %v\n", j.dir, err)
			}
		}
	}
	if failed > 0 {
		return rows, fmt.Errorf("sweep: %d of %d: %w", failed, len(jobs)*repeat, ErrRunsFailed)
	}
	return rows, nil
}

// sweepKPIs are the KPI columns of sweep.csv (and the plotted ones).
var sweepKPIs = []struct {
	name string
	get  func(Row) *float64
}{
	{"affected_users", func(r Row) *float64 { return fp(float64(r.AffectedUsers)) }},
	{"time_to_detect_s", func(r Row) *float64 { return r.TimeToDetectS }},
	{"mo_interruption_p50_s", func(r Row) *float64 { return pp(r.MO.InterruptionS, false) }},
	{"mo_interruption_p95_s", func(r Row) *float64 { return pp(r.MO.InterruptionS, true) }},
	{"mt_interruption_p50_s", func(r Row) *float64 { return pp(r.MT.InterruptionS, false) }},
	{"mt_interruption_p95_s", func(r Row) *float64 { return pp(r.MT.InterruptionS, true) }},
	{"mo_taken_over", func(r Row) *float64 { return r.MO.TakenOver }},
	{"mt_taken_over", func(r Row) *float64 { return r.MT.TakenOver }},
	{"calls_failed", func(r Row) *float64 { return fp(float64(r.CallsFailed)) }},
	{"calls_total", func(r Row) *float64 { return fp(float64(r.CallsTotal)) }},
	{"cx_extra_per_user", func(r Row) *float64 {
		if r.CxExtraPerUser == nil {
			return nil
		}
		return fp(r.CxExtraPerUser["total"])
	}},
	{"sip_extra_per_user", func(r Row) *float64 { return r.SIPExtraPerUser }},
	{"repl_per_user", func(r Row) *float64 { return r.ReplPerUser }},
	{"setup_takeover_p50_ms", func(r Row) *float64 {
		if r.SetupTakeoverMs.Count == 0 {
			return nil
		}
		return fp(r.SetupTakeoverMs.P50)
	}},
}

func fp(x float64) *float64 { return &x }

func pp(p *report.Percentiles, p95 bool) *float64 {
	if p == nil {
		return nil
	}
	if p95 {
		return fp(p.P95)
	}
	return fp(p.P50)
}

// SweepCSV is sweep.csv: the parameters, the variant, the main KPIs, the run directory and any error.
func SweepCSV(params []Param, rows []SweepRow) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	head := []string{}
	for _, p := range params {
		head = append(head, p.Name)
	}
	head = append(head, "variant", "scheme", "pcscf_members", "scscf_members")
	for _, k := range sweepKPIs {
		head = append(head, k.name)
	}
	head = append(head, "expectations_ok", "expectations_all", "run_dir", "error", "rep", "seed")
	_ = w.Write(head)
	for _, r := range rows {
		var rec []string
		for _, p := range params {
			rec = append(rec, r.Values[p.Name])
		}
		rec = append(rec, r.Row.Variant, r.Row.Scheme, itoa(r.Row.Members[0]), itoa(r.Row.Members[1]))
		for _, k := range sweepKPIs {
			rec = append(rec, optF(k.get(r.Row)))
		}
		rec = append(rec, itoa(r.Row.ExpectationsOK), itoa(r.Row.ExpectationsAll), filepath.ToSlash(r.Row.RunDir), r.Row.Error,
			itoa(max(r.Rep, 1)), strconv.FormatInt(r.Seed, 10))
		_ = w.Write(rec)
	}
	w.Flush()
	return buf.Bytes()
}

func writeSweep(dir string, params []Param, rows []SweepRow) error {
	if err := os.WriteFile(filepath.Join(dir, FileSweep), SweepCSV(params, rows), 0o644); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, DirPlots), 0o755); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	for _, p := range params {
		if len(p.Values) < 2 {
			continue
		}
		b, err := PlotSweep(p.Name, params, rows)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, DirPlots, "sweep_"+p.Name+".svg"), b, 0o644); err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
	}
	return nil
}

// PlotSweep draws the interruption p95 (MO dashed, MT solid) against one parameter, one line per variant (and per
// combination of the other parameters' values, named in the legend).
func PlotSweep(param string, params []Param, rows []SweepRow) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Interruption p95 vs. " + param + " (MT solid, MO dashed)"
	p.X.Label.Text = param
	p.Y.Label.Text = "interruption p95 (s)"
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	type key struct{ variant, others string }
	groups := map[key][]SweepRow{}
	var order []key
	for _, r := range rows {
		var others []string
		for _, q := range params {
			if q.Name != param {
				others = append(others, q.Name+"="+r.Values[q.Name])
			}
		}
		k := key{r.Row.Variant, strings.Join(others, " ")}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	for i, k := range order {
		g := groups[k]
		slices.SortFunc(g, func(a, b SweepRow) int {
			switch {
			case a.Numbers[param] < b.Numbers[param]:
				return -1
			case a.Numbers[param] > b.Numbers[param]:
				return 1
			}
			return 0
		})
		name := k.variant
		if k.others != "" {
			name += " (" + k.others + ")"
		}
		for _, dir := range []string{"mt", "mo"} {
			// One point per value of the parameter: the run's p95, or with repetitions the mean of the runs' p95
			// with its 95 % CI over the runs as an error bar (Student's t: one value per run).
			var xs []float64
			byX := map[float64][]float64{}
			for _, r := range g {
				d := r.Row.MT
				if dir == "mo" {
					d = r.Row.MO
				}
				if d.InterruptionS != nil {
					x := r.Numbers[param]
					if _, ok := byX[x]; !ok {
						xs = append(xs, x)
					}
					byX[x] = append(byX[x], d.InterruptionS.P95)
				}
			}
			if len(xs) == 0 {
				continue
			}
			var xys plotter.XYs
			var errs plotter.YErrors
			bars := false
			for _, x := range xs {
				st, err := stats.PerRun(byX[x], uint64(len(byX[x])))
				if err != nil {
					return nil, fmt.Errorf("sweep: plot: %w", err)
				}
				xys = append(xys, plotter.XY{X: x, Y: st.Mean})
				e := struct{ Low, High float64 }{}
				if st.MeanCI != nil {
					e.Low, e.High, bars = st.Mean-st.MeanCI.Low, st.MeanCI.High-st.Mean, true
				}
				errs = append(errs, e)
			}
			l, pts, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, fmt.Errorf("sweep: plot: %w", err)
			}
			l.Color, pts.Color, pts.Shape = colorOf(i), colorOf(i), shapes[i%len(shapes)]
			if dir == "mo" {
				l.Dashes = dashes
			} else {
				legend := name
				if n := len(byX[xs[0]]); n > 1 {
					legend += fmt.Sprintf(", n=%d runs per point, mean ± 95 %% t CI", n)
				}
				p.Legend.Add(legend, l, pts)
			}
			p.Add(l, pts)
			if bars {
				eb, err := plotter.NewYErrorBars(struct {
					plotter.XYs
					plotter.YErrors
				}{xys, errs})
				if err != nil {
					return nil, fmt.Errorf("sweep: plot: %w", err)
				}
				eb.Color = colorOf(i)
				p.Add(eb)
			}
		}
	}
	return svg(p)
}
