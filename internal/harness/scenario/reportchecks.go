package scenario

import "github.com/imslab/quasipool/internal/analysis/report"

// ReportChecks makes report.Build list the scenario's expectations, evaluated by eval against the run's summary,
// in report.md and report.html (nil eval: none).
func ReportChecks(eval Evaluator) report.Option {
	return report.WithChecks(func(s *report.Summary) []report.Check {
		if eval == nil {
			return nil
		}
		results := eval(s)
		checks := make([]report.Check, len(results))
		for i, r := range results {
			checks[i] = report.Check{Name: r.Title(), Metric: r.Metric, Value: r.ValueText(), Expected: r.ExpectedText(),
				OK: r.OK, Reason: r.Reason}
		}
		return checks
	})
}
