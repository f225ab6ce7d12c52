package pool

import "time"

// Record is record for the specs: one wake-up at at, lag late.
func (m *LagMonitor) Record(at time.Time, lag time.Duration) { m.record(at, lag) }
