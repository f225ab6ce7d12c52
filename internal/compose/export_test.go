package compose

// MarkUp makes l.Down act as on a started lab (the specs of Down's end, with a stand-in docker on PATH).
func MarkUp(l *Lab) {
	l.mu.Lock()
	l.up = true
	l.mu.Unlock()
}
