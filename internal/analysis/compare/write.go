package compare

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/imslab/quasipool/internal/analysis/provenance"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// Files of a comparison directory.
const (
	FileJSON     = "compare.json"
	FileMarkdown = "compare.md"
	FileHTML     = "compare.html"
	FileTable    = "table1.csv"
	DirPlots     = "plots"
)

type plotFile struct{ file, title, caption, svg string }

// Write writes the comparison files of res into dir: compare.json, table1.csv, plots/*.svg, compare.md and
// compare.html (self-contained).
func Write(dir string, res *Result) error {
	if err := os.MkdirAll(filepath.Join(dir, DirPlots), 0o755); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	res.Files = []string{FileMarkdown, FileHTML, FileJSON, FileTable}
	var figs []plotFile
	for _, f := range []struct {
		file, title, caption string
		draw                 func() ([]byte, error)
	}{
		{"success.svg", "Call success of the affected users over time",
			"Success ratio of the affected users' calls (MO and MT records) per 2 s bin, one line per scheme; the " +
				"dashed line is the fault.",
			func() ([]byte, error) { return plotSuccess(res.Rows, res.summaries) }},
		{"interruption_mo.svg", "MO interruption per scheme",
			"Share of the affected users whose first successful outgoing call after the fault was answered " +
				"within x seconds of it. A line that stays below 1 has users never served again during the run.",
			func() ([]byte, error) { return plotInterruptionCDF("mo", res.Rows, res.summaries) }},
		{"interruption_mt.svg", "MT interruption per scheme",
			"The same for incoming calls.",
			func() ([]byte, error) { return plotInterruptionCDF("mt", res.Rows, res.summaries) }},
		{"rereg_scatter.svg", "MT interruption vs. next re-registration",
			"One point per affected user: x is the time from the fault to its next re-registration, y the time " +
				"until its first incoming call was answered. Points on the diagonal were served only once they " +
				"re-registered; points near the x axis were taken over.",
			func() ([]byte, error) { return plotReregScatter(res.Rows, res.summaries) }},
	} {
		b, err := f.draw()
		if err != nil {
			return err
		}
		rel := filepath.Join(DirPlots, f.file)
		if err := os.WriteFile(filepath.Join(dir, rel), b, 0o644); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		res.Files = append(res.Files, rel)
		figs = append(figs, plotFile{file: rel, title: f.title, caption: f.caption, svg: string(b)})
	}
	if err := os.WriteFile(filepath.Join(dir, FileTable), TableCSV(res.Rows), 0o644); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileJSON), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileMarkdown), []byte(markdown(res, figs)), 0o644); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileHTML), []byte(htmlDoc(res, figs)), 0o644); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	return nil
}

