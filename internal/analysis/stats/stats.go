// Package stats summarises a measurement repeated over several runs: median, mean, 95 % confidence intervals,
// min/max and, with enough values, the 95th percentile (docs/compare.md, "Repetitions").
//
// The unit of repetition is the run. A metric may have one value per run (the time to detect a fault, the share
// of users taken over) or one value per user in every run (each affected user's interruption); the users of one
// run share its fault instant, its probe phases and its load, so they are not independent draws. The interval
// of a mean is Student's t over the runs, or for a per-user metric a cluster-robust t with the runs as clusters;
// a share's is Clopper–Pearson on an effective n (Share); a difference of two schemes run with the same seeds is
// paired (Paired). Only the median's interval is a percentile bootstrap, resampling whole runs.
package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Bootstrap settings.
const (
	// Resamples is the number of bootstrap resamples of the runs.
	Resamples = 2000
	// Level is the confidence level of the intervals.
	Level = 0.95
	// MinForP95 is the number of values from which the 95th percentile is given: below it the p95 of a sample is
	// its maximum or next to it, and says nothing the max does not.
	MinForP95 = 20
)

// Summary is one metric over the runs of a repetition.
type Summary struct {
	// Runs is the number of runs with at least one value; Values the number of values (users, for a per-user
	// metric; equal to Runs for a per-run one).
	Runs   int `json:"n_runs"`
	Values int `json:"n_values"`
	// Median and Mean of all values (a per-user metric pools the users of every run).
	Median float64 `json:"median"`
	Mean   float64 `json:"mean"`
	// MeanCI is the 95 % interval of the mean, made as Method says (t, cluster-robust t, Clopper–Pearson);
	// MedianCI the percentile-bootstrap interval of the median, resampling whole runs. Both are absent with
	// fewer than two runs.
	MeanCI   *Interval `json:"mean_ci95,omitempty"`
	MedianCI *Interval `json:"median_ci95,omitempty"`
	Method   string    `json:"ci_method,omitempty"`
	// NEff is the number of trials behind a Clopper–Pearson interval (Korn–Graubard's effective n of users, or
	// the runs); DesignEffect the design effect the users were divided by.
	NEff         *float64 `json:"n_eff,omitempty"`
	DesignEffect *float64 `json:"design_effect,omitempty"`
	Min          float64  `json:"min"`
	Max          float64  `json:"max"`
	// P95 is the empirical 95th percentile, given only from MinForP95 values.
	P95 *float64 `json:"p95,omitempty"`
	// PerRun is each run's own mean (its single value for a per-run metric), in run order; nil (JSON null) for a
	// run without values.
	PerRun []*float64 `json:"per_run"`
}

// Interval is a confidence interval.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// HalfWidth is half the interval's width: the "±" of a table.
func (i Interval) HalfWidth() float64 { return (i.High - i.Low) / 2 }

// Contains reports whether x lies in the interval (ends included).
func (i Interval) Contains(x float64) bool { return i.Low <= x && x <= i.High }

// ErrNoValues is returned when no run has a value.
var ErrNoValues = errors.New("stats: no values")

// PerRun summarises a metric with one value per run (NaN: the run has none).
func PerRun(values []float64, seed uint64) (Summary, error) {
	groups := make([][]float64, len(values))
	for i, v := range values {
		if !math.IsNaN(v) {
			groups[i] = []float64{v}
		}
	}
	return Clustered(groups, seed)
}

// Clustered summarises a metric with any number of values per run (groups[i]: the values of run i): the mean's
// interval is Student's t over the runs when every run has one value, else the cluster-robust t. The median's
// bootstrap draws runs with replacement from a generator seeded with seed, so a summary is reproducible.
func Clustered(groups [][]float64, seed uint64) (Summary, error) {
	return ClusteredN(groups, seed, Resamples)
}

// ClusteredN is Clustered with the given number of bootstrap resamples (at least 100).
func ClusteredN(groups [][]float64, seed uint64, resamples int) (Summary, error) {
	resamples = max(resamples, 100)
	var all []float64
	var runs [][]float64
	s := Summary{PerRun: make([]*float64, len(groups))}
	for i, g := range groups {
		var vals []float64
		for _, v := range g {
			if !math.IsNaN(v) {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			continue
		}
		m := stat.Mean(vals, nil)
		s.PerRun[i] = &m
		runs = append(runs, vals)
		all = append(all, vals...)
	}
	if len(all) == 0 {
		return Summary{}, ErrNoValues
	}
	slices.Sort(all)
	s.Runs, s.Values = len(runs), len(all)
	s.Mean = stat.Mean(all, nil)
	s.Median = Median(all)
	s.Min, s.Max = all[0], all[len(all)-1]
	if len(all) >= MinForP95 {
		p := stat.Quantile(0.95, stat.Empirical, all, nil)
		s.P95 = &p
	}
	if len(runs) >= 2 {
		s.MedianCI = bootstrap(runs, seed, resamples)
		s.MeanCI, s.Method = clusterT(runs), MethodT
		if len(all) > len(runs) {
			s.Method = MethodClusterT
		}
	}
	return s, nil
}

// Median is the middle value of sorted x, the mean of the two middle ones for an even count (gonum's Empirical
// quantile would give the lower one).
func Median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// bootstrap returns the percentile interval of the median of the pooled values, resampling runs.
func bootstrap(runs [][]float64, seed uint64, resamples int) *Interval {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e9955bd1e995))
	medians := make([]float64, resamples)
	var pool []float64
	for b := range resamples {
		pool = pool[:0]
		for range runs {
			pool = append(pool, runs[rng.IntN(len(runs))]...)
		}
		slices.Sort(pool)
		medians[b] = Median(pool)
	}
	return percentileInterval(medians)
}

func percentileInterval(x []float64) *Interval {
	slices.Sort(x)
	a := (1 - Level) / 2
	return &Interval{Low: stat.Quantile(a, stat.Empirical, x, nil), High: stat.Quantile(1-a, stat.Empirical, x, nil)}
}
