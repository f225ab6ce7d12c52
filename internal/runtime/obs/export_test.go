package obs

import (
	"io"
	"time"
)

// NewRecorderAt is NewRecorder with a clock.
func NewRecorderAt(w io.Writer, node string, now func() time.Time) *Recorder {
	return &Recorder{w: w, node: node, now: now}
}
