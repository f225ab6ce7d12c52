package compose

import "time"

// MarkUp makes l.Down act as on a started lab (the specs of Down's end, with a stand-in docker on PATH).
func MarkUp(l *Lab) {
	l.mu.Lock()
	l.up = true
	l.mu.Unlock()
}

// SetDownRetryWait sets the wait between two refused removals of a project; it returns the restore.
func SetDownRetryWait(d time.Duration) func() {
	old := downRetryWait
	downRetryWait = d
	return func() { downRetryWait = old }
}
