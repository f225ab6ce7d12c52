package bench

// imslab memory <run-dir>: the memory point of a run (docs/performance.md, "Memory point"): every node's resident
// memory from the lab's "resource" events (events/lab.jsonl, one sample per node per second) and the phones'
// process apart, before the phones registered, at t0 (all registered) and at its peak from t0 to the end.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// MemTarget is one process's resident memory in a run.
type MemTarget struct {
	Target string `json:"target"`
	// FirstBytes is its first sample (the lab up, before the phones registered; for the phones: as they start).
	FirstBytes int64 `json:"first_rss_bytes"`
	// T0Bytes is the first sample at or after t0, when every phone has registered.
	T0Bytes int64 `json:"t0_rss_bytes"`
	// PeakBytes is the largest sample from t0 to the end of the traffic (t0 + the scenario's duration).
	PeakBytes int64 `json:"peak_rss_bytes"`
	// LastBytes is the last sample before the end of the traffic: the registered population once the
	// registrations' transactions (32 s over UDP) have ended, when the run holds long enough after t0.
	LastBytes int64 `json:"last_rss_bytes"`
	Samples   int   `json:"samples"`
}

// MemoryPoint is the result of imslab memory for one run directory.
type MemoryPoint struct {
	RunDir string `json:"run_dir"`
	Phones int    `json:"phones"`
	// RegisteredT0 and RegisteredEnd count the phones with a successful registration by t0 and by the end of the
	// traffic (records.jsonl; a phone whose initial REGISTER failed retries after 30 s).
	RegisteredT0  int         `json:"registered_at_t0"`
	RegisteredEnd int         `json:"registered_at_end"`
	Nodes         []MemTarget `json:"nodes"`
	// NodesFirstBytes, NodesT0Bytes, NodesPeakBytes sum the nodes' figures (the peaks of different nodes need not
	// fall in the same second: the sum of peaks bounds their simultaneous total from above).
	NodesFirstBytes int64 `json:"nodes_first_rss_bytes"`
	NodesT0Bytes    int64 `json:"nodes_t0_rss_bytes"`
	NodesPeakBytes  int64 `json:"nodes_peak_rss_bytes"`
	NodesLastBytes  int64 `json:"nodes_last_rss_bytes"`
	// HoldS is the traffic time after t0 (the window of "peak" and "last"; the phones de-register after it).
	HoldS float64 `json:"hold_s"`
	// PerPhoneBytes is (NodesPeakBytes - NodesFirstBytes) / RegisteredEnd: what a registered phone costs the
	// nodes, the registrations' transactions included.
	PerPhoneBytes float64 `json:"per_phone_bytes"`
	// Phones' process (the runner, target "phones"), apart from the nodes; absent for runs before it was recorded.
	PhonesProcess *MemTarget `json:"phones_process,omitempty"`
}

