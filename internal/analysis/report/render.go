package report

import (
	"encoding/json"
	"fmt"
	"html"
	"sort"
	"strings"
	"time"
)

type kpiRow struct{ name, value string }

func fmtRatio(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", *p*100)
}

func fmtPct(p *Percentiles) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("p50 %.3f s, p95 %.3f s, max %.3f s (n=%d)", p.P50, p.P95, p.Max, p.Count)
}

func fmtLat(l Latency) string {
	if l.Count == 0 {
		return "–"
	}
	s := fmt.Sprintf("200: p50 %.1f ms, p95 %.1f ms (n=%d)", l.P50, l.P95, l.Count)
	if l.Count180 > 0 {
		s += fmt.Sprintf("; 180: p50 %.1f ms, p95 %.1f ms", l.P50180, l.P95180)
	}
	return s
}

func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "–"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func kpiRows(s *Summary) []kpiRow {
	rows := []kpiRow{{"affected users", fmt.Sprint(s.AffectedUsers)}}
	if len(s.Faults) == 0 {
		rows[0].value += " (no fault: the MO/MT rows cover every user)"
	}
	nodes := make([]string, 0, len(s.TimeToDetectS))
	for n := range s.TimeToDetectS {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	det := make([]string, len(nodes))
	for i, n := range nodes {
		det[i] = fmt.Sprintf("%s %.3f s", n, s.TimeToDetectS[n])
	}
	if len(det) == 0 {
		det = []string{"–"}
	}
	rows = append(rows, kpiRow{"time to detect", strings.Join(det, ", ")})
	for _, d := range []struct {
		n string
		v Direction
	}{{"MO", s.MO}, {"MT", s.MT}} {
		rows = append(rows,
			kpiRow{d.n + " calls after the fault (succeeded/attempts)", fmt.Sprintf("%d / %d", d.v.Succeeded, d.v.Attempts)},
			kpiRow{d.n + " success ratio after detection", fmt.Sprintf("%s (%d / %d)", fmtRatio(d.v.SuccessRatioAfterDetection),
				d.v.SucceededAfterDetection, d.v.AttemptsAfterDetection)},
			kpiRow{d.n + " taken over before re-registration", fmt.Sprintf("%s (%d of %d users tested; %d more "+
				"refreshed their registration before any test)", fmtRatio(d.v.TakenOverBeforeReregistration),
				d.v.AffectedUsersWithSuccess, d.v.UsersTested, d.v.RefreshedFirst)},
			kpiRow{d.n + " interruption", fmtPct(d.v.InterruptionS)},
		)
	}
	if sv := s.Survival; sv != nil {
		med := func(c KMCurve) string {
			if c.MedianS == nil {
				return "not reached"
			}
			return fmt.Sprintf("%.3f s", *c.MedianS)
		}
		for _, c := range []struct {
			n string
			c KMCurve
		}{{"MT (answered)", sv.MT}, {"MO (answered)", sv.MO}, {"service (MT and MO answered)", sv.Service},
			{"setup started (probe placed)", sv.SetupStarted}} {
			rows = append(rows, kpiRow{"time to restore, " + c.n, fmt.Sprintf("median %s; %d of %d users restored, %d censored",
				med(c.c), c.c.Restored, c.c.N, c.c.Censored)})
		}
		if sv.Legacy != "" {
			rows = append(rows, kpiRow{"restoration timing", "converted: " + sv.Legacy})
		}
		rows = append(rows, kpiRow{"detection, first and last node",
			fmt.Sprintf("%.3f s and %.3f s after the fault", sv.DetectedFirstS, sv.DetectedLastS)})
		rows = append(rows, kpiRow{"restored by last detection + one probe interval",
			fmt.Sprintf("%.3f [%.3f, %.3f] of users by %.3f s (probes every %g s)", sv.RestoredAtBound,
				sv.RestoredAtBoundBand[0], sv.RestoredAtBoundBand[1], sv.BoundS, sv.IntervalS)})
		for _, rd := range sv.RestoredAt {
			rows = append(rows, kpiRow{fmt.Sprintf("restored by %g s", rd.TS),
				fmt.Sprintf("%.3f [%.3f, %.3f]", rd.Restored, rd.Lo, rd.Hi)})
		}
		if sv.NotProbed > 0 {
			rows = append(rows, kpiRow{"affected users probed", fmt.Sprintf("%d of %d (the curves are theirs; the "+
				"others were outside reachability.sample or behind a fault that starts no probes)", sv.Users, sv.Users+sv.NotProbed)})
		}
	}
	rows = append(rows,
		kpiRow{"setup latency, normal calls", fmtLat(s.SetupLatencyMs.Normal)},
		kpiRow{"setup latency, takeover calls", fmtLat(s.SetupLatencyMs.Takeover)},
		kpiRow{"calls (answered / failed / total)", fmt.Sprintf("%d / %d / %d", s.Calls.Answered, s.Calls.Failed, s.Calls.Total)},
		kpiRow{"failed calls by cause", fmtCounts(s.Calls.ByCause)},
		kpiRow{"registrations (failed / total)", fmt.Sprintf("%d / %d", s.Registrations.Failed, s.Registrations.Total)},
	)
	rows = append(rows, workloadRows(s)...)
	cmds := make([]string, 0, len(s.CX))
	for c := range s.CX {
		cmds = append(cmds, c)
	}
	sort.Strings(cmds)
	for _, c := range cmds {
		v := fmtCounts(s.CX[c])
		if af, ok := s.CXAfterFault[c]; ok {
			v += "; after the fault: " + fmtCounts(af)
		}
		rows = append(rows, kpiRow{"Cx " + c, v})
	}
	rows = append(rows, kpiRow{"messages in the trace (SIP / Diameter)", fmt.Sprintf("%d / %d", s.Pcap.SIP, s.Pcap.Diameter)})
	if h := s.Health; h != nil {
		rows = append(rows, kpiRow{"run health", h.Describe()})
	}
	return rows
}

// header lines describing what ran.
func whatRan(r *run, s *Summary) []kpiRow {
	rows := []kpiRow{
		{"scenario", s.Scenario},
		{"description", s.Description},
		{"seed", fmt.Sprint(s.Seed)},
		{"start", time.Unix(0, s.StartNs).UTC().Format(time.RFC3339Nano)},
		{"duration", fmt.Sprintf("%.1f s", s.DurationS)},
	}
	for _, f := range s.Faults {
		v := fmt.Sprintf("%s %s at %.3f s", f.Kind, f.Target, f.T0S)
		if f.Params != "" {
			v += " (" + f.Params + ")"
		}
		if f.ForS > 0 {
			v += fmt.Sprintf(" for %.1f s", f.ForS)
		}
		v += fmt.Sprintf(" (scheduled %.3f s; %d users affected)", f.AtS, f.AffectedUsers)
		if f.PlannedTarget != "" {
			v += "; victim drawn from " + f.PlannedTarget
		}
		if f.JitterS > 0 && f.PlannedAtS != nil {
			v += fmt.Sprintf("; instant drawn from [%.1f, %.1f) s", *f.PlannedAtS, *f.PlannedAtS+f.JitterS)
		}
		if len(f.Nodes) > 0 {
			v += "; nodes " + strings.Join(f.Nodes, ", ")
		}
		if f.HealS != nil {
			v += fmt.Sprintf("; healed at %.3f s", *f.HealS)
		}
		if len(f.TimeToDetectS) > 0 {
			var det []string
			for _, n := range sortedKeys(f.TimeToDetectS) {
				det = append(det, fmt.Sprintf("%s %.2f s", n, f.TimeToDetectS[n]))
			}
			v += "; detected by " + strings.Join(det, ", ")
		} else {
			v += "; no node reported it down"
		}
		if w := f.During; w != nil {
			v += fmt.Sprintf("; calls during it %d/%d answered", w.Answered, w.Calls)
		}
		if w := f.AfterHeal; w != nil {
			v += fmt.Sprintf(", after it %d/%d", w.Answered, w.Calls)
		}
		rows = append(rows, kpiRow{"fault", v})
	}
	if len(s.Faults) == 0 {
		rows = append(rows, kpiRow{"fault", "none (baseline)"})
	}
	if t := r.rawScen["topology"]; t != nil {
		b, _ := json.Marshal(t)
		rows = append(rows, kpiRow{"topology", string(b)})
	}
	if t := r.rawScen["traffic"]; t != nil {
		b, _ := json.Marshal(t)
		rows = append(rows, kpiRow{"traffic", string(b)})
	}
	if len(r.nodes) > 0 {
		ns := make([]string, len(r.nodes))
		for i, n := range r.nodes {
			addr := n.Listen
			if n.HSS != nil && n.HSS.DiameterListen != "" {
				addr = n.HSS.DiameterListen
			}
			ns[i] = fmt.Sprintf("%s (%s)", n.Name, addr)
		}
		rows = append(rows, kpiRow{"nodes", strings.Join(ns, ", ")})
	}
	if p := s.Provenance; p != nil {
		code := "commit " + p.Commit
		if p.Dirty {
			code += " with uncommitted changes"
		}
		if r.scenario.BinDir != "" {
			code += "; nodes from prebuilt binaries in " + r.scenario.BinDir
		}
		rows = append(rows, kpiRow{"code", code + "; " + p.GoVersion},
			kpiRow{"machine", fmt.Sprintf("%s, %d cores, kernel %s (%s)", p.CPUModel, p.CPUs, p.Kernel, p.OS)},
			kpiRow{"command", strings.Join(p.CommandLine, " ")})
	}
	return rows
}

func mdEscape(s string) string { return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s) }

