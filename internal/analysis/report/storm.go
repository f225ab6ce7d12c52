package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// NodeOverload is what one node shed, from its "overload" events (docs/architecture.md, "Overload control"): a
// node writes one in every second in which it shed new requests.
type NodeOverload struct {
	// Shed is the new requests the node refused (503 with Retry-After, or DIAMETER_TOO_BUSY) during the run.
	Shed int `json:"shed"`
	// Admitted is the new requests it admitted in the seconds it shed.
	Admitted int `json:"admitted"`
	// PeakShedPerS is the most it shed in one event's second.
	PeakShedPerS int `json:"peak_shed_per_s"`
	// FirstS and LastS are the offsets of its first and last event that shed something.
	FirstS float64 `json:"first_s"`
	LastS  float64 `json:"last_s"`
	// MaxShedShare and MaxLagMs are the highest lag-based shed share and smoothed scheduling lag it reported.
	MaxShedShare float64 `json:"max_shed_share"`
	MaxLagMs     float64 `json:"max_lag_ms"`
}

// Storm is the load the first fault set off (docs/report.md, "Storm"): the registrations and the Cx requests per
// second before and after it, the failures after it, and how long until every affected user was served again.
// Everything after the run's end (t0 + duration: the phones de-registering as they stop) is left out.
type Storm struct {
	// FromS is the first fault's instant (offset from t0); the profiles' bins start there.
	FromS float64 `json:"from_s"`
	// Register counts the phones' registration procedures (initial, refresh, restoration; not the de-registrations
	// at the end) by start time.
	Register LoadProfile `json:"register"`
	// Cx counts the HSS's answered Cx requests (cx_answer events) by command, and "total".
	Cx map[string]LoadProfile `json:"cx"`
	// RegistrationsFailed and CallsFailed count the procedures started after the fault that failed (calls by the
	// caller's record).
	RegistrationsFailed int `json:"registrations_failed"`
	CallsFailed         int `json:"calls_failed"`
	// AffectedUsers is the users registered through the faulted node; UsersBack those with a successful
	// registration or call (either direction) started after the fault.
	AffectedUsers int `json:"affected_users"`
	UsersBack     int `json:"users_back"`
	// BackS is, per affected user back, the time from the fault to the start of that first success.
	BackS *Percentiles `json:"back_s,omitempty"`
	// AllBackS is when the last affected user was back (the max of BackS), absent when some never were.
	AllBackS *float64 `json:"all_back_s,omitempty"`
}

// LoadProfile is a rate over the run in one-second bins.
type LoadProfile struct {
	// BaselinePerS is the mean per second from t0 to the fault.
	BaselinePerS float64 `json:"baseline_per_s"`
	// PeakPerS is the busiest one-second bin from the fault on, PeakAtS its start (offset from t0).
	PeakPerS int     `json:"peak_per_s"`
	PeakAtS  float64 `json:"peak_at_s"`
	// Total counts everything from the fault on.
	Total int `json:"total"`
	// PerS is the profile: one-second bins from the fault to the end of the run.
	PerS []int `json:"per_s"`
}

// overload sums the nodes' overload events into Summary.Overload (absent when no node shed anything).
func (a *analysis) overload(r *run) {
	m := map[string]*NodeOverload{}
	for _, e := range r.events {
		x, ok := e.Data.(obs.Overload)
		if !ok || x.Shed == 0 {
			continue
		}
		n := m[e.Node]
		at := a.offset(e.TNs)
		if n == nil {
			n = &NodeOverload{FirstS: at}
			m[e.Node] = n
		}
		n.Shed += int(x.Shed)
		n.Admitted += int(x.Admitted)
		n.PeakShedPerS = max(n.PeakShedPerS, int(x.Shed))
		n.FirstS, n.LastS = math.Min(n.FirstS, at), math.Max(n.LastS, at)
		n.MaxShedShare = max(n.MaxShedShare, round(x.ShedShare))
		n.MaxLagMs = max(n.MaxLagMs, round(x.LagMs))
	}
	if len(m) > 0 {
		a.s.Overload = m
	}
}

