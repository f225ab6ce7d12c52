package lab

import (
	"fmt"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// labEvents is the lab's events file (events/lab.jsonl). Record writes a typed event of the catalogue.
type labEvents struct{ rec *obs.Recorder }

// Record records ev.
func (e labEvents) Record(ev obs.Event) { e.rec.Emit(ev) }

// Close closes the file.
func (e labEvents) Close() error { return e.rec.Close() }

// Emit is a shim for the one call that still passes a kind and a map (build.go's lab_build, in a file this
// change may not edit): it turns them into the catalogue's obs.LabBuild, so that no map reaches the recorder.
// Replace that call with l.events.Record(obs.LabBuild{Packages: pkgs, TookMs: …}) and delete this method.
func (e labEvents) Emit(kind string, fields map[string]any) {
	if kind != (obs.LabBuild{}).Kind() {
		panic(fmt.Sprintf("lab: event %q recorded with a map: use Record with the catalogue's type", kind))
	}
	pkgs, _ := fields["packages"].([]string)
	took, _ := fields["took_ms"].(int64)
	e.Record(obs.LabBuild{Packages: pkgs, TookMs: took})
}
