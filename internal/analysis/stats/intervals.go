package stats

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Interval methods (Summary.Method): how a summary's MeanCI was made (docs/compare.md, "Repetitions").
const (
	// MethodT is Student's t on the runs' values: mean ± t(n−1) · s/√n.
	MethodT = "t"
	// MethodClusterT is the cluster-robust t of a mean pooled over the users of every run: the runs are the
	// clusters (their users share the fault instant and the load), t with runs − 1 degrees of freedom.
	MethodClusterT = "cluster-robust t"
	// MethodSharesUsers is Clopper–Pearson on Korn–Graubard's effective n, the users the shares were measured on
	// over the design effect estimated from the spread between runs.
	MethodSharesUsers = "Clopper–Pearson, effective n of users"
	// MethodSharesRuns is Clopper–Pearson with the runs as the trials (the users behind each run's share are
	// unknown).
	MethodSharesRuns = "Clopper–Pearson, runs as trials"
	// MethodPairedT is Student's t on the per-seed differences of two schemes.
	MethodPairedT = "paired t"
	// MethodPairedShares is Clopper–Pearson on (d+1)/2 of the per-seed differences d of two shares, pairs as
	// the trials, mapped back to [−1, 1].
	MethodPairedShares = "Clopper–Pearson on (d+1)/2, pairs as trials"
)

// MedianMethod is how MedianCI is made: a percentile bootstrap that resamples whole runs.
const MedianMethod = "percentile bootstrap over runs"

// ErrNotShare is returned by Share for a value outside [0, 1].
var ErrNotShare = errors.New("stats: a share outside [0, 1]")

// tQuantile is the 1−(1−Level)/2 quantile of Student's t with df degrees of freedom.
func tQuantile(df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - (1-Level)/2)
}

// zQuantile is the standard normal's 1−(1−Level)/2 quantile (1.96).
func zQuantile() float64 { return distuv.UnitNormal.Quantile(1 - (1-Level)/2) }

// TInterval is Student's t interval of the mean of x (nil below two values).
func TInterval(x []float64) *Interval {
	if len(x) < 2 {
		return nil
	}
	m, sd := stat.MeanStdDev(x, nil)
	h := tQuantile(float64(len(x)-1)) * sd / math.Sqrt(float64(len(x)))
	return &Interval{Low: m - h, High: m + h}
}

// clusterT is the cluster-robust t interval of the mean of every value of every run (runs[i]: run i's values,
// none empty): V = G/(G−1) · Σ_g (Σ_j (y_gj − ȳ))² / N², t with G−1 degrees of freedom. With one value per run it
// is TInterval of the runs' values.
func clusterT(runs [][]float64) *Interval {
	g := len(runs)
	if g < 2 {
		return nil
	}
	var n, sum float64
	for _, r := range runs {
		for _, v := range r {
			sum += v
			n++
		}
	}
	mean := sum / n
	var ss float64
	for _, r := range runs {
		var u float64
		for _, v := range r {
			u += v - mean
		}
		ss += u * u
	}
	v := float64(g) / float64(g-1) * ss / (n * n)
	h := tQuantile(float64(g-1)) * math.Sqrt(v)
	return &Interval{Low: mean - h, High: mean + h}
}

// ClopperPearson is the exact binomial interval of x successes in n trials; x and n may be fractional (an
// effective n), through the Beta quantiles. It has non-zero width for any n > 0.
func ClopperPearson(x, n float64) Interval {
	a := (1 - Level) / 2
	x = min(max(x, 0), n)
	iv := Interval{Low: 0, High: 1}
	if x > 0 {
		iv.Low = distuv.Beta{Alpha: x, Beta: n - x + 1}.Quantile(a)
	}
	if x < n {
		iv.High = distuv.Beta{Alpha: x + 1, Beta: n - x}.Quantile(1 - a)
	}
	return iv
}