// cxCommands is the union of the Cx commands over the rows, sorted, "total" last.
func cxCommands(rows []Row) []string {
	seen := map[string]bool{}
	for _, r := range rows {
		for k := range r.CxExtraPerUser {
			if k != "total" {
				seen[k] = true
			}
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TableCSV is table1.csv: one row per variant, every column of Row flat (docs/compare.md).
func TableCSV(rows []Row) []byte {
	cmds := cxCommands(rows)
	head := []string{"variant", "scheme", "options", "pcscf_members", "scscf_members", "active_pcscf",
		"active_scscf", "spare_capacity", "state_replicated", "affected_users", "time_to_detect_s"}
	for _, d := range []string{"mo", "mt"} {
		head = append(head, d+"_interruption_p50_s", d+"_interruption_p95_s", d+"_interruption_max_s",
			d+"_interruption_count", d+"_taken_over", d+"_users_attempted", d+"_attempts", d+"_failed",
			d+"_rereg_gap_p50_s")
	}
	head = append(head, "calls_total", "calls_failed", "cx_extra_per_user")
	for _, c := range cmds {
		head = append(head, "cx_extra_per_user_"+c)
	}
	head = append(head, "sip_extra_per_user", "repl_per_user", "repl_messages_run", "repl_bytes_run",
		"setup_normal_p50_ms", "setup_normal_p95_ms", "setup_takeover_p50_ms", "setup_takeover_p95_ms",
		"expectations_ok", "expectations_all", "run_dir", "error")
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(head)
	for _, r := range rows {
		rec := []string{r.Variant, r.Scheme, strings.Join(r.Options, "+"), itoa(r.Members[0]), itoa(r.Members[1]),
			itoa(r.ActiveMembers[0]), itoa(r.ActiveMembers[1]), ftoa(r.SpareCapacity),
			strconv.FormatBool(r.StateReplicated), itoa(r.AffectedUsers), optF(r.TimeToDetectS)}
		for _, d := range []Dir{r.MO, r.MT} {
			if p := d.InterruptionS; p != nil {
				rec = append(rec, ftoa(p.P50), ftoa(p.P95), ftoa(p.Max), itoa(p.Count))
			} else {
				rec = append(rec, "", "", "", "0")
			}
			rec = append(rec, optF(d.TakenOver), itoa(d.UsersAttempted), itoa(d.Attempts), itoa(d.Failed),
				optF(d.ReregGapP50S))
		}
		rec = append(rec, itoa(r.CallsTotal), itoa(r.CallsFailed), cxCell(r, "total"))
		for _, c := range cmds {
			rec = append(rec, cxCell(r, c))
		}
		rec = append(rec, optF(r.SIPExtraPerUser), optF(r.ReplPerUser), itoa(r.ReplMessagesRun),
			itoa(r.ReplBytesRun), latF(r.SetupNormalMs, false), latF(r.SetupNormalMs, true),
			latF(r.SetupTakeoverMs, false), latF(r.SetupTakeoverMs, true), itoa(r.ExpectationsOK),
			itoa(r.ExpectationsAll), r.RunDir, r.Error)
		_ = w.Write(rec)
	}
	w.Flush()
	return buf.Bytes()
}

func cxCell(r Row, cmd string) string {
	if r.CxExtraPerUser == nil {
		return ""
	}
	return ftoa(r.CxExtraPerUser[cmd])
}

func latF(l report.Latency, p95 bool) string {
	if l.Count == 0 {
		return ""
	}
	if p95 {
		return ftoa(l.P95)
	}
	return ftoa(l.P50)
}

func itoa(i int) string     { return strconv.Itoa(i) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
func optF(p *float64) string {
	if p == nil {
		return ""
	}
	return ftoa(*p)
}

// Cell formatting of the human tables.
func pct(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.0f %%", *p*100)
}

func secs(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *p)
}

func p95(p *report.Percentiles) *float64 {
	if p == nil {
		return nil
	}
	return &p.P95
}

func interruptionCell(d Dir) string {
	p := d.InterruptionS
	if p == nil {
		return "–"
	}
	s := fmt.Sprintf("%.2f / %.2f / %.2f", p.P50, p.P95, p.Max)
	if p.Count < d.UsersAttempted {
		s += fmt.Sprintf(" (%d of %d served)", p.Count, d.UsersAttempted)
	}
	return s
}

func sigCell(r Row) string {
	if r.CxExtraPerUser == nil {
		return "–"
	}
	var parts []string
	for _, c := range cxCommands([]Row{r}) {
		if v := r.CxExtraPerUser[c]; v != 0 {
			parts = append(parts, fmt.Sprintf("%s %+.1f", c, v))
		}
	}
	cx := fmt.Sprintf("Cx %+.1f", r.CxExtraPerUser["total"])
	if len(parts) > 0 {
		cx += " (" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprintf("%s; SIP %+.0f; repl %s", cx, *r.SIPExtraPerUser, secsOr(r.ReplPerUser, "%.1f"))
}

func secsOr(p *float64, f string) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf(f, *p)
}

func latCell(r Row) string {
	f := func(l report.Latency) string {
		if l.Count == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f", l.P50)
	}
	return f(r.SetupNormalMs) + " / " + f(r.SetupTakeoverMs)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// tableRows is the measured Table 1 as text cells: a header and one row per variant.
func tableRows(rows []Row) [][]string {
	out := [][]string{{"scheme", "members P/S (active)", "spare capacity", "state replicated",
		"time to detect (s)", "MO interruption p50/p95/max (s)", "MT interruption p50/p95/max (s)",
		"taken over before re-reg. MO / MT", "failed calls: affected MO / MT (all)",
		"signalling per affected user (extra)", "setup p50 normal / takeover (ms)", "expectations met"}}
	for _, r := range rows {
		if r.Error != "" && r.AffectedUsers == 0 && r.CallsTotal == 0 {
			out = append(out, []string{r.Variant, fmt.Sprintf("%d/%d (%d)", r.Members[0], r.Members[1],
				r.ActiveMembers[0]), "", "", "", "run failed: " + r.Error, "", "", "", "", "", ""})
			continue
		}
		out = append(out, []string{
			r.Variant,
			fmt.Sprintf("%d/%d (%d)", r.Members[0], r.Members[1], r.ActiveMembers[0]),
			fmt.Sprintf("%.0f %%", r.SpareCapacity*100),
			yesNo(r.StateReplicated),
			secs(r.TimeToDetectS),
			interruptionCell(r.MO),
			interruptionCell(r.MT),
			pct(r.MO.TakenOver) + " / " + pct(r.MT.TakenOver),
			fmt.Sprintf("%d / %d (%d of %d)", r.MO.Failed, r.MT.Failed, r.CallsFailed, r.CallsTotal),
			sigCell(r),
			latCell(r),
			fmt.Sprintf("%d/%d", r.ExpectationsOK, r.ExpectationsAll),
		})
	}
	return out
}

func mdCell(s string) string { return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s) }

func setupLines(res *Result) []string {
	s := res.Setup
	l := []string{
		fmt.Sprintf("Scenario **%s**%s, seed %d (every scheme ran the same traffic with this seed).", res.Scenario,
			fileNote(res.ScenarioFile), res.Seed),
		fmt.Sprintf("Faults: %s.", strings.Join(s.Faults, "; ")),
		provenanceLine(res.Provenance),
		fmt.Sprintf("Active members per pool: %d P-CSCF, %d S-CSCF, the same for every scheme; n-plus-1 adds one "+
			"cold spare per pool, active-standby one standby per member.", s.ActivePCSCF, s.ActiveSCSCF),
		fmt.Sprintf("Traffic: %d phones for %.0f s, %.1f random calls/s, probe calls every %.1f s (every phone "+
			"calls the next one), hold %.1f s.", s.Phones, s.DurationS, s.CallRate, s.ProbeIntervalS, s.HoldS),
		fmt.Sprintf("Registration period %.0f s (phones refresh at about half of it, so every affected user "+
			"re-registers during the run when that is shorter than the time after the fault); OPTIONS probing "+
			"every %.1f s, %d failures to down.", s.ExpiresS, s.ProbingS, s.FailuresToDown),
	}
	if s.ProvisionalTimeoutS > 0 {
		l = append(l, fmt.Sprintf("Fast failure detection: an INVITE to a pool member with no provisional answer "+
			"within %.0f ms goes to the next member and counts as a missed probe.", s.ProvisionalTimeoutS*1000))
	}
	if res.Description != "" {
		l = append(l, "What happens: "+strings.TrimSpace(res.Description))
	}
	return l
}

func fileNote(f string) string {
	if f == "" {
		return ""
	}
	return " (`" + f + "`)"
}

var method = []string{
	"Each scheme ran the scenario in its own run directory with a fresh lab: both pools were set to the scheme, " +
		"everything else (traffic, seed, faults, timers) was the same.",
	"KPIs are those of each run's report (docs/report.md); the table's columns are defined in docs/compare.md. " +
		"\"Taken over before re-registration\" is the share of the affected users (who tried) whose first " +
		"successful call in that direction after the fault came before their next re-registration.",
	"Signalling per affected user is what an affected user caused after the fault minus what an unaffected user " +
		"caused in the same time (Cx requests by command, SIP messages on every hop), i.e. the cost of its " +
		"takeover; replication is every repl_send after the fault over the affected users.",
	"The scenario's expectations were checked for every scheme; a scheme missing them is a result, not an error.",
}

func markdown(res *Result, figs []plotFile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Protection schemes compared: %s\n\n", res.Scenario)
	b.WriteString("## Setup\n\n")
	for _, l := range setupLines(res) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\n## Method\n\n")
	for _, l := range method {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\n## Table 1, measured\n\n")
	writeMDTable(&b, tableRows(res.Rows))
	if res.Repeat > 1 {
		b.WriteString(repeatSection(res))
	}
	fmt.Fprintf(&b, "\n## The study's Table 1 beside the measurement\n\n%s\n\n", StudyReading)
	writeMDTable(&b, studyRows(res.Rows))
	b.WriteString("\nExpectations of the scenario not met:\n\n")
	none := true
	for _, r := range res.Rows {
		if len(r.ExpectationsMiss) > 0 {
			none = false
			fmt.Fprintf(&b, "- **%s**: %s\n", r.Variant, strings.Join(r.ExpectationsMiss, "; "))
		}
	}
	if none {
		b.WriteString("- none\n")
	}
	for _, r := range res.Rows {
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "\n**Warning, %s**: %s\n", r.Variant, w)
		}
	}
	b.WriteString("\n## Figures\n\n")
	for _, f := range figs {
		fmt.Fprintf(&b, "### %s\n\n![%s](%s)\n\n%s\n\n", f.title, f.title, filepath.ToSlash(f.file), f.caption)
	}
	b.WriteString("## Raw data\n\n")
	fmt.Fprintf(&b, "- [%s](%s) (the table, one row per scheme), [%s](%s) (everything above as JSON)\n",
		FileTable, FileTable, FileJSON, FileJSON)
	for _, r := range res.Rows {
		d := filepath.ToSlash(r.RunDir)
		fmt.Fprintf(&b, "- %s: [report](%s/report.md) ([html](%s/report.html)), [summary.json](%s/summary.json), [calls.csv](%s/calls.csv), "+
			"[users.csv](%s/users.csv), [events.jsonl](%s/events.jsonl), [trace.pcap](%s/trace.pcap)\n",
			r.Variant, d, d, d, d, d, d, d)
	}
	return b.String()
}

func htmlDoc(res *Result, figs []plotFile) string {
	var b strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n", e("Protection schemes compared: "+res.Scenario))
	b.WriteString("<style>body{font-family:sans-serif;max-width:80em;margin:2em auto;line-height:1.4}" +
		"table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #bbb;padding:.3em .5em;vertical-align:top}" +
		"th{background:#eee}figure{margin:1.5em 0}figcaption{color:#444}code{background:#f4f4f4}</style></head><body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n<h2>Setup</h2>\n<ul>\n", e("Protection schemes compared: "+res.Scenario))
	for _, l := range setupLines(res) {
		fmt.Fprintf(&b, "<li>%s</li>\n", e(strings.ReplaceAll(strings.ReplaceAll(l, "**", ""), "`", "")))
	}
	b.WriteString("</ul>\n<h2>Method</h2>\n<ul>\n")
	for _, l := range method {
		fmt.Fprintf(&b, "<li>%s</li>\n", e(l))
	}
	b.WriteString("</ul>\n<h2>Table 1, measured</h2>\n")
	writeHTMLTable(&b, tableRows(res.Rows), e)
	if res.Repeat > 1 {
		fmt.Fprintf(&b, "<h2>Repetitions (%d runs per scheme)</h2>\n<p>%s</p>\n", res.Repeat, e(repeatIntro(res)))
		writeHTMLTable(&b, repeatTable(res), e)
	}
	fmt.Fprintf(&b, "<h2>The study's Table 1 beside the measurement</h2>\n<p>%s</p>\n", e(StudyReading))
	writeHTMLTable(&b, studyRows(res.Rows), e)
	b.WriteString("<p>Expectations of the scenario not met:</p>\n<ul>\n")
	none := true
	for _, r := range res.Rows {
		if len(r.ExpectationsMiss) > 0 {
			none = false
			fmt.Fprintf(&b, "<li><b>%s</b>: %s</li>\n", e(r.Variant), e(strings.Join(r.ExpectationsMiss, "; ")))
		}
	}
	if none {
		b.WriteString("<li>none</li>\n")
	}
	b.WriteString("</ul>\n")
	for _, r := range res.Rows {
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "<p><b>Warning, %s</b>: %s</p>\n", e(r.Variant), e(w))
		}
	}
	b.WriteString("<h2>Figures</h2>\n")
	for _, f := range figs {
		svg := f.svg
		if i := strings.Index(svg, "<svg"); i > 0 {
			svg = svg[i:]
		}
		fmt.Fprintf(&b, "<figure>\n<h3>%s</h3>\n%s\n<figcaption>%s</figcaption>\n</figure>\n", e(f.title), svg, e(f.caption))
	}
	b.WriteString("<h2>Raw data</h2>\n<ul>\n")
	fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a>, <a href=\"%s\">%s</a></li>\n", FileTable, FileTable, FileJSON, FileJSON)
	for _, r := range res.Rows {
		d := e(filepath.ToSlash(r.RunDir))
		fmt.Fprintf(&b, "<li>%s: <a href=\"%s/report.html\">report</a>, <a href=\"%s/summary.json\">summary.json</a>, "+
			"<a href=\"%s/calls.csv\">calls.csv</a>, <a href=\"%s/users.csv\">users.csv</a>, "+
			"<a href=\"%s/trace.pcap\">trace.pcap</a></li>\n", e(r.Variant), d, d, d, d, d)
	}
	b.WriteString("</ul>\n</body></html>\n")
	return b.String()
}

