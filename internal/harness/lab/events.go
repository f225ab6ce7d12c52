package lab

import (
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// labEvents is the lab's events file (events/lab.jsonl). Record writes a typed event of the catalogue.
type labEvents struct{ rec *obs.Recorder }

// Record records ev.
func (e labEvents) Record(ev obs.Event) { e.rec.Emit(ev) }

// Close closes the file.
func (e labEvents) Close() error { return e.rec.Close() }
