package study

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/analysis/stats"
)

// Claim is a statement of the paper the study reproduces, tested against the study's KPIs (docs/study.md,
// "Claims"): its verdict is made from study.json, never typed.
type Claim struct {
	// ID names the claim in the outputs.
	ID string `yaml:"id"`
	// Text is the claim in the study's words, with where it is (§, table).
	Text string `yaml:"text"`
	// Checks are the KPI bounds the claim stands or falls by; all must hold for "supported".
	Checks []ClaimCheck `yaml:"checks"`
	// NotMeasurable, given instead of checks, says why this study cannot test the claim.
	NotMeasurable string `yaml:"not_measurable"`
}

// ClaimCheck bounds one KPI of one scheme of one experiment: the mean over the runs, read through its 95 % CI.
// With Versus, it bounds the difference scheme − versus instead, taken seed by seed (the schemes of an experiment
// run with the same seeds): a paired t, or for a share Clopper–Pearson on (d+1)/2 (stats.Paired).
type ClaimCheck struct {
	Experiment string  `yaml:"experiment" json:"experiment"`
	Scheme     string  `yaml:"scheme" json:"scheme"`
	Versus     string  `yaml:"versus" json:"versus,omitempty"`
	KPI        string  `yaml:"kpi" json:"kpi"`
	Op         string  `yaml:"op" json:"op"` // >=, <=, >, <
	Value      float64 `yaml:"value" json:"value"`
}

func (c ClaimCheck) String() string {
	return fmt.Sprintf("%s, %s: %s %s %g", c.Experiment, c.Schemes(), c.KPI, c.Op, c.Value)
}

// Schemes is the check's scheme, or "<scheme> − <versus>" for a paired difference.
func (c ClaimCheck) Schemes() string {
	if c.Versus == "" {
		return c.Scheme
	}
	return c.Scheme + " − " + c.Versus
}

// Verdicts of a claim or a check.
const (
	VerdictSupported     = "supported"      // the whole 95 % CI of the mean is on the claim's side of the bound
	VerdictRefuted       = "refuted"        // the whole CI is on the other side
	VerdictInconclusive  = "inconclusive"   // the CI straddles the bound, or one run gives no CI
	VerdictNotMeasurable = "not measurable" // no KPI (no value in any run), or the claim says why
	VerdictPending       = "not run yet"    // no run of that experiment and scheme has a report yet
)

// ClaimResult is a claim's verdict with the measurements behind it.
type ClaimResult struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Verdict string `json:"verdict"`
	// Provisional is true while a run the checks read is still pending or failed (the verdict may change).
	Provisional bool          `json:"provisional,omitempty"`
	Reason      string        `json:"reason,omitempty"`
	Checks      []CheckResult `json:"checks,omitempty"`
	// NRaised are the raises of n (the study file's n_raised) of the experiments the checks read: a verdict
	// made after n was raised says so.
	NRaised []NRaise `json:"n_raised,omitempty"`
}

// CheckResult is one check's measurement and verdict.
type CheckResult struct {
	ClaimCheck `json:"check"`
	Verdict    string   `json:"verdict"`
	Mean       *float64 `json:"mean,omitempty"`
	CILow      *float64 `json:"ci_low,omitempty"`
	CIHigh     *float64 `json:"ci_high,omitempty"`
	// Method is how the interval was made (stats: t, cluster-robust t, Clopper–Pearson, paired).
	Method string `json:"ci_method,omitempty"`
	// Runs is n: the runs with a value, or for a paired check the seeds both schemes have a value of.
	Runs    int `json:"n_runs"`
	Pending int `json:"pending"`
	// Invalid counts the runs left out as invalid by their health record.
	Invalid int `json:"invalid,omitempty"`
}

var claimOps = []string{">=", "<=", ">", "<"}

