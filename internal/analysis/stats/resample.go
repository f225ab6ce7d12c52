package stats

import "math/rand/v2"

// Resample draws resamples bootstrap resamples of n runs with replacement and calls fn with each (idx: n run
// indices, reused between calls). The generator is seeded from seed as Clustered's is, so a statistic
// bootstrapped this way (a curve's band) is reproducible. Nothing is called when n or resamples is below 1.
func Resample(n int, seed uint64, resamples int, fn func(idx []int)) {
	if n < 1 || resamples < 1 {
		return
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e9955bd1e995))
	idx := make([]int, n)
	for range resamples {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		fn(idx)
	}
}

// PercentileBand returns the (1−Level)/2 and 1−(1−Level)/2 empirical quantiles of x (sorted in place): the
// percentile-bootstrap interval of a statistic whose resampled values are x.
func PercentileBand(x []float64) Interval {
	if len(x) == 0 {
		return Interval{}
	}
	return *percentileInterval(x)
}
