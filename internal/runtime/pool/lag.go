package pool

import (
	"context"
	"sync"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// LagSource tells how late this process ran: the largest delay of its own timers since t. A Health with one
// (WithLag) does not count a probe or transaction timeout against a peer when the process itself ran more than
// HealthConfig.LagExcuse late while it waited: on a saturated machine every goroutine of a starved process runs
// late, the handling of the peer's answer included, so the silence says nothing about the peer, and taking the peer
// down spreads the overload (docs/performance.md: near capacity the lab's nodes marked each other down and back up
// on missed probes and collapsed).
type LagSource interface {
	MaxLagSince(t time.Time) time.Duration
}

// LagMonitor is the LagSource of a process: a goroutine that sleeps Tick at a time and records by how much each
// wake-up came late. It keeps the last LagWindow of samples. The overload controller measures lag too
// (internal/runtime/overload), as a smoothed figure to shed on; the excuse needs the worst lateness over one probe's
// lifetime, which a smoothed figure hides, so the samples are kept here.
type LagMonitor struct {
	tick time.Duration
	rec  *obs.Recorder

	mu      sync.Mutex
	samples []lagSample // ring, oldest first after wrap
	next    int
	full    bool
	due     time.Time // when the running sleep should end: a wake-up still pending counts too
	lastEvt time.Time
	// statsMax is the worst lateness since the last lag_stats event, written every LagStatsInterval.
	statsMax  time.Duration
	lastStats time.Time
	// eventOver, when positive: a wake-up later than it records a "self_lag" event {lag_ms} (at most one a
	// second).
	eventOver time.Duration
}

type lagSample struct {
	at  time.Time
	lag time.Duration
}

// Lag monitor defaults.
const (
	DefaultLagTick = 50 * time.Millisecond
	LagWindow      = 30 * time.Second
	// LagStatsInterval is how often the monitor records its worst lateness (a lag_stats event), whatever it was.
	LagStatsInterval = 5 * time.Second
)

// NewLagMonitor returns a monitor waking every tick (DefaultLagTick when 0) that records a "self_lag" event in rec
// (nil: none) when a wake-up is more than eventOver late (0: never).
func NewLagMonitor(tick time.Duration, rec *obs.Recorder, eventOver time.Duration) *LagMonitor {
	if tick <= 0 {
		tick = DefaultLagTick
	}
	return &LagMonitor{tick: tick, rec: rec, eventOver: eventOver, samples: make([]lagSample, int(LagWindow/tick)+1)}
}

// Run samples until ctx ends.
func (m *LagMonitor) Run(ctx context.Context) {
	t := time.NewTimer(m.tick)
	defer t.Stop()
	m.mu.Lock()
	m.due = time.Now().Add(m.tick)
	m.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		m.mu.Lock()
		lag := max(now.Sub(m.due), 0)
		m.due = now.Add(m.tick)
		m.mu.Unlock()
		m.record(now, lag)
		t.Reset(m.tick)
	}
}

// record keeps one wake-up's lateness and records the self_lag event it calls for.
func (m *LagMonitor) record(at time.Time, lag time.Duration) {
	m.mu.Lock()
	m.samples[m.next] = lagSample{at: at, lag: lag}
	m.next = (m.next + 1) % len(m.samples)
	m.full = m.full || m.next == 0
	emit := m.eventOver > 0 && lag > m.eventOver && at.Sub(m.lastEvt) >= time.Second
	if emit {
		m.lastEvt = at
	}
	m.statsMax = max(m.statsMax, lag)
	if m.lastStats.IsZero() {
		m.lastStats = at
	}
	var stats *obs.LagStats
	if span := at.Sub(m.lastStats); span >= LagStatsInterval {
		stats = &obs.LagStats{MaxMs: float64(m.statsMax.Microseconds()) / 1000, IntervalS: span.Seconds()}
		m.statsMax, m.lastStats = 0, at
	}
	m.mu.Unlock()
	if emit && m.rec != nil {
		m.rec.Emit(obs.SelfLag{LagMs: lag.Milliseconds()})
	}
	if stats != nil && m.rec != nil {
		m.rec.Emit(*stats)
	}
}

// MaxLagSince returns the largest lateness of a wake-up at or after t, the one still pending included (how late
// the monitor is now, when it should have woken already).
func (m *LagMonitor) MaxLagSince(t time.Time) time.Duration {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	var worst time.Duration
	if !m.due.IsZero() {
		worst = max(now.Sub(m.due), 0)
	}
	n := m.next
	if m.full {
		n = len(m.samples)
	}
	for i := range n {
		s := m.samples[i]
		if !s.at.Before(t) && s.lag > worst {
			worst = s.lag
		}
	}
	return worst
}
