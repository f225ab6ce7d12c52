package study

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/imslab/quasipool/internal/analysis/figure"

	"github.com/imslab/quasipool/internal/analysis/stats"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
)

// Sweep is an experiment's sweep block: the experiment runs once per value of one parameter, each value as its own
// experiment <name>@<param>=<value> (its own directory and resumable runs) with the experiment's seeds, so every
// value is compared on the same draws (docs/study.md, "Sweeps").
type Sweep struct {
	Param  string   `yaml:"param"`
	Values []string `yaml:"values"`
	// Join names another experiment's sweep of the same parameter and seed whose tables and figures this one's
	// schemes join (e.g. mutual, which needs an even pool size, beside the other schemes' pool-size sweep).
	Join string `yaml:"join"`
}

// SweepPoint tells which value of which sweep an expanded experiment is.
type SweepPoint struct {
	// Sweep is the sweep's name: the experiment's name in the study file, or the one its sweep joins.
	Sweep string `json:"sweep"`
	// Experiment is the experiment's name in the study file.
	Experiment string `json:"experiment"`
	Param      string `json:"param"`
	// Value is the value as the study file gives it (it names the experiment); X is its number (seconds for a
	// duration), the figures' abscissa.
	Value string  `json:"value"`
	X     float64 `json:"x"`
}

// sweepParam is a parameter a sweep can vary.
type sweepParam struct {
	doc, unit string
	// traffic is the traffic field it sets, poolSize whether it is the pool_size override: the experiment must not
	// also set it through its overrides.
	traffic  string
	poolSize bool
	parse    func(v string) (float64, error)
	apply    func(sc *scenario.Scenario, x float64)
}

func parseDuration(min time.Duration, whole bool) func(string) (float64, error) {
	return func(v string) (float64, error) {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return 0, fmt.Errorf("%q: want a duration with its unit, e.g. 1s or 500ms", v)
		case d < min:
			return 0, fmt.Errorf("%q: must be at least %s", v, min)
		case whole && d%time.Second != 0:
			return 0, fmt.Errorf("%q: must be whole seconds", v)
		}
		return d.Seconds(), nil
	}
}

func parseNumber(lo, hi float64, integer bool) func(string) (float64, error) {
	return func(v string) (float64, error) {
		x, err := strconv.ParseFloat(v, 64)
		switch {
		case err != nil || math.IsNaN(x) || math.IsInf(x, 0):
			return 0, fmt.Errorf("%q: want a number", v)
		case integer && x != math.Trunc(x):
			return 0, fmt.Errorf("%q: want a whole number", v)
		case x < lo || x > hi:
			return 0, fmt.Errorf("%q: must be from %g to %g", v, lo, hi)
		}
		return x, nil
	}
}

func seconds(x float64) time.Duration { return time.Duration(math.Round(x * float64(time.Second))) }

