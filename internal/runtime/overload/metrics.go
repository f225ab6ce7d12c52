package overload

import "github.com/prometheus/client_golang/prometheus"

// Collectors returns the controller's Prometheus metrics, read from its counters at every scrape:
//
//	overload_requests_admitted_total              new requests admitted
//	overload_requests_shed_total{reason}          new requests shed: reason "lag", "in_flight", "rate" or "chain"
//	overload_in_flight                            admitted new requests not finished
//	overload_lag_seconds                          smoothed scheduling lag
//	overload_shed_share                           share of new requests shed now on lag
//	overload_chain_seconds                        median answer time of the core behind an access node
//	overload_chain_limit                          cap on phones' new requests per second it put in place (0: none)
func (c *Controller) Collectors() []prometheus.Collector {
	counter := func(name, help string, labels prometheus.Labels, f func(Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "overload", Name: name, Help: help,
			ConstLabels: labels}, func() float64 { return float64(f(c.Stats())) })
	}
	gauge := func(name, help string, f func(Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "overload", Name: name, Help: help},
			func() float64 { return f(c.Stats()) })
	}
	const shedHelp = "New requests shed (503 with Retry-After, or DIAMETER_TOO_BUSY), by reason."
	return []prometheus.Collector{
		counter("requests_admitted_total", "New requests admitted.", nil, func(s Stats) uint64 { return s.Admitted }),
		counter("requests_shed_total", shedHelp, prometheus.Labels{"reason": "lag"},
			func(s Stats) uint64 { return s.ShedLag }),
		counter("requests_shed_total", shedHelp, prometheus.Labels{"reason": "in_flight"},
			func(s Stats) uint64 { return s.ShedInFlight }),
		counter("requests_shed_total", shedHelp, prometheus.Labels{"reason": "rate"},
			func(s Stats) uint64 { return s.ShedRate }),
		counter("requests_shed_total", shedHelp, prometheus.Labels{"reason": "chain"},
			func(s Stats) uint64 { return s.ShedChain }),
		gauge("chain_seconds", "Median answer time of the core behind an access node (last window with samples).",
			func(s Stats) float64 { return s.Chain.Seconds() }),
		gauge("chain_limit", "Cap on phones' new requests per second from the core's answer time (0: none).",
			func(s Stats) float64 { return s.ChainLimit }),
		gauge("in_flight", "Admitted new requests not finished.", func(s Stats) float64 { return float64(s.InFlight) }),
		gauge("lag_seconds", "Smoothed scheduling lag.", func(s Stats) float64 { return s.Lag.Seconds() }),
		gauge("shed_share", "Share of new requests shed now on lag.", func(s Stats) float64 { return s.ShedShare }),
	}
}