// storm fills Summary.Storm for a run with a fault.
func (a *analysis) storm(r *run) {
	if a.firstT0 == 0 {
		return
	}
	t0, start := a.firstT0, a.s.StartNs
	end := max(start+int64(math.Round(a.s.DurationS*1e9)), t0+int64(1e9))
	bins := int((end - t0 + 999_999_999) / 1_000_000_000)
	before := float64(t0-start) / 1e9
	profile := func() *profileAcc { return &profileAcc{p: LoadProfile{PerS: make([]int, bins)}} }
	add := func(pa *profileAcc, tNs int64) {
		switch {
		case tNs >= end:
			// after the run: the phones' de-registrations (and their SARs) when they stop
		case tNs >= t0:
			if i := int((tNs - t0) / 1_000_000_000); i < bins {
				pa.p.PerS[i]++
				pa.p.Total++
			}
		case tNs >= start:
			pa.before++
		}
	}
	st := &Storm{FromS: a.offset(t0), Cx: map[string]LoadProfile{}, AffectedUsers: len(a.affected)}
	reg := profile()
	back := map[string]int64{}
	for i := range r.records {
		x := &r.records[i]
		isReg := x.Type == "register" && x.Kind != "deregister"
		if isReg {
			add(reg, x.TNs)
		}
		if x.TNs < t0 || x.TNs >= end {
			continue
		}
		switch {
		case isReg && !x.ok():
			st.RegistrationsFailed++
		case x.Type == "call" && x.Direction == "mo" && !x.ok():
			st.CallsFailed++
		}
		if u, ok := a.affected[x.IMPU]; ok && x.ok() && x.TNs >= u.t0Ns && (isReg || x.Type == "call") {
			if b, seen := back[x.IMPU]; !seen || x.TNs < b {
				back[x.IMPU] = x.TNs
			}
		}
	}
	st.Register = reg.done(before, a, t0)
	cx := map[string]*profileAcc{"total": profile()}
	for _, e := range r.events {
		x, ok := e.Data.(obs.CxAnswer)
		if !ok {
			continue
		}
		cmd := x.Cmd
		if cmd == "" {
			cmd = "unknown"
		}
		if cx[cmd] == nil {
			cx[cmd] = profile()
		}
		add(cx[cmd], e.TNs)
		add(cx["total"], e.TNs)
	}
	for cmd, pa := range cx {
		st.Cx[cmd] = pa.done(before, a, t0)
	}
	var backS []float64
	for impu, tNs := range back {
		backS = append(backS, float64(tNs-a.affected[impu].t0Ns)/1e9)
	}
	st.UsersBack = len(backS)
	st.BackS = percentiles(backS)
	if st.BackS != nil && st.UsersBack == st.AffectedUsers {
		m := st.BackS.Max
		st.AllBackS = &m
	}
	a.s.Storm = st
}

type profileAcc struct {
	p      LoadProfile
	before int
}

func (pa *profileAcc) done(beforeS float64, a *analysis, t0 int64) LoadProfile {
	p := pa.p
	if beforeS > 0 {
		p.BaselinePerS = round(float64(pa.before) / beforeS)
	}
	for i, n := range p.PerS {
		if n > p.PeakPerS {
			p.PeakPerS, p.PeakAtS = n, a.offset(t0+int64(i)*1_000_000_000)
		}
	}
	return p
}

var (
	overloadColumns = []string{"node", "shed", "admitted meanwhile", "peak shed/s", "first s", "last s", "max shed share", "max lag ms"}
	stormColumns    = []string{"what", "baseline /s", "peak /s", "peak at s", "total after the fault"}
)