// sweepParams are the parameters a sweep can vary.
var sweepParams = map[string]sweepParam{
	"probing.interval": {doc: "OPTIONS probing interval of every node (topology.probing.interval); a probe timeout " +
		"not shorter than the interval becomes half of it", unit: "s", parse: parseDuration(topology.MinProbeInterval, false),
		apply: func(sc *scenario.Scenario, x float64) {
			d := seconds(x)
			sc.Topology.Probing.Interval = d
			if sc.Topology.Probing.Timeout >= d {
				sc.Topology.Probing.Timeout = d / 2
			}
		}},
	"failover.provisional_timeout": {doc: "fast failure detection (topology.failover.provisional_timeout): an " +
		"INVITE to a pool member with no provisional answer within it fails over; 0 = off, the probe-based reference",
		unit: "s", parse: func(v string) (float64, error) {
			if v == "0" {
				return 0, nil
			}
			return parseDuration(topology.MinProvisionalTimeout, false)(v)
		},
		apply: func(sc *scenario.Scenario, x float64) { sc.Topology.Failover.ProvisionalTimeout = seconds(x) }},
	"probing.failures_to_down": {doc: "failed probes before a peer is marked down (topology.probing.failures_to_down)",
		unit: "probes", parse: parseNumber(1, 20, true),
		apply: func(sc *scenario.Scenario, x float64) { sc.Topology.Probing.FailuresToDown = int(x) }},
	"registration.expires": {doc: "registration period (topology.registration.expires, whole seconds)", unit: "s",
		parse: parseDuration(time.Second, true),
		apply: func(sc *scenario.Scenario, x float64) { sc.Topology.Registration.Expires = seconds(x) }},
	"traffic.idle_share": {doc: "share of idle users (traffic.idle_share)", unit: "share", traffic: "idle_share",
		parse: parseNumber(0, 1, false), apply: func(sc *scenario.Scenario, x float64) { sc.Traffic.IdleShare = x }},
	"traffic.mt_only_share": {doc: "share of MT-only users (traffic.mt_only_share)", unit: "share",
		traffic: "mt_only_share", parse: parseNumber(0, 1, false),
		apply: func(sc *scenario.Scenario, x float64) { sc.Traffic.MTOnlyShare = x }},
	"traffic.bhca": {doc: "busy-hour call attempts per calling user (traffic.bhca)", unit: "calls/user/h",
		traffic: "bhca", parse: parseNumber(0.001, 1e6, false),
		apply: func(sc *scenario.Scenario, x float64) { sc.Traffic.BHCA = x }},
	"traffic.call_rate": {doc: "random calls per second in total (traffic.call_rate)", unit: "calls/s",
		traffic: "call_rate", parse: parseNumber(0, 1e6, false),
		apply: func(sc *scenario.Scenario, x float64) { sc.Traffic.CallRate = x }},
	"pool_size": {doc: "active members N of both pools (as the pool_size override; n-plus-1 adds a spare, " +
		"active-standby a standby per member; mutual needs an even N)", unit: "active members", poolSize: true,
		parse: parseNumber(2, 8, true), apply: func(*scenario.Scenario, float64) {}},
}

// SweepParams lists the parameters a sweep can vary with what they set, sorted.
func SweepParams() []string {
	var out []string
	for n, p := range sweepParams {
		out = append(out, n+": "+p.doc)
	}
	slices.Sort(out)
	return out
}

func sweepParamNames() string {
	var names []string
	for n := range sweepParams {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// sweepValue is what a sweep value may look like: it names a directory.
var sweepValue = regexp.MustCompile(`^[0-9A-Za-z._+-]+$`)

// checkSweep validates an experiment's sweep block against the experiment's overrides (a parameter both swept and
// overridden is an error: which one would the runs have?).
func checkSweep(add func(string, string, ...any), p string, s *Sweep, ovs ...namedOverrides) {
	def, ok := sweepParams[s.Param]
	if !ok {
		if s.Param == "" {
			add(p+".param", "missing: one of %s", sweepParamNames())
		} else {
			add(p+".param", "%q: unknown, want one of %s", s.Param, sweepParamNames())
		}
	}
	if len(s.Values) == 0 {
		add(p+".values", "missing: give at least one value")
	}
	seen := map[float64]string{}
	for i, v := range s.Values {
		f := fmt.Sprintf("%s.values[%d]", p, i)
		if !sweepValue.MatchString(v) {
			add(f, "%q: want letters, digits, '.', '_', '+' or '-' (it names a directory)", v)
			continue
		}
		if !ok {
			continue
		}
		x, err := def.parse(v)
		if err != nil {
			add(f, "%s: %v", s.Param, err)
			continue
		}
		if prev, dup := seen[x]; dup {
			add(f, "%q is the same value as %q", v, prev)
		}
		seen[x] = v
	}
	if !ok {
		return
	}
	for _, o := range ovs {
		if def.poolSize && o.o.PoolSize > 0 {
			add(o.field+".pool_size", "the sweep varies pool_size: do not set it here too")
		}
		if def.traffic != "" && hasKey(&o.o.Traffic, def.traffic) {
			add(o.field+".traffic."+def.traffic, "the sweep varies %s: do not set it here too", s.Param)
		}
	}
}

type namedOverrides struct {
	field string
	o     Overrides
}

func hasKey(m *yaml.Node, key string) bool {
	if m.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return true
		}
	}
	return false
}

// expandSweep returns the points of an experiment's sweep, in file order (nil without a sweep).
func expandSweep(e Experiment) []*SweepPoint {
	if e.Sweep == nil {
		return []*SweepPoint{nil}
	}
	def := sweepParams[e.Sweep.Param]
	var out []*SweepPoint
	for _, v := range e.Sweep.Values {
		x, _ := def.parse(v) // Validate checked it
		group := e.Name
		if e.Sweep.Join != "" {
			group = e.Sweep.Join
		}
		out = append(out, &SweepPoint{Sweep: group, Experiment: e.Name, Param: e.Sweep.Param, Value: v, X: x})
	}
	return out
}

