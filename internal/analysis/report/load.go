package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/analysis/provenance"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// scenarioFile is the part of <run-dir>/scenario.json the report reads (docs/architecture.md, "Run-scenario
// files"). Unknown fields (expectations, traffic, …) are ignored; the raw object is kept for the report header.
type scenarioFile struct {
	Name        string           `json:"name"`
	Description string           `json:"description"`
	Seed        int64            `json:"seed"`
	StartNs     int64            `json:"start_ns"`
	EndNs       int64            `json:"end_ns"`
	DurationS   float64          `json:"duration_s"`
	Faults      []scenarioFault  `json:"faults"`
	Topology    json.RawMessage  `json:"topology"`
	Traffic     json.RawMessage  `json:"traffic"`
	Expect      json.RawMessage  `json:"expectations"`
	Provenance  *provenance.Info `json:"provenance"`
	BinDir      string           `json:"bin_dir"`
}

type scenarioFault struct {
	Kind   string   `json:"kind"`
	Target string   `json:"target"`
	AtS    float64  `json:"at_s"`
	ForS   float64  `json:"for_s"`
	Nodes  []string `json:"nodes"` // the nodes of a pool or site target (absent: the target itself)
	// A randomised fault (scenario jitter, random:<pool>): what the file planned; Target and AtS are the draw.
	PlannedTarget string   `json:"planned_target"`
	PlannedAtS    *float64 `json:"planned_at_s"`
	JitterS       float64  `json:"jitter_s"`
	// The parameters of the kinds that have some (scenario.json, docs/scenarios.md "Faults").
	Mode          string   `json:"mode"`
	PeriodS       float64  `json:"period_s"`
	CPUPercent    int      `json:"cpu_percent"`
	Peers         []string `json:"peers"`
	Direction     string   `json:"direction"`
	Reject        bool     `json:"reject"`
	LossPercent   float64  `json:"loss_percent"`
	Rate          string   `json:"rate"`
	DelayMs       float64  `json:"delay_ms"`
	DelayJitterMs float64  `json:"delay_jitter_ms"`
}

// params describes a fault's parameters in a few words ("" when it has none): "peers bac, both, silent drop".
func (f scenarioFault) params() string {
	var p []string
	if f.Mode != "" {
		p = append(p, "mode "+f.Mode)
	}
	if f.PeriodS > 0 {
		p = append(p, fmt.Sprintf("period %g s", f.PeriodS))
	}
	if f.CPUPercent > 0 {
		p = append(p, fmt.Sprintf("%d %% CPU", f.CPUPercent))
	}
	if f.LossPercent > 0 {
		p = append(p, fmt.Sprintf("%g %% loss", f.LossPercent))
	}
	if f.Rate != "" {
		p = append(p, "rate "+f.Rate)
	}
	if f.DelayMs > 0 {
		d := fmt.Sprintf("delay %g ms", f.DelayMs)
		if f.DelayJitterMs > 0 {
			d += fmt.Sprintf(" ± %g ms", f.DelayJitterMs)
		}
		p = append(p, d)
	}
	if len(f.Peers) > 0 {
		p = append(p, "peers "+strings.Join(f.Peers, ", "))
	}
	if f.Direction != "" {
		p = append(p, "direction "+f.Direction)
	}
	if f.Kind == "partition" {
		p = append(p, map[bool]string{true: "reject", false: "silent drop"}[f.Reject])
	}
	return strings.Join(p, ", ")
}

// record is one line of records.jsonl (internal/harness/ue.Record; only the fields the report uses).
type record struct {
	Type      string   `json:"type"`
	IMPU      string   `json:"impu"`
	CallID    string   `json:"call_id"`
	TNs       int64    `json:"t_ns"`
	Result    string   `json:"result"`
	Status    int      `json:"status"`
	Kind      string   `json:"kind"`
	Direction string   `json:"direction"`
	From      string   `json:"from"`
	To        string   `json:"to"`
	Setup180  *float64 `json:"setup_ms_180"`
	Setup200  *float64 `json:"setup_ms_200"`
	Duration  float64  `json:"duration_ms"`
	PCSCF     string   `json:"pcscf"`
	SCSCF     string   `json:"scscf"`
	Probe     string   `json:"probe"`      // reachability probe ("mt", "mo", "prober"); "" = the users' traffic
	ProbeUser string   `json:"probe_user"` // the probed user (the caller's record of a probe call)
	// How an answered call ended (callscut.go): "local", "remote", "shutdown" or "cut", when a phone noticed the
	// cut, the caller's session refreshes, and the BYE this phone sent.
	Ended         string `json:"ended"`
	CutNs         int64  `json:"cut_ns"`
	RefreshResult string `json:"refresh_result"`
	Refreshes     int    `json:"refreshes"`
	LastRefreshNs int64  `json:"last_refresh_ns"`
	ByeResult     string `json:"bye_result"`
}

