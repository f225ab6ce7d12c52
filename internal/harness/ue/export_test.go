package ue

import "time"

// ArrivalsDue is the number of arrivals the call generator's schedule for seed and rate has due within d of
// its start: what a generator that keeps its schedule places in d.
func ArrivalsDue(seed int64, rate float64, d time.Duration) int64 {
	start := time.Unix(0, 0)
	a := newArrivals(seed, rate, start)
	var n int64
	for a.next().Sub(start) <= d {
		n++
	}
	return n
}

// SetStopGrace sets StopGrace for a spec and returns what restores it.
func SetStopGrace(d time.Duration) (restore func()) {
	old := stopGrace
	stopGrace = d
	return func() { stopGrace = old }
}