// overloadRows are the "Shed load" table's rows, by node name.
func overloadRows(s *Summary) [][]string {
	nodes := make([]string, 0, len(s.Overload))
	for n := range s.Overload {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var rows [][]string
	for _, n := range nodes {
		o := s.Overload[n]
		rows = append(rows, []string{n, fmt.Sprint(o.Shed), fmt.Sprint(o.Admitted), fmt.Sprint(o.PeakShedPerS),
			fmt.Sprintf("%.1f", o.FirstS), fmt.Sprintf("%.1f", o.LastS), fmt.Sprintf("%.2f", o.MaxShedShare),
			fmt.Sprintf("%.1f", o.MaxLagMs)})
	}
	return rows
}

// stormRows are the "Storm" table's rows: registrations, Cx by command, Cx in all.
func stormRows(st *Storm) [][]string {
	row := func(name string, p LoadProfile) []string {
		return []string{name, fmt.Sprintf("%.2f", p.BaselinePerS), fmt.Sprint(p.PeakPerS), fmt.Sprintf("%.0f", p.PeakAtS),
			fmt.Sprint(p.Total)}
	}
	rows := [][]string{row("registrations (phones)", st.Register)}
	cmds := make([]string, 0, len(st.Cx))
	for c := range st.Cx {
		if c != "total" {
			cmds = append(cmds, c)
		}
	}
	sort.Strings(cmds)
	for _, c := range cmds {
		rows = append(rows, row("Cx "+c+" (HSS)", st.Cx[c]))
	}
	if t, ok := st.Cx["total"]; ok {
		rows = append(rows, row("Cx, all commands (HSS)", t))
	}
	return rows
}

// stormText is the sentence under the "Storm" table.
func stormText(st *Storm) string {
	t := fmt.Sprintf("After the fault: %d registrations and %d calls failed. Affected users: %d, back (a successful "+
		"registration or call): %d", st.RegistrationsFailed, st.CallsFailed, st.AffectedUsers, st.UsersBack)
	if st.BackS != nil {
		t += fmt.Sprintf("; time to back p50 %.1f s, p95 %.1f s", st.BackS.P50, st.BackS.P95)
	}
	if st.AllBackS != nil {
		t += fmt.Sprintf("; every affected user back after %.1f s", *st.AllBackS)
	} else if st.AffectedUsers > 0 {
		t += fmt.Sprintf("; %d never back before the end of the run", st.AffectedUsers-st.UsersBack)
	}
	return t + "."
}

const (
	shedLoadIntro = "New requests refused with 503 + Retry-After (the HSS: DIAMETER_TOO_BUSY), from the nodes' " +
		"overload events (summary.json overload)."
	stormIntro = "The load after the fault at %.1f s (summary.json storm; docs/report.md, \"Storm\"). Baseline: mean " +
		"per second from t0 to the fault; peak: the busiest second from the fault on."
)

// stormMarkdown is the report's "Shed load" and "Storm" sections ("" when the run has neither).
func stormMarkdown(s *Summary) string {
	var b strings.Builder
	table := func(cols []string, rows [][]string) {
		b.WriteString("| " + strings.Join(cols, " | ") + " |\n|" + strings.Repeat("---|", len(cols)) + "\n")
		for _, row := range rows {
			for i := range row {
				row[i] = mdEscape(row[i])
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
	}
	if len(s.Overload) > 0 {
		b.WriteString("\n## Shed load\n\n" + shedLoadIntro + "\n\n")
		table(overloadColumns, overloadRows(s))
	}
	st := s.Storm
	if st == nil {
		return b.String()
	}
	fmt.Fprintf(&b, "\n## Storm\n\n"+stormIntro+"\n\n", st.FromS)
	table(stormColumns, stormRows(st))
	b.WriteString("\n" + stormText(st) + "\n\nRegistrations per second from the fault on: " + intsLine(st.Register.PerS) + "\n")
	if t, ok := st.Cx["total"]; ok {
		b.WriteString("\nCx requests per second from the fault on: " + intsLine(t.PerS) + "\n")
	}
	return b.String()
}

// stormHTML is stormMarkdown for report.html.
func stormHTML(s *Summary) string {
	var b strings.Builder
	e := html.EscapeString
	table := func(cols []string, rows [][]string) { writeHTMLTable(&b, cols, rows) }
	if len(s.Overload) > 0 {
		fmt.Fprintf(&b, "<h2 id=\"shed-load\">Shed load</h2>\n<p>%s</p>\n", e(shedLoadIntro))
		table(overloadColumns, overloadRows(s))
	}
	st := s.Storm
	if st == nil {
		return b.String()
	}
	fmt.Fprintf(&b, "<h2 id=\"storm\">Storm</h2>\n<p>%s</p>\n", e(fmt.Sprintf(stormIntro, st.FromS)))
	table(stormColumns, stormRows(st))
	fmt.Fprintf(&b, "<p>%s</p>\n<p>Registrations per second from the fault on: <code>%s</code></p>\n", e(stormText(st)),
		e(strings.Trim(intsLine(st.Register.PerS), "`")))
	if t, ok := st.Cx["total"]; ok {
		fmt.Fprintf(&b, "<p>Cx requests per second from the fault on: <code>%s</code></p>\n", e(strings.Trim(intsLine(t.PerS), "`")))
	}
	return b.String()
}

// intsLine writes a profile as "3 5 40 12 …" (at most 120 bins).
func intsLine(xs []int) string {
	var parts []string
	for i, x := range xs {
		if i == 120 {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(xs)-i))
			break
		}
		parts = append(parts, fmt.Sprint(x))
	}
	return "`" + strings.Join(parts, " ") + "`"
}

// writeHTMLTable writes a table with a header row of cols and one row per entry of rows, every cell escaped.
func writeHTMLTable(b *strings.Builder, cols []string, rows [][]string) {
	e := html.EscapeString
	b.WriteString("<table>\n<tr>")
	for _, c := range cols {
		fmt.Fprintf(b, "<th>%s</th>", e(c))
	}
	b.WriteString("</tr>\n")
	for _, row := range rows {
		b.WriteString("<tr>")
		for _, v := range row {
			fmt.Fprintf(b, "<td>%s</td>", e(v))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
}
