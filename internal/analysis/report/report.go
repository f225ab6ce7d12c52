// Package report turns a finished run directory (scenario.json, records.jsonl, events/, trace/, config/) into the
// run's report: summary.json (the KPIs of SPEC §6), calls.csv, report.md, report.html, plots/*.svg, ladder
// diagrams of the takeover calls and trace.pcap. docs/report.md defines every KPI.
package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Output files, relative to the run directory.
const (
	FileSummary  = "summary.json"
	FileCalls    = "calls.csv"
	FileMarkdown = "report.md"
	FileHTML     = "report.html"
	FilePcap     = "trace.pcap"
	DirPlots     = "plots"
)

// Check is one of a scenario's expectations evaluated against the run's summary, as the report lists it (the
// scenario package evaluates them: scenario.ReportChecks).
type Check struct {
	Name   string // what is checked, in words
	Metric string // the summary's metric (docs/report.md)
	// Value is the metric's value as printed, "-" when the summary has no such metric.
	Value string
	// Expected is the comparison: ">= 0.99", ">= affected_users (11)".
	Expected string
	OK       bool
	// Reason explains a failure that is not a plain comparison (a missing metric).
	Reason string
}

// Option configures Build.
type Option func(*options)

type options struct {
	checks     func(*Summary) []Check
	keepRaw    bool
	pcap       bool
	printForms bool
}

// KeepRaw keeps the nodes' own event files (events/) and trace segments (trace/) beside the merged events.jsonl
// and trace.pcapng.gz. By default Build removes them once merged: the merged files hold everything they held
// (events verbatim; every packet with its node and direction), and Build reads them back on a rebuild.
func KeepRaw() Option { return func(o *options) { o.keepRaw = true } }

// WithPcap also writes trace.pcap: every message once (the receiver's copy dropped), as Ethernet frames, for tools
// that prefer one capture point per message. It is derived from the trace, so it is not written by default.
func WithPcap() Option { return func(o *options) { o.pcap = true } }

// WithPrintForms also draws the restoration figure for a paper: plots/restore.{col,full}.{pdf,svg,png}, at 3.5 in
// and 7 in (`imslab run` and `imslab report`; a study's runs leave them out, the study draws its own).
func WithPrintForms() Option { return func(o *options) { o.printForms = true } }

// WithChecks lists the run's expectations in report.md and report.html, evaluated by fn against the summary
// before the report is written (`imslab run` and `imslab report` pass the scenario's).
func WithChecks(fn func(*Summary) []Check) Option { return func(o *options) { o.checks = fn } }