// checkClaims validates the file's claims against its experiments and schemes.
func checkClaims(add func(field, format string, args ...any), claims []Claim, exps []Experiment) {
	ids := map[string]bool{}
	for i, c := range claims {
		p := fmt.Sprintf("claims[%d]", i)
		switch {
		case c.ID == "":
			add(p+".id", "missing")
		case ids[c.ID]:
			add(p+".id", "%q given twice", c.ID)
		}
		ids[c.ID] = true
		if strings.TrimSpace(c.Text) == "" {
			add(p+".text", "missing: the claim in the study's words")
		}
		if (len(c.Checks) == 0) == (c.NotMeasurable == "") {
			add(p, "give either checks or not_measurable (why the study cannot test it)")
		}
		for j, k := range c.Checks {
			q := fmt.Sprintf("%s.checks[%d]", p, j)
			i := slices.IndexFunc(exps, func(e Experiment) bool { return e.Name == k.Experiment })
			if i < 0 { // a point of a sweep: <experiment>@<param>=<value>
				i = slices.IndexFunc(exps, func(e Experiment) bool {
					return slices.ContainsFunc(expandSweep(e), func(p *SweepPoint) bool { return p != nil && p.Name() == k.Experiment })
				})
			}
			if i < 0 {
				add(q+".experiment", "%q is not an experiment of the study (nor a point <experiment>@<param>=<value> of a sweep)", k.Experiment)
			} else if schemes := exps[i].Schemes; !(len(schemes) == 0 && k.Scheme == AsIs) && !slices.Contains(schemes, k.Scheme) {
				add(q+".scheme", "%q is not a scheme of experiment %q", k.Scheme, k.Experiment)
			} else if k.Versus != "" && !slices.Contains(schemes, k.Versus) {
				add(q+".versus", "%q is not a scheme of experiment %q", k.Versus, k.Experiment)
			} else if k.Versus == k.Scheme && k.Versus != "" {
				add(q+".versus", "%q: a scheme against itself", k.Versus)
			}
			if k.KPI == "" {
				add(q+".kpi", "missing (a KPI of study.json, docs/study.md)")
			}
			if !slices.Contains(claimOps, k.Op) {
				add(q+".op", "%q: one of %s", k.Op, strings.Join(claimOps, ", "))
			}
		}
	}
}

// evalClaims gives every claim its verdict from the aggregated results; raised lists the study file's raises of
// n, shown with the claims that read those experiments.
func evalClaims(claims []Claim, r *Result, raised []NRaise) []ClaimResult {
	out := []ClaimResult{}
	for _, c := range claims {
		cr := ClaimResult{ID: c.ID, Text: strings.TrimSpace(c.Text)}
		if c.NotMeasurable != "" {
			cr.Verdict, cr.Reason = VerdictNotMeasurable, c.NotMeasurable
			out = append(out, cr)
			continue
		}
		for _, k := range c.Checks {
			for _, k := range expandCheck(k, r) {
				cr.Checks = append(cr.Checks, evalCheck(k, r))
			}
			for _, n := range raised {
				if n.Experiment == strings.SplitN(k.Experiment, "@", 2)[0] && !slices.Contains(cr.NRaised, n) {
					cr.NRaised = append(cr.NRaised, n)
				}
			}
		}
		cr.Verdict = VerdictSupported
		for _, v := range []string{VerdictPending, VerdictNotMeasurable, VerdictInconclusive, VerdictRefuted} {
			// The worst verdict of the checks, in this order of precedence (a refuted check refutes the claim).
			if slices.ContainsFunc(cr.Checks, func(k CheckResult) bool { return k.Verdict == v }) {
				cr.Verdict = v
			}
		}
		cr.Provisional = slices.ContainsFunc(cr.Checks, func(k CheckResult) bool { return k.Pending > 0 })
		out = append(out, cr)
	}
	return out
}