func (r *record) ok() bool { return r.Result == "ok" }

// event is one line of events/<node>.jsonl: the envelope, and the kind's type of the event catalogue
// (docs/events.md) in Data, e.g. an obs.PeerState for kind peer_state.
type event struct {
	TNs  int64
	Node string
	Kind string
	Data obs.Event
}

// EventError is a line of an events file the report could not read: its kind is not in the event catalogue, or
// it does not decode (torn by a kill, a field of the wrong type). The report lists every one and counts them in
// summary.json (events.errors); the line is left out of the KPIs.
type EventError struct {
	File string // relative to the run directory: events/pcscf1.jsonl
	Line int    // 1-based
	Err  error  // wraps obs.ErrUnknownKind or obs.ErrMalformed
}

func (e EventError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

func (e EventError) Unwrap() error { return e.Err }

// traceLine is one message of the nodes' traces: a packet of trace/<node>.NNN.pcapng, or a line of
// trace/<node>.jsonl in runs recorded before the traces became pcapng (docs/architecture.md, "Message trace").
type traceLine struct {
	TNs   int64  `json:"t_ns"`
	Node  string `json:"node"`
	Proto string `json:"proto"`
	Dir   string `json:"dir"`
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Data  []byte `json:"data"` // base64 in JSON
}

// nodeConfig is the part of config/<node>.yaml the report reads.
type nodeConfig struct {
	Name   string `yaml:"name"`
	Kind   string `yaml:"kind"`
	FQDN   string `yaml:"fqdn"`
	Listen string `yaml:"listen"`
	HSS    *struct {
		DiameterListen string `yaml:"diameter_listen"`
		HTTPListen     string `yaml:"http_listen"`
	} `yaml:"hss"`
}

// run is everything read from a run directory.
type run struct {
	dir      string
	scenario scenarioFile
	rawScen  map[string]any
	records  []record
	probes   []record // reachability probe records (record.Probe != ""), kept out of every other KPI
	events   []event
	evErrors []EventError // lines of events/*.jsonl that could not be read
	trace    []traceLine
	nodes    []nodeConfig
	warnings []string
}

func loadRun(dir string) (*run, error) {
	r := &run{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "scenario.json"))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &r.scenario); err != nil {
			return nil, fmt.Errorf("report: scenario.json: %w", err)
		}
		_ = json.Unmarshal(b, &r.rawScen)
	case errors.Is(err, fs.ErrNotExist):
		r.warnings = append(r.warnings, "no scenario.json: no faults, time zero = first record")
	default:
		return nil, fmt.Errorf("report: %w", err)
	}
	if err := readJSONL(filepath.Join(dir, "records.jsonl"), &r.records, &r.warnings); err != nil {
		return nil, err
	}
	if err := r.readEvents(); err != nil {
		return nil, err
	}
	if err := readDir(filepath.Join(dir, "trace"), &r.trace, &r.warnings); err != nil { // older runs: JSON lines
		return nil, err
	}
	if err := r.readTrace(filepath.Join(dir, "trace")); err != nil {
		return nil, err
	}
	if err := r.readConfigs(); err != nil {
		return nil, err
	}
	// Calls the phones abandoned because the run was ending ("aborted") say nothing about the system under
	// test: every record of such a call (the caller's, and the callee's answer to the CANCEL or the BYE) is left
	// out of every KPI and counted in a warning.
	cut := map[string]bool{}
	for _, rec := range r.records {
		if rec.Type == "call" && rec.Result == "aborted" {
			cut[rec.CallID] = true
		}
	}
	kept, dropped := r.records[:0], 0
	for _, rec := range r.records {
		switch {
		case rec.Type == "call" && cut[rec.CallID]:
			dropped++
		case rec.Probe != "":
			r.probes = append(r.probes, rec)
		default:
			kept = append(kept, rec)
		}
	}
	r.records = kept
	if dropped > 0 {
		r.warnings = append(r.warnings, fmt.Sprintf("%d call records of %d calls left out: still in progress when the run ended (result aborted)", dropped, len(cut)))
	}
	sort.SliceStable(r.records, func(i, j int) bool { return r.records[i].TNs < r.records[j].TNs })
	sort.SliceStable(r.probes, func(i, j int) bool { return r.probes[i].TNs < r.probes[j].TNs })
	sort.SliceStable(r.events, func(i, j int) bool { return r.events[i].TNs < r.events[j].TNs })
	sort.SliceStable(r.trace, func(i, j int) bool { return r.trace[i].TNs < r.trace[j].TNs })
	if r.scenario.StartNs == 0 {
		r.scenario.StartNs = r.firstTime()
	}
	return r, nil
}

