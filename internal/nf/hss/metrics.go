package hss

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/imslab/quasipool/internal/proto/cx"
)

// metrics are the HSS's Prometheus metrics, on its own registry (served at /metrics).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	refused  *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hss", Name: "cx_requests_total",
			Help: "Cx requests answered, by command, User-Authorization-Type or Server-Assignment-Type, and result.",
		}, []string{"cmd", "type", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "hss", Name: "cx_request_duration_seconds",
			Help:    "Time from a Cx request's arrival to its answer being written.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"cmd"}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "hss", Name: "cx_refused_total",
		Help: "Cx connections and requests refused because of who sent them or limits, by reason.",
	}, []string{"reason"})
	m.reg.MustRegister(m.requests, m.latency, m.refused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// typeLabel is "uat0".."uat2", "sat0".."sat11" or "" for a request without a type.
func typeLabel(x cx.Exchange) string {
	switch {
	case x.AuthType != nil:
		return "uat" + strconv.Itoa(int(*x.AuthType))
	case x.AssignmentType != nil:
		return "sat" + strconv.Itoa(int(*x.AssignmentType))
	}
	return ""
}

func (m *metrics) observe(x cx.Exchange) {
	m.requests.WithLabelValues(x.Command, typeLabel(x), x.Result.Label()).Inc()
	m.latency.WithLabelValues(x.Command).Observe(x.Duration.Seconds())
}
