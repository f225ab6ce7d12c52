package study

import "github.com/imslab/quasipool/internal/report"

// RestoreTimes exposes restoreTimes to the tests: a run's per-user restoration times, restored flags and source.
func RestoreTimes(s *report.Summary) ([]float64, []bool, string) {
	u, src := restoreTimes(s)
	return u.t, u.restored, src
}