// expandCheck turns a check of a sweep experiment, named without a point, into one check per point of the sweep
// (the claim then holds only where it holds at every value); any other check stays as it is.
func expandCheck(k ClaimCheck, r *Result) []ClaimCheck {
	var out []ClaimCheck
	for _, e := range r.Experiments {
		if e.Name == k.Experiment {
			return []ClaimCheck{k}
		}
		if base, _, ok := strings.Cut(e.Name, "@"); ok && base == k.Experiment {
			p := k
			p.Experiment = e.Name
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return []ClaimCheck{k}
	}
	return out
}

// variantOf is the result of one scheme of one experiment, or nil.
func variantOf(r *Result, exp, scheme string) *VariantResult {
	for i := range r.Experiments {
		if r.Experiments[i].Name != exp {
			continue
		}
		for j := range r.Experiments[i].Variants {
			if r.Experiments[i].Variants[j].Variant == scheme {
				return &r.Experiments[i].Variants[j]
			}
		}
	}
	return nil
}

// paired is the summary of the per-seed differences of a KPI between two schemes (nil when no seed has both).
func paired(m, w *compare.RepeatMetric, v, vs *VariantResult) *stats.Summary {
	byseed := map[int64]float64{}
	for i, s := range vs.Seeds {
		if i < len(w.Stat.PerRun) && w.Stat.PerRun[i] != nil {
			byseed[s] = *w.Stat.PerRun[i]
		}
	}
	var a, b []float64
	for i, s := range v.Seeds {
		x, ok := byseed[s]
		if i >= len(m.Stat.PerRun) || m.Stat.PerRun[i] == nil || !ok {
			continue
		}
		a, b = append(a, *m.Stat.PerRun[i]), append(b, x)
	}
	st, err := stats.Paired(a, b, isShare(m.Name, m.Unit) && m.Per == "run", uint64(len(a)))
	if err != nil {
		return nil
	}
	return &st
}

func evalCheck(k ClaimCheck, r *Result) CheckResult {
	cr := CheckResult{ClaimCheck: k, Verdict: VerdictPending}
	v := variantOf(r, k.Experiment, k.Scheme)
	var vs *VariantResult
	if k.Versus != "" {
		vs = variantOf(r, k.Experiment, k.Versus)
	}
	if v == nil || k.Versus != "" && vs == nil { // not in this plan (a --quick study that leaves the experiment out)
		return cr
	}
	cr.Runs, cr.Pending, cr.Invalid = v.Runs, v.Pending+v.Failed, v.Invalid
	if vs != nil {
		cr.Runs, cr.Pending, cr.Invalid = min(v.Runs, vs.Runs), max(cr.Pending, vs.Pending+vs.Failed), v.Invalid+vs.Invalid
	}
	if cr.Runs == 0 {
		if cr.Invalid > 0 { // runs were made, none valid: no evidence either way
			cr.Verdict = VerdictInconclusive
		}
		return cr
	}
	m := v.Metric(k.KPI)
	if m == nil {
		cr.Verdict = VerdictNotMeasurable
		return cr
	}
	st := &m.Stat
	if vs != nil {
		w := vs.Metric(k.KPI)
		if w == nil {
			cr.Verdict = VerdictNotMeasurable
			return cr
		}
		if st = paired(m, w, v, vs); st == nil {
			cr.Verdict = VerdictNotMeasurable
			return cr
		}
	}
	cr.Runs, cr.Mean, cr.Method = st.Runs, fp(st.Mean), st.Method
	if st.MeanCI == nil { // one run: no interval, no verdict
		cr.Verdict = VerdictInconclusive
		return cr
	}
	lo, hi := st.MeanCI.Low, st.MeanCI.High
	cr.CILow, cr.CIHigh = fp(lo), fp(hi)
	holds := func(x float64) bool {
		switch k.Op {
		case ">=":
			return x >= k.Value
		case "<=":
			return x <= k.Value
		case ">":
			return x > k.Value
		}
		return x < k.Value
	}
	// The whole interval on one side of the bound decides (a bound the operator includes, as in <= 0, is on the
	// claim's side: a count of 0 in every run supports <= 0); an interval across it decides nothing.
	switch {
	case holds(lo) && holds(hi):
		cr.Verdict = VerdictSupported
	case !holds(lo) && !holds(hi):
		cr.Verdict = VerdictRefuted
	default:
		cr.Verdict = VerdictInconclusive
	}
	return cr
}

// claimsMarkdown writes the claims' table (heading level h).
func claimsMarkdown(b *bytes.Buffer, claims []ClaimResult, h string) {
	if len(claims) == 0 {
		return
	}
	fmt.Fprintf(b, "%s The study's claims against these runs\n\n", h)
	b.WriteString("Made by `imslab study` from study.json and the study file's `claims` (docs/study.md, \"Claims\"), " +
		"not typed: a check reads the mean of a KPI over the runs through its 95 % CI (Student's t for a mean, " +
		"cluster-robust t for a per-user one, Clopper–Pearson on an effective n for a share; with `versus`, the " +
		"difference of two schemes seed by seed: docs/study.md); **supported** when the whole interval is on the " +
		"claim's side of the bound, **refuted** when it is all on the other side, **inconclusive** when it " +
		"straddles the bound, and with one run. A claim is as strong as its weakest check; *provisional* while runs it " +
		"reads are pending or failed; an n raised after runs were made is said with the verdict.\n\n")
	b.WriteString("| claim | verdict | checks: mean [95 % CI] (n runs) |\n|---|---|---|\n")
	for _, c := range claims {
		verdict := "**" + c.Verdict + "**"
		if c.Provisional {
			verdict += " (provisional)"
		}
		for _, n := range c.NRaised {
			verdict += "<br>" + oneCell(n.String())
		}
		var checks []string
		for _, k := range c.Checks {
			m := "no value"
			switch {
			case k.Mean != nil && k.CILow == nil:
				m = num(*k.Mean) + " [no CI: 1 run]"
			case k.Mean != nil:
				m = fmt.Sprintf("%s [%s, %s] %s", num(*k.Mean), num(*k.CILow), num(*k.CIHigh), k.Method)
			}
			s := fmt.Sprintf("%s, `%s`: `%s` %s %g: %s (%d runs", k.Experiment, k.Schemes(), k.KPI, k.Op, k.Value, m, k.Runs)
			if k.Pending > 0 {
				s += fmt.Sprintf(", %d pending or failed", k.Pending)
			}
			if k.Invalid > 0 {
				s += fmt.Sprintf(", %d invalid left out", k.Invalid)
			}
			checks = append(checks, s+") → "+k.Verdict)
		}
		if c.Reason != "" {
			checks = append(checks, oneCell(c.Reason))
		}
		fmt.Fprintf(b, "| `%s`: %s | %s | %s |\n", c.ID, oneCell(c.Text), verdict, strings.Join(checks, "<br>"))
	}
	b.WriteString("\n")
}

// oneCell makes s fit one table cell.
func oneCell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", "\\|")
}