// Build reads a finished run directory and writes summary.json, calls.csv, report.md, report.html
// (self-contained: inline SVG), plots (SVG and PNG files), events.jsonl and trace.pcapng.gz (every node's events
// and trace segments merged) into it, removes the per-node files the merged ones replace (unless KeepRaw), and
// returns the summary. Build on a run it has built before reads the merged files and gives the same report.
func Build(runDir string, opts ...Option) (*Summary, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	r, err := loadRun(runDir)
	if err != nil {
		return nil, err
	}
	a := analyse(r)
	s := a.s

	// Messages: deduplicated, decoded, in time order.
	lines, dups := dedup(r.trace)
	msgs := make([]msg, len(lines))
	sipCallIDs := map[string]bool{}
	for i, l := range lines {
		msgs[i] = decode(l)
		if msgs[i].Proto == "sip" {
			s.Pcap.SIP++
			if msgs[i].callID != "" {
				sipCallIDs[msgs[i].callID] = true
			}
		} else if msgs[i].Proto == "diameter" {
			s.Pcap.Diameter++
		}
	}
	s.Pcap.Duplicates = dups
	a.signalling(r, msgs)
	a.workload(r, msgs)
	a.takeoverCx(r)
	s.MemberLoad = a.memberLoad(r)
	s.Cost = a.cost(r)
	ab := newAddressBook(r, msgs)

	if err := os.MkdirAll(filepath.Join(runDir, DirPlots), 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	add := func(name string) { s.Files = append(s.Files, name) }

	if n, err := writeMergedEvents(runDir); err != nil {
		return nil, err
	} else if n > 0 || fileExists(filepath.Join(runDir, FileEvents)) {
		add(FileEvents)
	}

	// The trace: the nodes' segments merged into one compressed pcapng (or, on a rebuild, the merged file that
	// is already there).
	n, warns, err := obs.MergeTrace(filepath.Join(runDir, "trace"), filepath.Join(runDir, obs.TraceFile))
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	_ = warns // the same torn segments loadRun already warned about
	if n > 0 || fileExists(filepath.Join(runDir, obs.TraceFile)) {
		if n == 0 {
			n = len(r.trace)
		}
		s.Pcap.File, s.Pcap.Packets = obs.TraceFile, n
		add(obs.TraceFile)
	}
	if o.pcap && len(msgs) > 0 {
		n, err := writePcap(filepath.Join(runDir, FilePcap), msgs)
		if err != nil {
			return nil, err
		}
		if s.Pcap.File == "" { // a run without pcapng segments (older runs traced in JSON lines)
			s.Pcap.File, s.Pcap.Packets = FilePcap, n
		}
		add(FilePcap)
	}
	if !o.keepRaw {
		if err := compact(runDir); err != nil {
			return nil, err
		}
	}

	// Ladders.
	calls := map[string]*call{}
	for _, c := range groupCalls(r) {
		calls[c.id] = c
	}
	var ladders []ladder
	chosen := a.chooseLadderCalls(r, sipCallIDs)
	for _, dir := range []string{"mo", "mt"} {
		rec := chosen[dir]
		if rec == nil {
			continue
		}
		lm := ladderMessages(rec, calls, msgs)
		title := fmt.Sprintf("%s takeover call of %s at +%.3f s (Call-ID %s)", strings.ToUpper(dir), rec.IMPU,
			a.offset(rec.TNs), rec.CallID)
		lay := layoutLadder(title, lm, ab)
		svg := lay.svg(dir)
		png, err := lay.png()
		if err != nil {
			return nil, err
		}
		file := filepath.Join(DirPlots, "ladder_"+dir+".svg")
		pngFile := filepath.Join(DirPlots, "ladder_"+dir+".png")
		for _, f := range []struct {
			name string
			data []byte
		}{{file, []byte(svg)}, {pngFile, png}} {
			if err := os.WriteFile(filepath.Join(runDir, f.name), f.data, 0o644); err != nil {
				return nil, fmt.Errorf("report: %w", err)
			}
			add(f.name)
		}
		info := LadderInfo{Direction: dir, CallID: rec.CallID, IMPU: rec.IMPU, StartS: a.offset(rec.TNs), File: file,
			PNG: pngFile, Lanes: lay.lanes, Messages: len(lm)}
		s.Ladders = append(s.Ladders, info)
		ladders = append(ladders, ladder{info: info, svg: svg})
	}

	// Plots.
	var plots []namedSVG
	for _, p := range []struct {
		file, title string
		draw        func(*Summary) ([]byte, error)
	}{
		{filepath.Join(DirPlots, "call_success.svg"), "Call success over time", plotSuccess},
		{filepath.Join(DirPlots, "call_attempts.svg"), "Call attempts over time", plotAttempts},
	} {
		b, err := p.draw(s)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(runDir, p.file), b, 0o644); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		add(p.file)
		plots = append(plots, namedSVG{file: p.file, title: p.title, svg: string(b)})
	}

	if sv := s.Survival; sv != nil {
		files, svg, err := writeRestoreFigure(runDir, sv, o.printForms)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			add(f)
		}
		plots = append(plots, namedSVG{file: filepath.Join(DirPlots, "restore.svg"),
			title: "Affected users restored vs time since the fault", svg: string(svg)})
	}

	{
		tl := a.buildTimeline(r)
		svg, png, err := plotTimeline(s, tl)
		if err != nil {
			return nil, err
		}
		data, err := tl.csv()
		if err != nil {
			return nil, err
		}
		for _, f := range []struct {
			file string
			b    []byte
		}{{filepath.Join(DirPlots, "timeline.svg"), svg}, {filepath.Join(DirPlots, "timeline.png"), png},
			{filepath.Join(DirPlots, "timeline.csv"), data}} {
			if err := os.WriteFile(filepath.Join(runDir, f.file), f.b, 0o644); err != nil {
				return nil, fmt.Errorf("report: %w", err)
			}
			add(f.file)
		}
		plots = append(plots, namedSVG{file: filepath.Join(DirPlots, "timeline.svg"),
			title: "Timeline around the fault: requests per pool member, Cx/s, call outcomes, detections", svg: string(svg)})
	}

	if err := writeCalls(filepath.Join(runDir, FileCalls), r, a); err != nil {
		return nil, err
	}
	add(FileCalls)
	if len(s.Users) > 0 {
		if err := writeUsers(filepath.Join(runDir, FileUsers), s); err != nil {
			return nil, err
		}
		add(FileUsers)
	}
	add(FileMarkdown)
	add(FileHTML)
	add(FileSummary)

	var checks []Check
	if o.checks != nil {
		checks = o.checks(s)
	}
	md := markdown(r, s, checks, plots, ladders)
	if err := os.WriteFile(filepath.Join(runDir, FileMarkdown), []byte(md), 0o644); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(runDir, FileHTML), []byte(htmlReport(r, s, checks, plots, ladders)), 0o644); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(runDir, FileSummary), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return s, nil
}

type namedSVG struct{ file, title, svg string }

// writeCalls writes calls.csv: one row per call record (the caller's "mo" and the callee's "mt").
func writeCalls(path string, r *run, a *analysis) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write([]string{"call_id", "direction", "impu", "peer", "start_s", "result", "status", "setup_ms_180",
		"setup_ms_200", "pcscf", "scscf", "affected", "after_fault"})
	optMs := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	for _, x := range r.records {
		if x.Type != "call" {
			continue
		}
		peer := x.To
		if x.Direction == "mt" {
			peer = x.From
		}
		_, aff := a.affected[x.IMPU]
		_ = w.Write([]string{x.CallID, x.Direction, x.IMPU, peer, strconv.FormatFloat(a.offset(x.TNs), 'f', -1, 64),
			x.Result, strconv.Itoa(x.Status), optMs(x.Setup180), optMs(x.Setup200), x.PCSCF, x.SCSCF,
			strconv.FormatBool(aff), strconv.FormatBool(a.afterFault(x.IMPU, x.TNs))})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("report: calls.csv: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