// ReadMemoryPoint is the memory point of a finished run directory: every node's resident memory before the phones
// registered, at t0, at its peak after t0 and at the end (events/lab.jsonl), and the phones' process apart.
func ReadMemoryPoint(dir string) (*MemoryPoint, error) {
	var sc struct {
		StartNs   int64   `json:"start_ns"`
		EndNs     int64   `json:"end_ns"`
		DurationS float64 `json:"duration_s"`
		Traffic   struct {
			Phones int `json:"phones"`
		} `json:"traffic"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "scenario.json"))
	if err != nil {
		return nil, fmt.Errorf("%s: not a run directory: %w", dir, err)
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		return nil, fmt.Errorf("%s/scenario.json: %w", dir, err)
	}
	if sc.StartNs == 0 {
		return nil, fmt.Errorf("%s/scenario.json: no start_ns: the phones never all registered (no t0)", dir)
	}
	// The window is the traffic time, t0 to t0 + duration: after it the phones de-register and the lab stops.
	end := sc.EndNs
	if sc.DurationS > 0 {
		end = sc.StartNs + int64(sc.DurationS*1e9)
	}
	if end == 0 {
		end = math.MaxInt64
	}
	f, err := report.OpenEvents(dir, "lab")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	defer f.Close()
	byTarget := map[string]*MemTarget{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		// Only the resource samples (the event catalogue's obs.Resource) count; a line that is not one, or does not
		// decode (the report lists those), is passed over.
		env, ev, err := obs.DecodeEvent(s.Bytes())
		e, ok := ev.(obs.Resource)
		if err != nil || !ok || e.Target == "" {
			continue
		}
		rss := int64(e.RSSBytes)
		m := byTarget[e.Target]
		if m == nil {
			m = &MemTarget{Target: e.Target, FirstBytes: rss}
			byTarget[e.Target] = m
		}
		m.Samples++
		if env.TNs >= sc.StartNs && env.TNs <= end {
			if m.T0Bytes == 0 {
				m.T0Bytes = rss
			}
			m.PeakBytes = max(m.PeakBytes, rss)
			m.LastBytes = rss
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s/events/lab.jsonl: %w", dir, err)
	}
	mp := &MemoryPoint{RunDir: dir, Phones: sc.Traffic.Phones}
	if end != math.MaxInt64 {
		mp.HoldS = float64(end-sc.StartNs) / 1e9
	}
	for _, m := range byTarget {
		if m.Target == scenario.PhonesTarget {
			mp.PhonesProcess = m
			continue
		}
		mp.Nodes = append(mp.Nodes, *m)
		mp.NodesFirstBytes += m.FirstBytes
		mp.NodesT0Bytes += m.T0Bytes
		mp.NodesPeakBytes += m.PeakBytes
		mp.NodesLastBytes += m.LastBytes
	}
	if len(mp.Nodes) == 0 {
		return nil, errors.New(dir + "/events/lab.jsonl: no resource samples of any node")
	}
	sort.Slice(mp.Nodes, func(i, j int) bool { return mp.Nodes[i].Target < mp.Nodes[j].Target })
	if mp.RegisteredT0, mp.RegisteredEnd, err = countRegistered(dir, sc.StartNs, end); err != nil {
		return nil, err
	}
	if mp.RegisteredEnd > 0 {
		mp.PerPhoneBytes = float64(mp.NodesPeakBytes-mp.NodesFirstBytes) / float64(mp.RegisteredEnd)
	}
	return mp, nil
}

// countRegistered counts the phones with a successful (initial or refresh) registration that ended by t0 and by
// end, from the phones' records.
func countRegistered(dir string, t0, end int64) (atT0, atEnd int, err error) {
	f, err := os.Open(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", dir, err)
	}
	defer f.Close()
	first := map[string]int64{} // IMPU → when its first successful registration ended
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var r struct {
			Type       string  `json:"type"`
			Kind       string  `json:"kind"`
			IMPU       string  `json:"impu"`
			Status     int     `json:"status"`
			TNs        int64   `json:"t_ns"`
			DurationMs float64 `json:"duration_ms"`
		}
		if json.Unmarshal(s.Bytes(), &r) != nil || r.Type != "register" || r.Kind == "deregister" || r.Status != 200 {
			continue
		}
		done := r.TNs + int64(r.DurationMs*1e6)
		if t, ok := first[r.IMPU]; !ok || done < t {
			first[r.IMPU] = done
		}
	}
	if err := s.Err(); err != nil {
		return 0, 0, fmt.Errorf("%s/records.jsonl: %w", dir, err)
	}
	for _, t := range first {
		if t <= t0 {
			atT0++
		}
		if t <= end {
			atEnd++
		}
	}
	return atT0, atEnd, nil
}

func mb(b int64) string { return fmt.Sprintf("%.1f", float64(b)/1e6) }

// WriteMemoryTable writes a memory point as a table (imslab memory).
func WriteMemoryTable(w io.Writer, mp *MemoryPoint) {
	fmt.Fprintf(w, "memory point: %s, %d phones, %d registered at t0, %d by the end (resident memory, MB = 10^6 bytes)\n",
		mp.RunDir, mp.Phones, mp.RegisteredT0, mp.RegisteredEnd)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "process\tbefore registration\tat t0\tpeak after t0\tat the end (t0+%.0fs)\tsamples\t\n", mp.HoldS)
	for _, m := range mp.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t\n", m.Target, mb(m.FirstBytes), mb(m.T0Bytes), mb(m.PeakBytes),
			mb(m.LastBytes), m.Samples)
	}
	fmt.Fprintf(tw, "all nodes\t%s\t%s\t%s\t%s\t\t\n", mb(mp.NodesFirstBytes), mb(mp.NodesT0Bytes),
		mb(mp.NodesPeakBytes), mb(mp.NodesLastBytes))
	if p := mp.PhonesProcess; p != nil {
		fmt.Fprintf(tw, "phones (imslab run)\t%s\t%s\t%s\t%s\t%d\t\n", mb(p.FirstBytes), mb(p.T0Bytes),
			mb(p.PeakBytes), mb(p.LastBytes), p.Samples)
	}
	tw.Flush()
	fmt.Fprintf(w, "nodes: %.0f bytes per registered phone (sum of peaks after t0 minus before registration, over %d registered phones)\n",
		mp.PerPhoneBytes, mp.RegisteredEnd)
}