// NRaise records that an experiment's n (its repeat) was raised after runs were made: a verdict read after a
// look at the results says so (docs/study.md, "Declared n").
type NRaise struct {
	Experiment string `yaml:"experiment" json:"experiment"`
	From       int    `yaml:"from" json:"from"`
	To         int    `yaml:"to" json:"to"`
	Why        string `yaml:"why" json:"why"`
}

func (n NRaise) String() string {
	return fmt.Sprintf("n raised from %d to %d after runs were made (%s): %s", n.From, n.To, n.Experiment,
		strings.TrimSpace(n.Why))
}

// checkNRaised validates the file's n_raised against its experiments.
func checkNRaised(add func(field, format string, args ...any), raised []NRaise, exps []Experiment) {
	for i, n := range raised {
		p := fmt.Sprintf("n_raised[%d]", i)
		j := slices.IndexFunc(exps, func(e Experiment) bool { return e.Name == n.Experiment })
		if j < 0 {
			add(p+".experiment", "%q is not an experiment of the study", n.Experiment)
			continue
		}
		if n.From < 1 || n.To <= n.From {
			add(p, "from %d to %d: want 1 ≤ from < to", n.From, n.To)
		} else if n.To > exps[j].Repeat {
			add(p+".to", "%d: more than the experiment's repeat %d", n.To, exps[j].Repeat)
		}
		if strings.TrimSpace(n.Why) == "" {
			add(p+".why", "missing: say why n was raised (a raise after an inconclusive verdict must be said)")
		}
	}
}
