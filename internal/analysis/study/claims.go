package study

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
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
type ClaimCheck struct {
	Experiment string  `yaml:"experiment" json:"experiment"`
	Scheme     string  `yaml:"scheme" json:"scheme"`
	KPI        string  `yaml:"kpi" json:"kpi"`
	Op         string  `yaml:"op" json:"op"` // >=, <=, >, <
	Value      float64 `yaml:"value" json:"value"`
}

func (c ClaimCheck) String() string {
	return fmt.Sprintf("%s, %s: %s %s %g", c.Experiment, c.Scheme, c.KPI, c.Op, c.Value)
}

// Verdicts of a claim or a check.
const (
	VerdictSupported     = "supported"      // the whole 95 % CI of the mean is on the claim's side of the bound
	VerdictRefuted       = "refuted"        // the whole CI is on the other side
	VerdictInconclusive  = "inconclusive"   // the CI straddles the bound
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
}

// CheckResult is one check's measurement and verdict.
type CheckResult struct {
	ClaimCheck `json:"check"`
	Verdict    string   `json:"verdict"`
	Mean       *float64 `json:"mean,omitempty"`
	CILow      *float64 `json:"ci_low,omitempty"`
	CIHigh     *float64 `json:"ci_high,omitempty"`
	Runs       int      `json:"n_runs"`
	Pending    int      `json:"pending"`
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

// evalClaims gives every claim its verdict from the aggregated results.
func evalClaims(claims []Claim, r *Result) []ClaimResult {
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

func evalCheck(k ClaimCheck, r *Result) CheckResult {
	cr := CheckResult{ClaimCheck: k, Verdict: VerdictPending}
	var v *VariantResult
	for i := range r.Experiments {
		if r.Experiments[i].Name != k.Experiment {
			continue
		}
		for j := range r.Experiments[i].Variants {
			if r.Experiments[i].Variants[j].Variant == k.Scheme {
				v = &r.Experiments[i].Variants[j]
			}
		}
	}
	if v == nil { // not in this plan (a --quick study that leaves the experiment out)
		return cr
	}
	cr.Runs, cr.Pending = v.Runs, v.Pending+v.Failed
	if v.Runs == 0 {
		return cr
	}
	m := v.Metric(k.KPI)
	if m == nil {
		cr.Verdict = VerdictNotMeasurable
		return cr
	}
	st := m.Stat
	cr.Runs = st.Runs
	lo, hi := st.Mean, st.Mean // one run: the value itself, no interval
	if st.MeanCI != nil {
		lo, hi = st.MeanCI.Low, st.MeanCI.High
	}
	cr.Mean, cr.CILow, cr.CIHigh = fp(st.Mean), fp(lo), fp(hi)
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
		"not typed: a check reads the mean of a KPI over the runs through its 95 % CI; **supported** when the whole " +
		"interval is on the claim's side of the bound, **refuted** when it is all on the other side, " +
		"**inconclusive** when it straddles the bound. A claim is as strong as its weakest check; *provisional* " +
		"while runs it reads are pending or failed.\n\n")
	b.WriteString("| claim | verdict | checks: mean [95 % CI] (n runs) |\n|---|---|---|\n")
	for _, c := range claims {
		verdict := "**" + c.Verdict + "**"
		if c.Provisional {
			verdict += " (provisional)"
		}
		var checks []string
		for _, k := range c.Checks {
			m := "no value"
			if k.Mean != nil {
				m = fmt.Sprintf("%s [%s, %s]", num(*k.Mean), num(*k.CILow), num(*k.CIHigh))
				if *k.CILow == *k.CIHigh && k.Runs < 2 {
					m = num(*k.Mean) + " [no CI: 1 run]"
				}
			}
			s := fmt.Sprintf("%s, `%s`: `%s` %s %g: %s (%d runs", k.Experiment, k.Scheme, k.KPI, k.Op, k.Value, m, k.Runs)
			if k.Pending > 0 {
				s += fmt.Sprintf(", %d pending or failed", k.Pending)
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
