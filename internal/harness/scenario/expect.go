package scenario

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Expectation is one check of a run's summary: Metric Op Value (or Op the value of the metric ValueOf, times
// Times). Metrics are dotted paths of the report's summary.json (docs/scenarios.md lists them), e.g.
// "mo.taken_over_before_reregistration" or "time_to_detect_s.bac".
type Expectation struct {
	// Name says what is checked, in words (default: the metric).
	Name   string `yaml:"name" json:"name"`
	Metric string `yaml:"metric" json:"metric"`
	// Op is one of >=, <=, ==, >, <.
	Op string `yaml:"op" json:"op"`
	// Value is the number to compare with; exactly one of Value and ValueOf.
	Value *float64 `yaml:"value" json:"value,omitempty"`
	// ValueOf names another metric to compare with.
	ValueOf string `yaml:"value_of" json:"value_of,omitempty"`
	// Times scales ValueOf (default 1): {metric: mo.succeeded, op: ">=", value_of: mo.attempts, times: 0.99}.
	Times *float64 `yaml:"times" json:"times,omitempty"`
}

// Ops lists the comparison operators of expectations.
var Ops = []string{">=", "<=", "==", ">", "<"}

func (e Expectation) validate(v *validator, field string) {
	if e.Metric == "" {
		v.add(field+".metric", "missing")
	}
	if !slices.Contains(Ops, e.Op) {
		v.add(field+".op", "%q is not one of %q", e.Op, Ops)
	}
	switch {
	case e.Value == nil && e.ValueOf == "":
		v.add(field+".value", "missing: give value (a number) or value_of (a metric)")
	case e.Value != nil && e.ValueOf != "":
		v.add(field+".value_of", "give value or value_of, not both")
	case e.Value != nil && (math.IsNaN(*e.Value) || math.IsInf(*e.Value, 0)):
		v.add(field+".value", "must be a finite number")
	}
	if e.Times != nil && e.ValueOf == "" {
		v.add(field+".times", "only scales value_of")
	}
}

// Title is the expectation's name, or its metric when it has none.
func (e Expectation) Title() string {
	if e.Name != "" {
		return e.Name
	}
	return e.Metric
}

// Expected describes the right-hand side: ">= 0.99", ">= affected_users", ">= 0.99 × mo.attempts".
func (e Expectation) Expected() string {
	switch {
	case e.ValueOf != "" && e.Times != nil:
		return fmt.Sprintf("%s %s × %s", e.Op, formatNum(*e.Times), e.ValueOf)
	case e.ValueOf != "":
		return e.Op + " " + e.ValueOf
	case e.Value != nil:
		return e.Op + " " + formatNum(*e.Value)
	}
	return e.Op + " ?"
}

// Metrics gives a run's numeric KPIs by dotted path (report.Summary implements it).
type Metrics interface {
	Lookup(path string) (float64, bool)
}

// Result is the outcome of one expectation.
type Result struct {
	Expectation
	// Actual is the metric's value (absent when the summary has no such metric).
	Actual *float64 `json:"actual"`
	// Want is the number compared with (the value, or the other metric's value × times).
	Want *float64 `json:"want"`
	OK   bool     `json:"ok"`
	// Reason explains a failure that is not a plain comparison (a missing metric).
	Reason string `json:"reason,omitempty"`
}

// ValueText is the metric's value as the tables print it, "-" when the summary has no such metric.
func (r Result) ValueText() string {
	if r.Actual == nil {
		return "-"
	}
	return formatNum(*r.Actual)
}

// ExpectedText is the comparison as the tables print it, with the other metric's value when there is one:
// ">= 0.99", ">= affected_users (11)".
func (r Result) ExpectedText() string {
	exp := r.Expected()
	if r.ValueOf != "" && r.Want != nil {
		exp += " (" + formatNum(*r.Want) + ")"
	}
	return exp
}

// Evaluate checks every expectation against the run's metrics. A metric the summary does not have fails its
// expectation (with a Reason).
func Evaluate(exps []Expectation, m Metrics) []Result {
	out := make([]Result, 0, len(exps))
	for _, e := range exps {
		r := Result{Expectation: e}
		if v, ok := m.Lookup(e.Metric); ok {
			r.Actual = &v
		} else {
			r.Reason = fmt.Sprintf("the summary has no metric %q", e.Metric)
		}
		switch {
		case e.ValueOf != "":
			if v, ok := m.Lookup(e.ValueOf); ok {
				if e.Times != nil {
					v *= *e.Times
				}
				r.Want = &v
			} else if r.Reason == "" {
				r.Reason = fmt.Sprintf("the summary has no metric %q", e.ValueOf)
			}
		case e.Value != nil:
			v := *e.Value
			r.Want = &v
		}
		if r.Actual != nil && r.Want != nil {
			r.OK = compare(*r.Actual, e.Op, *r.Want)
		}
		out = append(out, r)
	}
	return out
}

// Passed reports whether every result holds.
func Passed(results []Result) bool {
	for _, r := range results {
		if !r.OK {
			return false
		}
	}
	return true
}

// eqTolerance absorbs floating-point noise in == (ratios computed from counts).
const eqTolerance = 1e-9

func compare(a float64, op string, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return false
	}
	switch op {
	case ">=":
		return a >= b-eqTolerance
	case "<=":
		return a <= b+eqTolerance
	case "==":
		return math.Abs(a-b) <= eqTolerance*math.Max(1, math.Abs(b))
	case ">":
		return a > b
	case "<":
		return a < b
	}
	return false
}

func formatNum(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