// firstTime is the earliest t_ns of any record, event or trace line (time zero when scenario.json has none).
func (r *run) firstTime() int64 {
	var first int64
	for _, t := range []int64{firstOf(r.records, func(x record) int64 { return x.TNs }),
		firstOf(r.events, func(x event) int64 { return x.TNs }),
		firstOf(r.trace, func(x traceLine) int64 { return x.TNs })} {
		if t != 0 && (first == 0 || t < first) {
			first = t
		}
	}
	return first
}

func firstOf[T any](xs []T, t func(T) int64) int64 {
	var first int64
	for _, x := range xs {
		if v := t(x); v != 0 && (first == 0 || v < first) {
			first = v
		}
	}
	return first
}

func (r *run) readConfigs() error {
	paths, err := filepath.Glob(filepath.Join(r.dir, "config", "*.yaml"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		var c nodeConfig
		if err := yaml.Unmarshal(b, &c); err != nil {
			r.warnings = append(r.warnings, fmt.Sprintf("%s: %v", filepath.Base(p), err))
			continue
		}
		if c.Name == "" {
			c.Name = strings.TrimSuffix(filepath.Base(p), ".yaml")
		}
		r.nodes = append(r.nodes, c)
	}
	return nil
}

// readDir reads every *.jsonl file of dir (absent dir: nothing).
func readDir[T any](dir string, out *[]T, warn *[]string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := readJSONL(p, out, warn); err != nil {
			return err
		}
	}
	return nil
}

// readEvents reads every events/*.jsonl through the event catalogue (obs.DecodeEvent), or the merged events.jsonl
// of a run whose report merged them away (Build). A line it cannot read is an EventError, never dropped silently.
func (r *run) readEvents() error {
	paths, err := filepath.Glob(filepath.Join(r.dir, "events", "*.jsonl"))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if merged := filepath.Join(r.dir, FileEvents); len(paths) == 0 && fileExists(merged) {
		paths = []string{merged}
	}
	sort.Strings(paths)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		rel, _ := filepath.Rel(r.dir, p)
		rel = filepath.ToSlash(rel)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		n := 0
		for sc.Scan() {
			n++
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			env, ev, err := obs.DecodeEvent(line)
			if err != nil {
				r.evErrors = append(r.evErrors, EventError{File: rel, Line: n, Err: err})
				continue
			}
			r.events = append(r.events, event{TNs: env.TNs, Node: env.Node, Kind: env.Kind, Data: ev})
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("report: %s: %w", rel, err)
		}
	}
	return nil
}

// readJSONL appends every line of path decoded as T. A missing file is no error; a line that does not decode
// (a node killed in the middle of a write leaves a torn last line) is skipped with a warning.
func readJSONL[T any](path string, out *[]T, warn *[]string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	n, bad := 0, 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			bad++
			continue
		}
		*out = append(*out, v)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	if bad > 0 {
		*warn = append(*warn, fmt.Sprintf("%s: %d of %d lines did not decode and were skipped", filepath.Base(path), bad, n))
	}
	return nil
}

// hostNode turns "pcscf1.ims.test", "pcscf1.ims.test:5061" or "sip:pcscf1.ims.test" into the node name "pcscf1".
func hostNode(h string) string {
	h = strings.TrimPrefix(strings.TrimPrefix(h, "sips:"), "sip:")
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		h = h[i+1:]
	}
	if i := strings.IndexAny(h, ".:;>"); i >= 0 {
		h = h[:i]
	}
	return h
}

// readTrace reads the pcapng segments of the trace directory; a node whose trace wrapped (its oldest segments
// deleted to stay within its budget) and a segment torn by a kill are warnings.
func (r *run) readTrace(dir string) error {
	lines, wrapped, warnings, err := obs.ReadTraceDir(dir)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if merged := filepath.Join(filepath.Dir(dir), obs.TraceFile); len(lines) == 0 && fileExists(merged) {
		// A compacted run: the segments were merged into one file (Build).
		var skipped int
		if lines, wrapped, skipped, err = obs.ReadTraceFile(merged); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if skipped > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %d packets not decoded", obs.TraceFile, skipped))
		}
	}
	for _, l := range lines {
		r.trace = append(r.trace, traceLine(l))
	}
	for _, w := range wrapped {
		r.warnings = append(r.warnings, fmt.Sprintf("the trace of %s wrapped: its oldest messages were dropped to "+
			"stay within the trace budget (topology trace.max_mb), so ladder diagrams and trace.pcap miss them",
			filepath.Base(w)))
	}
	r.warnings = append(r.warnings, warnings...)
	return nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
