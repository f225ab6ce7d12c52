package study

import "github.com/imslab/quasipool/internal/analysis/report"

// RestoreTimes exposes restoreTimes to the tests: a run's per-user restoration times, restored flags and source.
func RestoreTimes(s *report.Summary) ([]float64, []bool, string) {
	u, src := restoreTimes(s)
	return u.t, u.restored, src
}

// CurveBand exposes curveBand: runs[i] are run i's users (times, restored flags).
func CurveBand(times [][]float64, restored [][]bool, grid []float64, seed uint64) (lo, hi []float64) {
	runs := make([]userTimes, len(times))
	for i := range times {
		runs[i] = userTimes{t: times[i], restored: restored[i]}
	}
	return curveBand(runs, grid, seed)
}