// EffectiveN is Korn and Graubard's effective number of trials behind the mean p of shares measured on runs
// (values: each run's share; users: the trials each was measured on, N in all): N over the design effect, the
// variance between runs (s²/G) against the binomial p(1−p)/N, floored at 1 (a design effect below 1 would
// claim more trials than there were); then times their degrees-of-freedom factor (z/t(G−1))², which widens
// the interval as a t would at G runs. The design effect is 1 when p is 0 or 1 (nothing to estimate it from).
func EffectiveN(values, users []float64) (neff, deff float64) {
	g := len(values)
	var n float64
	for _, u := range users {
		n += u
	}
	p := stat.Mean(values, nil)
	deff = 1
	if bin := p * (1 - p) / n; bin > 0 && g >= 2 {
		deff = max(1, stat.Variance(values, nil)/float64(g)/bin)
	}
	df := 1.0
	if g >= 2 {
		df = math.Pow(zQuantile()/tQuantile(float64(g-1)), 2)
	}
	return n / deff * df, deff
}

// Share summarises a share with one value per run (NaN: the run has none) as PerRun does, but its MeanCI is
// Clopper–Pearson: on Korn–Graubard's effective n (EffectiveN) when users gives every run's number of trials (the
// probed users behind a restoration share), with the runs as the trials otherwise (users nil, or a run without
// its count). No interval of two or more runs has zero width; with one run there is none.
func Share(values, users []float64, seed uint64) (Summary, error) {
	s, err := PerRun(values, seed)
	if err != nil {
		return s, err
	}
	var vals, trials []float64
	byUsers := users != nil
	for i, v := range values {
		if math.IsNaN(v) {
			continue
		}
		if v < 0 || v > 1 {
			return Summary{}, fmt.Errorf("%w: %g", ErrNotShare, v)
		}
		vals = append(vals, v)
		if byUsers && (i >= len(users) || !(users[i] > 0)) {
			byUsers = false
		}
		if byUsers {
			trials = append(trials, users[i])
		}
	}
	if len(vals) < 2 {
		s.MeanCI, s.Method = nil, ""
		return s, nil
	}
	if byUsers {
		neff, deff := EffectiveN(vals, trials)
		iv := ClopperPearson(s.Mean*neff, neff)
		s.MeanCI, s.Method, s.NEff, s.DesignEffect = &iv, MethodSharesUsers, &neff, &deff
		return s, nil
	}
	n := float64(len(vals))
	iv := ClopperPearson(s.Mean*n, n)
	s.MeanCI, s.Method, s.NEff = &iv, MethodSharesRuns, &n
	return s, nil
}

// Paired summarises the per-seed differences a[i] − b[i] of two schemes run with the same seeds (NaN in either:
// no pair). Means get a paired t interval; shares (share true: both in [0, 1]) Clopper–Pearson on (d+1)/2 with
// the pairs as the trials, mapped back to [−1, 1], so that no difference of two or more pairs has a zero-width
// interval. Its PerRun holds the differences.
func Paired(a, b []float64, share bool, seed uint64) (Summary, error) {
	if len(a) != len(b) {
		return Summary{}, fmt.Errorf("stats: paired: %d values against %d", len(a), len(b))
	}
	d := make([]float64, len(a))
	var ds []float64
	for i := range a {
		d[i] = math.NaN()
		if math.IsNaN(a[i]) || math.IsNaN(b[i]) {
			continue
		}
		if share && (a[i] < 0 || a[i] > 1 || b[i] < 0 || b[i] > 1) {
			return Summary{}, fmt.Errorf("%w: a pair %g, %g", ErrNotShare, a[i], b[i])
		}
		d[i] = a[i] - b[i]
		ds = append(ds, d[i])
	}
	s, err := PerRun(d, seed)
	if err != nil {
		return s, err
	}
	if len(ds) < 2 {
		s.MeanCI, s.Method = nil, ""
		return s, nil
	}
	if !share {
		s.Method = MethodPairedT
		return s, nil
	}
	n := float64(len(ds))
	iv := ClopperPearson((s.Mean+1)/2*n, n)
	s.MeanCI, s.Method, s.NEff = &Interval{Low: 2*iv.Low - 1, High: 2*iv.High - 1}, MethodPairedShares, &n
	return s, nil
}
