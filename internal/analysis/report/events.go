package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// FileEvents is every node's events merged into one file in time order (one time base: t_ns).
const FileEvents = "events.jsonl"

// writeMergedEvents merges events/*.jsonl into <runDir>/events.jsonl, ordered by t_ns, lines kept verbatim. A line
// without a readable t_ns (torn by a kill) cannot be placed in time: it goes to the end, verbatim, so that the
// merged file keeps everything the nodes wrote and a rebuild reports it again as an event error.
func writeMergedEvents(runDir string) (int, error) {
	files, err := filepath.Glob(filepath.Join(runDir, "events", "*.jsonl"))
	if err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	if len(files) == 0 {
		return 0, nil // nothing to merge (or a compacted run: events.jsonl is the merge)
	}
	type line struct {
		t   int64
		raw []byte
	}
	var all []line
	var torn [][]byte
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return 0, fmt.Errorf("report: %w", err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			var head struct {
				TNs int64 `json:"t_ns"`
			}
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			if json.Unmarshal(sc.Bytes(), &head) != nil {
				torn = append(torn, append([]byte(nil), sc.Bytes()...)) // a torn last line of a killed node
				continue
			}
			all = append(all, line{t: head.TNs, raw: append([]byte(nil), sc.Bytes()...)})
		}
		fh.Close()
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].t < all[j].t })
	out, err := os.Create(filepath.Join(runDir, FileEvents))
	if err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	w := bufio.NewWriter(out)
	for _, l := range all {
		w.Write(l.raw)
		w.WriteByte('\n')
	}
	for _, l := range torn {
		w.Write(l)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return 0, fmt.Errorf("report: %w", err)
	}
	return len(all), out.Close()
}

// compact removes what the merged files replace: events/*.jsonl (in events.jsonl, verbatim) and trace/*.pcapng
// (in trace.pcapng.gz, byte for byte). A directory left empty is removed.
func compact(runDir string) error {
	if fileExists(filepath.Join(runDir, FileEvents)) {
		if err := removeGlob(filepath.Join(runDir, "events", "*.jsonl")); err != nil {
			return err
		}
	}
	if fileExists(filepath.Join(runDir, obs.TraceFile)) {
		if err := removeGlob(filepath.Join(runDir, "trace", "*.pcapng")); err != nil {
			return err
		}
	}
	for _, d := range []string{"events", "trace"} {
		_ = os.Remove(filepath.Join(runDir, d)) // only when empty
	}
	return nil
}

func removeGlob(pattern string) error {
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

// OpenEvents opens the events of one node of a run: events/<node>.jsonl while the run has its per-node files,
// else the merged events.jsonl (every node's lines: filter on the node or the kind).
func OpenEvents(runDir, node string) (*os.File, error) {
	f, err := os.Open(filepath.Join(runDir, "events", node+".jsonl"))
	if err == nil {
		return f, nil
	}
	if f, err2 := os.Open(filepath.Join(runDir, FileEvents)); err2 == nil {
		return f, nil
	}
	return nil, fmt.Errorf("report: %w", err)
}