// Name is the expanded experiment's name: <sweep>@<param>=<value>.
func (p *SweepPoint) Name() string { return p.Experiment + "@" + p.Param + "=" + p.Value }

// SweepResult is one sweep of the study: its headline KPIs per value and scheme (study.json "sweeps").
type SweepResult struct {
	// Name is the experiment's name in the study file; Experiments the expanded experiments, one per value.
	Name        string     `json:"name"`
	Param       string     `json:"param"`
	Doc         string     `json:"doc"`
	Unit        string     `json:"unit"`
	Values      []string   `json:"values"`
	X           []float64  `json:"x"`
	Experiments []string   `json:"experiments"`
	Schemes     []string   `json:"schemes"`
	KPIs        []SweepKPI `json:"kpis"`
	Figures     []Figure   `json:"figures,omitempty"`
}

// SweepKPI is one KPI of a sweep: a cell per value and scheme.
type SweepKPI struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
	Per  string `json:"per"`
	// Estimate is "mean" or "median": the statistic the cells give, with its 95 % CI over runs (a mean's t or
	// Clopper–Pearson, a median's bootstrap: docs/compare.md, "Repetitions").
	Estimate string      `json:"estimate"`
	Cells    []SweepCell `json:"cells"`
}

// SweepCell is one value × scheme of a sweep KPI, from the expanded experiment's aggregate.
type SweepCell struct {
	Value  string  `json:"value"`
	X      float64 `json:"x"`
	Scheme string  `json:"scheme"`
	// Runs and Values are the aggregate's n (0 when the KPI has no value there yet).
	Runs  int             `json:"n_runs"`
	NVals int             `json:"n_values"`
	Est   *float64        `json:"estimate,omitempty"`
	CI95  *stats.Interval `json:"ci95,omitempty"`
}

// sweepKPIs are the KPIs a sweep tabulates and plots against its parameter: per-run shares and times by their
// mean, the per-user interruptions by their median (a few slow users dominate their mean).
var sweepKPIs = []struct{ name, estimate string }{
	{"restored_at_bound", "mean"},
	{"restored_at_end", "mean"},
	{"restore_median_s", "mean"},
	{"setup_started_median_s", "mean"},
	{"time_to_detect_s", "mean"},
	{"mt_interruption_s", "median"},
	{"mo_interruption_s", "median"},
}

// aggregateSweeps builds the sweeps of a result from its expanded experiments.
func aggregateSweeps(res *Result) {
	res.Sweeps = nil
	idx := map[string]int{}
	for _, e := range res.Experiments {
		pt := e.Sweep
		if pt == nil {
			continue
		}
		i, ok := idx[pt.Sweep]
		if !ok {
			def := sweepParams[pt.Param]
			i = len(res.Sweeps)
			idx[pt.Sweep] = i
			res.Sweeps = append(res.Sweeps, SweepResult{Name: pt.Sweep, Param: pt.Param, Doc: def.doc, Unit: def.unit})
		}
		s := &res.Sweeps[i]
		s.Experiments = append(s.Experiments, e.Name)
		if !slices.Contains(s.X, pt.X) {
			s.Values, s.X = append(s.Values, pt.Value), append(s.X, pt.X)
		}
		for _, v := range e.Variants {
			if !slices.Contains(s.Schemes, v.Variant) {
				s.Schemes = append(s.Schemes, v.Variant)
			}
		}
	}
	byName := map[string]*ExperimentResult{}
	for i := range res.Experiments {
		byName[res.Experiments[i].Name] = &res.Experiments[i]
	}
	for i := range res.Sweeps {
		s := &res.Sweeps[i]
		// The values in increasing order (a joined sweep adds its own).
		ord := make([]int, len(s.X))
		for j := range ord {
			ord[j] = j
		}
		slices.SortStableFunc(ord, func(a, b int) int { return cmpFloat(s.X[a], s.X[b]) })
		vals, xs := make([]string, len(ord)), make([]float64, len(ord))
		for j, o := range ord {
			vals[j], xs[j] = s.Values[o], s.X[o]
		}
		s.Values, s.X = vals, xs
		for _, k := range sweepKPIs {
			kpi := SweepKPI{Name: k.name, Estimate: k.estimate}
			any := false
			for j := range s.Values {
				for _, scheme := range s.Schemes {
					c := SweepCell{Value: s.Values[j], X: s.X[j], Scheme: scheme}
					for _, en := range s.Experiments {
						e := byName[en]
						if e.Sweep.X != s.X[j] {
							continue
						}
						for vi := range e.Variants {
							if e.Variants[vi].Variant != scheme {
								continue
							}
							m := e.Variants[vi].Metric(k.name)
							if m == nil {
								continue
							}
							any, kpi.Unit, kpi.Per = true, m.Unit, m.Per
							st := m.Stat
							c.Runs, c.NVals = st.Runs, st.Values
							if k.estimate == "median" {
								c.Est, c.CI95 = fp(st.Median), st.MedianCI
							} else {
								c.Est, c.CI95 = fp(st.Mean), st.MeanCI
							}
						}
					}
					kpi.Cells = append(kpi.Cells, c)
				}
			}
			if any {
				s.KPIs = append(s.KPIs, kpi)
			}
		}
	}
}