// checksHeading is the expectations section's title: how many held.
func checksHeading(checks []Check) string {
	held := 0
	for _, c := range checks {
		if c.OK {
			held++
		}
	}
	verdict := "all held"
	if held < len(checks) {
		verdict = fmt.Sprintf("%d FAILED", len(checks)-held)
	}
	return fmt.Sprintf("Expectations: %d of %d held (%s)", held, len(checks), verdict)
}

// checkRow is a check's cells: expectation, metric, value, expected, held.
func checkRow(c Check) []string {
	held := "yes"
	if !c.OK {
		held = "NO"
		if c.Reason != "" {
			held += ": " + c.Reason
		}
	}
	return []string{c.Name, c.Metric, c.Value, c.Expected, held}
}

var checkColumns = []string{"expectation", "metric", "value", "expected", "held"}

func markdown(r *run, s *Summary, checks []Check, plots []namedSVG, ladders []ladder) string {
	var b strings.Builder
	title := s.Scenario
	if title == "" {
		title = "run"
	}
	fmt.Fprintf(&b, "# Report: %s\n\n", mdEscape(title))
	b.WriteString("| | |\n|---|---|\n")
	for _, row := range whatRan(r, s) {
		if row.value != "" {
			fmt.Fprintf(&b, "| %s | %s |\n", row.name, mdEscape(row.value))
		}
	}
	if len(checks) > 0 {
		fmt.Fprintf(&b, "\n## %s\n\nThe scenario's expectations, checked against this run's summary (also in expectations.json).\n\n", checksHeading(checks))
		b.WriteString("| " + strings.Join(checkColumns, " | ") + " |\n|" + strings.Repeat("---|", len(checkColumns)) + "\n")
		for _, c := range checks {
			row := checkRow(c)
			for i := range row {
				row[i] = mdEscape(row[i])
			}
			if !c.OK {
				row[len(row)-1] = "**" + row[len(row)-1] + "**"
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
	}
	b.WriteString("\n## Key performance indicators\n\nDefinitions: docs/report.md. Machine-readable: [summary.json](summary.json); per call: [calls.csv](calls.csv).\n\n")
	b.WriteString("| KPI | value |\n|---|---|\n")
	for _, row := range kpiRows(s) {
		fmt.Fprintf(&b, "| %s | %s |\n", row.name, mdEscape(row.value))
	}
	b.WriteString("\n## Call success over time\n\n")
	for _, p := range plots {
		fmt.Fprintf(&b, "![%s](%s)\n\n", p.title, filepathToURL(p.file))
	}
	b.WriteString("## Ladder diagrams of takeover calls\n\n")
	if len(ladders) == 0 {
		b.WriteString("No successful call of an affected user after the fault was found in the message trace.\n\n")
	}
	for _, l := range ladders {
		png := ""
		if l.info.PNG != "" {
			png = fmt.Sprintf(" ([PNG](%s))", filepathToURL(l.info.PNG))
		}
		fmt.Fprintf(&b, "- %s: call of %s at +%.3f s, Call-ID `%s`, %d messages, lanes %s: [%s](%s)%s\n",
			strings.ToUpper(l.info.Direction), l.info.IMPU, l.info.StartS, l.info.CallID, l.info.Messages,
			strings.Join(l.info.Lanes, ", "), l.info.File, filepathToURL(l.info.File), png)
	}
	b.WriteString(memberLoadMarkdown(s.MemberLoad))
	if rows := refusalRows(s); len(rows) > 0 {
		fmt.Fprintf(&b, "\n## Refused requests\n\n%d requests refused by the nodes (SIP 403 with a `refused` event, or refused by the "+
			"HSS on Cx): by node and reason in summary.json, `security.refused`.\n\n", s.Security.RefusedTotal)
		b.WriteString("| " + strings.Join(refusalColumns, " | ") + " |\n|" + strings.Repeat("---|", len(refusalColumns)) + "\n")
		for _, row := range rows {
			for i := range row {
				row[i] = mdEscape(row[i])
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
	}
	b.WriteString(stormMarkdown(s))
	if s.Pcap.File != "" {
		fmt.Fprintf(&b, "\n## Capture\n\n[%s](%s): %d packets (%d SIP, %d Diameter; %d receiver copies dropped). "+
			"Diameter is TCP on the HSS port; Wireshark decodes 3868 as Diameter by default.\n", s.Pcap.File, s.Pcap.File,
			s.Pcap.Packets, s.Pcap.SIP, s.Pcap.Diameter, s.Pcap.Duplicates)
	}
	if len(s.Warnings) > 0 {
		b.WriteString("\n## Warnings\n\n")
		for _, w := range s.Warnings {
			fmt.Fprintf(&b, "- %s\n", mdEscape(w))
		}
	}
	if s.Events.Errors > 0 {
		fmt.Fprintf(&b, "\n## Event errors\n\n%d of %d event lines could not be read and are left out of every figure "+
			"(docs/events.md):\n\n", s.Events.Errors, s.Events.Errors+s.Events.Read)
		for _, l := range s.Events.ErrorLines {
			fmt.Fprintf(&b, "- %s\n", mdEscape(l))
		}
		if more := s.Events.Errors - len(s.Events.ErrorLines); more > 0 {
			fmt.Fprintf(&b, "- … and %d more\n", more)
		}
	}
	return b.String()
}

func filepathToURL(p string) string { return strings.ReplaceAll(p, `\`, "/") }

// inlineSVG strips the XML declaration so an SVG document can sit inside HTML.
func inlineSVG(svg string) string {
	svg = strings.TrimSpace(svg)
	if strings.HasPrefix(svg, "<?xml") {
		if i := strings.Index(svg, "?>"); i >= 0 {
			svg = strings.TrimSpace(svg[i+2:])
		}
	}
	return svg
}

func htmlReport(r *run, s *Summary, checks []Check, plots []namedSVG, ladders []ladder) string {
	var b strings.Builder
	e := html.EscapeString
	title := s.Scenario
	if title == "" {
		title = "run"
	}
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Report: %s</title>\n", e(title))
	b.WriteString(`<style>body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em}` +
		`table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}` +
		`th{background:#f2f2f2}figure{margin:1em 0;overflow-x:auto}code{background:#f5f5f5}</style></head><body>` + "\n")
	fmt.Fprintf(&b, "<h1>Report: %s</h1>\n<table>\n", e(title))
	for _, row := range whatRan(r, s) {
		if row.value != "" {
			fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>\n", e(row.name), e(row.value))
		}
	}
	b.WriteString("</table>\n")
	if len(checks) > 0 {
		fmt.Fprintf(&b, "<h2 id=\"expectations\">%s</h2>\n<p>The scenario's expectations, checked against this run's summary "+
			"(also in <a href=\"expectations.json\">expectations.json</a>).</p>\n<table>\n<tr>", e(checksHeading(checks)))
		for _, c := range checkColumns {
			fmt.Fprintf(&b, "<th>%s</th>", e(c))
		}
		b.WriteString("</tr>\n")
		for _, c := range checks {
			style := ""
			if !c.OK {
				style = ` style="background:#fdd"`
			}
			fmt.Fprintf(&b, "<tr%s>", style)
			for _, cell := range checkRow(c) {
				fmt.Fprintf(&b, "<td>%s</td>", e(cell))
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("<h2>Key performance indicators</h2>\n<p>Definitions: docs/report.md. Machine-readable: " +
		"<a href=\"summary.json\">summary.json</a>; per call: <a href=\"calls.csv\">calls.csv</a>.</p>\n<table>\n<tr><th>KPI</th><th>value</th></tr>\n")
	for _, row := range kpiRows(s) {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td></tr>\n", e(row.name), e(row.value))
	}
	b.WriteString("</table>\n<h2>Call success over time</h2>\n")
	for _, p := range plots {
		fmt.Fprintf(&b, "<figure id=\"%s\">\n%s\n<figcaption>%s</figcaption></figure>\n", e(strings.TrimSuffix(filepathToURL(p.file), ".svg")),
			inlineSVG(p.svg), e(p.title))
	}
	b.WriteString("<h2>Ladder diagrams of takeover calls</h2>\n")
	if len(ladders) == 0 {
		b.WriteString("<p>No successful call of an affected user after the fault was found in the message trace.</p>\n")
	}
	for _, l := range ladders {
		fmt.Fprintf(&b, "<figure id=\"ladder-%s\">\n%s\n<figcaption>%s call of %s, Call-ID <code>%s</code> (%d messages)</figcaption></figure>\n",
			e(l.info.Direction), inlineSVG(l.svg), e(strings.ToUpper(l.info.Direction)), e(l.info.IMPU), e(l.info.CallID), l.info.Messages)
	}
	if rows := refusalRows(s); len(rows) > 0 {
		fmt.Fprintf(&b, "<h2 id=\"refused\">Refused requests</h2>\n<p>%d requests refused by the nodes (SIP 403 with a <code>refused</code> "+
			"event, or refused by the HSS on Cx): by node and reason in summary.json, <code>security.refused</code>.</p>\n",
			s.Security.RefusedTotal)
		writeHTMLTable(&b, refusalColumns, rows)
	}
	b.WriteString(stormHTML(s))
	if s.Pcap.File != "" {
		fmt.Fprintf(&b, "<h2>Capture</h2>\n<p><a href=\"%s\">%s</a>: %d packets (%d SIP, %d Diameter; %d receiver copies dropped).</p>\n",
			e(s.Pcap.File), e(s.Pcap.File), s.Pcap.Packets, s.Pcap.SIP, s.Pcap.Diameter, s.Pcap.Duplicates)
	}
	if len(s.Warnings) > 0 {
		b.WriteString("<h2>Warnings</h2>\n<ul>\n")
		for _, w := range s.Warnings {
			fmt.Fprintf(&b, "<li>%s</li>\n", e(w))
		}
		b.WriteString("</ul>\n")
	}
	if s.Events.Errors > 0 {
		fmt.Fprintf(&b, "<h2>Event errors</h2>\n<p>%d of %d event lines could not be read and are left out of every "+
			"figure (docs/events.md):</p>\n<ul>\n", s.Events.Errors, s.Events.Errors+s.Events.Read)
		for _, l := range s.Events.ErrorLines {
			fmt.Fprintf(&b, "<li>%s</li>\n", e(l))
		}
		if more := s.Events.Errors - len(s.Events.ErrorLines); more > 0 {
			fmt.Fprintf(&b, "<li>… and %d more</li>\n", more)
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</body></html>\n")
	return b.String()
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