// repeatIntro and repeatTable are the table of the repeated runs (compare.md and compare.html): per scheme and
// KPI, the mean with its 95 % CI over runs (t, cluster-robust t or Clopper–Pearson, by KPI).
func repeatIntro(res *Result) string {
	return fmt.Sprintf("The table above shows the first run of each scheme. Here every scheme ran %d times with the "+
		"seeds %d, %d, … (interleaved across schemes: the first run of every scheme, then the second, …); each cell "+
		"is the mean [95 %% CI] over the runs, n = runs with a value, and for per-user metrics the number of users "+
		"pooled. The CI of a mean is Student's t over the runs, of a per-user mean (interruptions) the "+
		"cluster-robust t with the runs as clusters, of a share (taken over) Clopper–Pearson with the runs as the "+
		"trials (docs/compare.md, \"Repetitions\"). "+
		"Per scheme: <scheme>/repeat.md.", res.Repeat, res.Seed, res.Seed+1)
}

func repeatTable(res *Result) [][]string {
	cols := []struct{ name, title string }{
		{"affected_users", "affected users"}, {"time_to_detect_s", "time to detect (s)"},
		{"mo_interruption_s", "MO interruption (s)"}, {"mt_interruption_s", "MT interruption (s)"},
		{"mo_taken_over", "MO taken over"}, {"mt_taken_over", "MT taken over"},
	}
	head := []string{"scheme", "runs"}
	for _, c := range cols {
		head = append(head, c.title)
	}
	out := [][]string{head}
	for _, r := range res.Rows {
		runs := "–"
		if r.Repeat != nil {
			runs = fmt.Sprintf("%d/%d", len(r.Repeat.Seeds), r.Repeat.Runs)
		}
		row := []string{r.Variant, runs}
		for _, c := range cols {
			row = append(row, r.Repeat.MeanCI(c.name))
		}
		out = append(out, row)
	}
	return out
}

func repeatSection(res *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Repetitions (%d runs per scheme)\n\n%s\n\n", res.Repeat, repeatIntro(res))
	writeMDTable(&b, repeatTable(res))
	return b.String()
}

// provenanceLine says what code and machine produced the comparison.
func provenanceLine(p *provenance.Info) string {
	if p == nil {
		return "Code and machine not recorded."
	}
	dirty := ""
	if p.Dirty {
		dirty = " with uncommitted changes"
	}
	return fmt.Sprintf("Code: commit `%s`%s, %s; machine: %s, %d cores, kernel %s; command `%s`.", p.Commit, dirty,
		p.GoVersion, p.CPUModel, p.CPUs, p.Kernel, strings.Join(p.CommandLine, " "))
}