// Cell returns the cell of a value and scheme, or nil.
func (k *SweepKPI) Cell(value, scheme string) *SweepCell {
	for i := range k.Cells {
		if k.Cells[i].Value == value && k.Cells[i].Scheme == scheme {
			return &k.Cells[i]
		}
	}
	return nil
}

// SweepCellText is a sweep table's cell: estimate [95 % CI] (n runs; users for a per-user KPI), "–" without a value.
func SweepCellText(k *SweepKPI, c *SweepCell) string {
	if c == nil || c.Est == nil {
		return "–"
	}
	t := num(*c.Est) + " " + ci(c.CI95)
	if k.Per == "user" {
		return t + fmt.Sprintf(" (n %d runs, %d users)", c.Runs, c.NVals)
	}
	return t + fmt.Sprintf(" (n %d)", c.Runs)
}

// sweepMarkdown writes a sweep's tables (a row per value, a column per scheme, per KPI) and its figures under a
// heading of the given level.
func sweepMarkdown(b *bytes.Buffer, s SweepResult, level string) {
	fmt.Fprintf(b, "%s Sweep %s: %s\n\n", level, s.Name, s.Param)
	fmt.Fprintf(b, "%s; unit: %s. One experiment per value (%s), each on the same seeds; each cell is the estimate "+
		"[95 %% CI] over the runs (a mean's t, a share's Clopper–Pearson, a median's percentile bootstrap over "+
		"runs) and n.\n\n", upperFirst(s.Doc), s.Unit,
		strings.Join(s.Experiments, ", "))
	for _, k := range s.KPIs {
		fmt.Fprintf(b, "%s of %s (%s, per %s):\n\n| %s |", upperFirst(k.Estimate), k.Name, k.Unit, k.Per, s.Param)
		for _, sc := range s.Schemes {
			fmt.Fprintf(b, " %s |", sc)
		}
		b.WriteString("\n|---|" + strings.Repeat("---|", len(s.Schemes)) + "\n")
		for _, v := range s.Values {
			fmt.Fprintf(b, "| %s |", v)
			for _, sc := range s.Schemes {
				fmt.Fprintf(b, " %s |", SweepCellText(&k, k.Cell(v, sc)))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	for _, f := range s.Figures {
		if level == "##" {
			fmt.Fprintf(b, "![%s](%s)\n\n**%s** ([SVG](%s)). %s\n\n", f.Title, f.SVG, f.Title, f.SVG, f.Caption)
		} else {
			fmt.Fprintf(b, "- %s: [SVG](%s)\n", f.Title, f.SVG)
		}
	}
	if level == "##" && len(s.Figures) > 0 {
		fmt.Fprintf(b, "%s\n\n", printNote)
	}
	if level != "##" && len(s.Figures) > 0 {
		b.WriteString("\n")
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writeSweepFigures draws every sweep's figures into <dir>/figures/: one per KPI, the estimate against the
// parameter, a line per scheme with its 95 % CI as error bars.
func writeSweepFigures(dir string, r *Result, printForms bool) error {
	for i := range r.Sweeps {
		s := &r.Sweeps[i]
		s.Figures = nil
		for _, k := range s.KPIs {
			b, fig := sweepFigure(s, k)
			if b == nil {
				continue
			}
			if err := save(b, dir, &fig, printForms); err != nil {
				return err
			}
			s.Figures = append(s.Figures, fig)
		}
	}
	return nil
}

func sweepFigure(s *SweepResult, k SweepKPI) (figure.Builder, Figure) {
	lo, hi := math.Inf(1), math.Inf(-1)
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, c := range k.Cells {
		if c.Est == nil {
			continue
		}
		lo, hi = min(lo, *c.Est), max(hi, *c.Est)
		if c.CI95 != nil {
			lo, hi = min(lo, c.CI95.Low), max(hi, c.CI95.High)
		}
		xlo, xhi = min(xlo, c.X), max(xhi, c.X)
	}
	if math.IsInf(lo, 1) {
		return nil, Figure{}
	}
	logX := xlo > 0 && xhi/xlo >= 10
	xlabel := fmt.Sprintf("%s (%s)", s.Param, s.Unit)
	if logX {
		xlabel += ", log scale"
	}
	// The schemes' points at one value are set a little apart so that their bars do not hide each other.
	span := xhi - xlo
	if span == 0 {
		span = math.Max(math.Abs(xhi), 1)
	}
	dodge := func(x float64, i int) float64 {
		off := (float64(i) - float64(len(s.Schemes)-1)/2) * 0.012
		if logX {
			return x * math.Pow(xhi/xlo, off)
		}
		return x + off*span
	}
	var missing []string // schemes without a value at any point: no line
	for _, scheme := range s.Schemes {
		found := false
		for _, c := range k.Cells {
			found = found || c.Scheme == scheme && c.Est != nil
		}
		if !found {
			missing = append(missing, scheme)
		}
	}
	title := fmt.Sprintf("%s: %s %s vs %s (95 %% CI)", s.Name, k.Estimate, k.Name, s.Param)
	build := func(f figure.Form) (*figure.Fig, error) {
		g := figure.NewFig(f, title, xlabel, fmt.Sprintf("%s of %s (%s)", k.Estimate, k.Name, k.Unit))
		p := g.Plot
		if logX {
			p.X.Scale = plot.LogScale{}
			p.X.Min, p.X.Max = xlo/math.Pow(xhi/xlo, 0.08), xhi*math.Pow(xhi/xlo, 0.08)
		} else {
			p.X.Min, p.X.Max = xlo-0.08*span, xhi+0.08*span
		}
		var ticks plot.ConstantTicks
		for j, v := range s.Values {
			ticks = append(ticks, plot.Tick{Value: s.X[j], Label: v})
		}
		p.X.Tick.Marker = ticks
		for i, scheme := range s.Schemes {
			var pts errPoints
			nmin, nmax, umin, umax := math.MaxInt, 0, math.MaxInt, 0
			for _, c := range k.Cells {
				if c.Scheme != scheme || c.Est == nil {
					continue
				}
				var e struct{ Low, High float64 }
				if c.CI95 != nil {
					e.Low, e.High = *c.Est-c.CI95.Low, c.CI95.High-*c.Est
				}
				pts.XYs = append(pts.XYs, plotter.XY{X: dodge(c.X, i), Y: *c.Est})
				pts.YErrors = append(pts.YErrors, e)
				nmin, nmax, umin, umax = min(nmin, c.Runs), max(nmax, c.Runs), min(umin, c.NVals), max(umax, c.NVals)
			}
			if len(pts.XYs) == 0 {
				continue
			}
			col := colourOf(i)
			ord := make([]int, len(pts.XYs))
			for j := range ord {
				ord[j] = j
			}
			slices.SortFunc(ord, func(a, b int) int { return cmpFloat(pts.XYs[a].X, pts.XYs[b].X) })
			var line plotter.XYs
			for _, j := range ord {
				line = append(line, pts.XYs[j])
			}
			l, err := plotter.NewLine(line)
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			l.Color, l.Width = col, vg.Points(1.2)
			eb, err := plotter.NewYErrorBars(pts)
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			eb.Color, eb.Width, eb.CapWidth = col, vg.Points(1.1), f.TickSize*0.75
			sc, err := plotter.NewScatter(pts.XYs)
			if err != nil {
				return nil, fmt.Errorf("study: figure: %w", err)
			}
			sc.Color, sc.Radius, sc.Shape = col, f.TickSize*0.35, draw.CircleGlyph{}
			p.Add(l, eb, sc)
			runs := "runs"
			if nmax == 1 {
				runs = "run"
			}
			n := fmt.Sprintf("n = %s %s per value", span2(nmin, nmax), runs)
			if k.Per == "user" {
				n += fmt.Sprintf(", %s users", span2(umin, umax))
			}
			g.Add(fmt.Sprintf("%s: %s", scheme, n), l, sc)
		}
		pad := (hi - lo) * 0.12
		if pad == 0 {
			pad = math.Max(math.Abs(hi)*0.1, 0.05)
		}
		p.Y.Min, p.Y.Max = lo-pad, hi+pad
		if k.Unit == "share" {
			p.Y.Min, p.Y.Max = math.Max(p.Y.Min, -0.02), math.Min(p.Y.Max, 1.02)
			p.Y.Tick.Marker = figure.ShareTicks
		}
		return g, nil
	}
	caption := fmt.Sprintf("%s of %s (%s, per %s) against %s (%s): a line per scheme, each point one "+
		"experiment of the sweep (the same seeds at every value), bars its 95 %% CI over runs "+
		"(study.json %s_ci95; none with one run). Points of one value are set slightly apart so that their bars do "+
		"not overlap. n per value and scheme in the legend (and in the sweep table).", upperFirst(k.Estimate),
		k.Name, k.Unit, k.Per, s.Param, s.Unit, k.Estimate)
	if len(missing) > 0 {
		caption += fmt.Sprintf(" No line for %s: no run had a value at any point (e.g. no median time to restore "+
			"where fewer than half of the users were restored by the end of the run).", strings.Join(missing, ", "))
	}
	return build, Figure{Kind: "sweep", KPI: k.Name, SVG: s.Name + "-sweep-" + strings.ReplaceAll(k.Name, "_", "-"),
		Title: fmt.Sprintf("%s vs %s", k.Name, s.Param), Caption: caption}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// span2 is "5" or "3–5".
func span2(lo, hi int) string {
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// readSweepFigures returns the sweep figures study.json lists (those of the previous invocation, while a study
// runs).
func readSweepFigures(dir string) (map[string][]Figure, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileJSON))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	out := map[string][]Figure{}
	for _, s := range r.Sweeps {
		out[s.Name] = s.Figures
	}
	return out, nil
}

// checkJoins validates the sweeps' join fields: the joined experiment exists, sweeps the same parameter from the
// same seed (its points share the draws), joins nothing itself, and has none of the joining experiment's schemes
// (a value and scheme has one cell).
func checkJoins(add func(string, string, ...any), exps []Experiment) {
	byName := map[string]int{}
	for i, e := range exps {
		if _, dup := byName[e.Name]; !dup {
			byName[e.Name] = i
		}
	}
	for i, e := range exps {
		if e.Sweep == nil || e.Sweep.Join == "" {
			continue
		}
		f := fmt.Sprintf("experiments[%d].sweep.join", i)
		j, ok := byName[e.Sweep.Join]
		switch {
		case !ok:
			add(f, "%q is not an experiment of the study", e.Sweep.Join)
			continue
		case j == i:
			add(f, "%q is this experiment", e.Sweep.Join)
			continue
		}
		t := exps[j]
		switch {
		case t.Sweep == nil:
			add(f, "%q has no sweep", t.Name)
		case t.Sweep.Join != "":
			add(f, "%q joins %q itself: join that one", t.Name, t.Sweep.Join)
		case t.Sweep.Param != e.Sweep.Param:
			add(f, "%q sweeps %s, this experiment %s", t.Name, t.Sweep.Param, e.Sweep.Param)
		case t.Seed != e.Seed:
			add(f, "%q starts from seed %d, this experiment from %d: give the same seed, so that the points of "+
				"both share the draws", t.Name, t.Seed, e.Seed)
		}
		if len(e.Schemes) == 0 || len(t.Schemes) == 0 {
			if len(e.Schemes) == 0 && len(t.Schemes) == 0 {
				add(f, "%q and this experiment both run the scenario as is: one cell per value and scheme", t.Name)
			}
			continue
		}
		for k, s := range e.Schemes {
			if slices.Contains(t.Schemes, s) {
				add(fmt.Sprintf("experiments[%d].schemes[%d]", i, k), "%q is also a scheme of %q, whose sweep this "+
					"one joins: one cell per value and scheme", s, t.Name)
			}
		}
	}
}
