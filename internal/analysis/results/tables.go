package results

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// KPIRegressionTable is the KPI regression check's table: the quasi-pool's interruption and success after
// detection in the committed comparisons (committed/compare-<fault>/quasi-pool/summary.json) beside the runs
// of this code (now/compare-<fault>/quasi-pool/summary.json), for the P-CSCF and the S-CSCF killed.
func KPIRegressionTable(committed, now string) (string, error) {
	var b strings.Builder
	b.WriteString("| fault | n committed / now | MO interruption p50 / p95 committed (s) | now (s) | MO p95 change | MT p50 / p95 committed (s) | now (s) | MT p95 change | success after detection MO / MT now |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range []string{"pcscf", "scscf"} {
		rel := filepath.Join("compare-"+s+"-kill", "quasi-pool", "summary.json")
		o, err := ReadSummary(filepath.Join(committed, rel))
		if err != nil {
			return "", fmt.Errorf("kpi regression: %w", err)
		}
		n, err := ReadSummary(filepath.Join(now, rel))
		if err != nil {
			return "", fmt.Errorf("kpi regression: %w", err)
		}
		change := func(a, b *report.Percentiles) string {
			if a == nil || b == nil {
				return "–"
			}
			if a.P95 == 0 {
				return "n/a"
			}
			return num(math.Round((b.P95-a.P95)/a.P95*1000)/10) + " %"
		}
		fmt.Fprintf(&b, "| %s-kill | %d / %d | %s / %s | %s / %s | %s | %s / %s | %s / %s | %s | %s / %s |\n", s,
			o.AffectedUsers, n.AffectedUsers,
			pct(o.MO.InterruptionS, "p50"), pct(o.MO.InterruptionS, "p95"), pct(n.MO.InterruptionS, "p50"), pct(n.MO.InterruptionS, "p95"),
			change(o.MO.InterruptionS, n.MO.InterruptionS),
			pct(o.MT.InterruptionS, "p50"), pct(o.MT.InterruptionS, "p95"), pct(n.MT.InterruptionS, "p50"), pct(n.MT.InterruptionS, "p95"),
			change(o.MT.InterruptionS, n.MT.InterruptionS),
			r2(n.MO.SuccessRatioAfterDetection), r2(n.MT.SuccessRatioAfterDetection))
	}
	return b.String(), nil
}

// MutualCxTable is the mutual backup README's table of each scheme's Cx after the fault and replication, from
// <dir>/<scheme>/summary.json of one comparison.
func MutualCxTable(dir string, schemes []string) (string, error) {
	var b strings.Builder
	b.WriteString("| scheme | affected users | LIR after the fault (UAT 2: restoration) | SAR after the fault (UNREGISTERED_USER: restoration) | UAR after the fault (UAT 2: S-CSCF re-selection at registration) | replication messages / bytes (whole run) | failed calls (all users) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, v := range schemes {
		s, err := ReadSummary(filepath.Join(dir, v, "summary.json"))
		if err != nil {
			return "", fmt.Errorf("mutual: %w", err)
		}
		cx := s.CXAfterFault
		var msgs, bytes int
		if s.Signalling != nil {
			msgs, bytes = s.Signalling.ReplMessages, s.Signalling.ReplBytes
		}
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d (%d) | %d (%d) | %d / %d | %d of %d |\n", v, s.AffectedUsers,
			cx["LIR"]["total"], cx["LIR"]["uat2"], cx["SAR"]["total"], cx["SAR"]["sat3"], cx["UAR"]["total"], cx["UAR"]["uat2"],
			msgs, bytes, s.Calls.Failed, s.Calls.Total)
	}
	return b.String(), nil
}

// HealthTimeoutsTable is the table of docs/results/health-timeouts/README.md: for the runs before and after the
// passive-detection fix, the peer_state events (and those for a timeout), the success after detection and the
// expectations held.
func HealthTimeoutsTable(dir string) (string, error) {
	var b strings.Builder
	b.WriteString("| run | peer_state events | of which reason timeout | MO / MT success after detection | expectations held |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range []string{"before", "after"} {
		ev, err := os.ReadFile(filepath.Join(dir, r, "peer_state.jsonl"))
		if err != nil {
			return "", fmt.Errorf("health timeouts: %w", err)
		}
		var n, timeouts int
		for _, l := range lines(string(ev)) {
			n++
			if strings.Contains(l, `"reason":"timeout"`) {
				timeouts++
			}
		}
		s, err := ReadSummary(filepath.Join(dir, r, "summary.json"))
		if err != nil {
			return "", fmt.Errorf("health timeouts: %w", err)
		}
		e, err := ReadExpectations(filepath.Join(dir, r, "expectations.json"))
		if err != nil {
			return "", fmt.Errorf("health timeouts: %w", err)
		}
		e.Passed = true // the count only
		fmt.Fprintf(&b, "| %s | %d | %d | %s / %s | %s |\n", r, n, timeouts, ratio(s.MO.SuccessRatioAfterDetection),
			ratio(s.MT.SuccessRatioAfterDetection), e.held())
	}
	return b.String(), nil
}

// ratio is a ratio as it is, "null" when absent.
func ratio(x *float64) string {
	if x == nil {
		return "null"
	}
	return num(*x)
}

// LateUsers lists the affected users a study's runs (<dir>/<experiment>/<scheme>/rep*) restored after the bound
// (detection + one probe interval), so that a restored_at_bound below 1 can be read: one tab-separated line per
// late user (run, user, bound, restore, MT restore, MO restore, in seconds from the fault), then the count of
// late users over the users of the runs with a survival curve, and the range of their restoration times.
func LateUsers(dir, experiment, scheme string) (string, error) {
	runs, err := filepath.Glob(filepath.Join(dir, experiment, scheme, "rep*"))
	if err != nil {
		return "", err
	}
	slices.Sort(runs)
	var b strings.Builder
	b.WriteString("run\tuser\tbound_s\trestore_s\tmt_restore_s\tmo_restore_s\n")
	var users, late int
	var lo, hi *float64
	for _, run := range runs {
		s, err := ReadSummary(filepath.Join(run, "summary.json"))
		if err != nil {
			return "", fmt.Errorf("late users: %w", err)
		}
		if s.Survival == nil {
			continue
		}
		bound := s.Survival.BoundS
		rows, err := readCSV(filepath.Join(run, "users.csv"))
		if err != nil {
			return "", fmt.Errorf("late users: %w", err)
		}
		for _, row := range rows {
			users++
			r := row["restore_s"]
			rv, _ := strconv.ParseFloat(r, 64)
			if r != "" && rv <= bound {
				continue
			}
			fmt.Fprintf(&b, "%s\t%s\t%.2f\t%s\t%s\t%s\n", filepath.Base(run), row["impu"], bound, r, row["mt_restore_s"], row["mo_restore_s"])
			late++
			if r != "" {
				if lo == nil || rv < *lo {
					lo = &rv
				}
				if hi == nil || rv > *hi {
					hi = &rv
				}
			}
		}
	}
	g := func(x *float64) string {
		if x == nil {
			return ""
		}
		return fmt.Sprintf("%.6g", *x)
	}
	fmt.Fprintf(&b, "# %d of %d users restored after the bound; their time to restore %s–%s s\n", late, users, g(lo), g(hi))
	return b.String(), nil
}

// readCSV reads a simple CSV file (no quoted commas: users.csv) into one map per row, by the header's names.
func readCSV(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var header []string
	var rows []map[string]string
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ",")
		if header == nil {
			header = fields
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			if i < len(fields) {
				row[h] = fields[i]
			}
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// benchFile is what the overload comparison reads of a bench.json.
type benchFile struct {
	Capacity []struct {
		CallRateAsked float64        `json:"call_rate_asked"`
		Calls         int            `json:"calls"`
		AnsweredPerS  float64        `json:"answered_per_s"`
		FailureShare  float64        `json:"failure_share"`
		Setup180P95Ms float64        `json:"setup_180_p95_ms"`
		ByCause       map[string]int `json:"by_cause"`
		RunDir        string         `json:"run_dir"`
	} `json:"capacity"`
	Registration []struct {
		RegisterRateAsked float64        `json:"register_rate_asked"`
		Attempts          int            `json:"attempts"`
		RegistrationsPerS float64        `json:"registrations_per_s"`
		FailureShare      float64        `json:"failure_share"`
		P95Ms             float64        `json:"p95_ms"`
		ByCause           map[string]int `json:"by_cause"`
		RunDir            string         `json:"run_dir"`
	} `json:"registration"`
}

// OverloadTable is the BAC's chain cap against no chain signal from two benches (dir/cap and dir/nochain,
// docs/performance.md "Overload, measured"): answered calls/s and registrations/s per step, with n, the causes
// and the peer_state events of the step's run.
func OverloadTable(dir string) (string, error) {
	type row struct {
		variant, kind string
		rate          float64
		cells         []string
	}
	var rows []row
	for _, v := range []string{"nochain", "cap"} {
		var bf benchFile
		if err := readJSON(filepath.Join(dir, v, "bench.json"), &bf); err != nil {
			return "", fmt.Errorf("overload: %w", err)
		}
		causes := func(m map[string]int) string {
			var parts []string
			for _, k := range sortedKeys(m) {
				parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
			}
			if len(parts) == 0 {
				return "none"
			}
			return strings.Join(parts, ", ")
		}
		peerStates := func(runDir string) (string, error) {
			b, err := os.ReadFile(filepath.Join(dir, v, filepath.Base(runDir), "peer-state.jsonl"))
			if err != nil {
				return "", fmt.Errorf("overload: %w", err)
			}
			return itoa(bytes.Count(b, []byte("\n"))), nil
		}
		r1 := func(x float64) string { return num(math.Round(x*10) / 10) }
		share := func(x float64) string { return num(math.Round(x*1000) / 10) }
		for _, c := range bf.Capacity {
			n, err := peerStates(c.RunDir)
			if err != nil {
				return "", err
			}
			rows = append(rows, row{v, "calls", c.CallRateAsked, []string{num(c.CallRateAsked), itoa(c.Calls),
				r1(c.AnsweredPerS), share(c.FailureShare), num(math.Round(c.Setup180P95Ms)), causes(c.ByCause), n}})
		}
		for _, c := range bf.Registration {
			n, err := peerStates(c.RunDir)
			if err != nil {
				return "", err
			}
			rows = append(rows, row{v, "registrations", c.RegisterRateAsked, []string{num(c.RegisterRateAsked),
				itoa(c.Attempts), r1(c.RegistrationsPerS), share(c.FailureShare), num(math.Round(c.P95Ms)), causes(c.ByCause), n}})
		}
	}
	// by kind, then rate, then the variant: no chain signal first
	slices.SortStableFunc(rows, func(a, b row) int {
		return cmp.Or(strings.Compare(a.kind, b.kind), cmp.Compare(a.rate, b.rate), -strings.Compare(a.variant, b.variant))
	})
	var b strings.Builder
	b.WriteString("| kind | rate asked (/s) | BAC chain signal | n (attempts) | answered or registered /s | failed % | p95 (ms) | failures by cause | peer_state events |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		signal := "off (chain_target -1)"
		if r.variant == "cap" {
			signal = "cap (default)"
		}
		c := r.cells
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.kind, c[0], signal, c[1], c[2], c[3], c[4], c[5], c[6])
	}
	return b.String(), nil
}

// DefaultKPIs are the takeover KPIs KPITable shows when none are named.
var DefaultKPIs = []string{"affected_users", "mo.taken_over_before_reregistration", "mt.taken_over_before_reregistration",
	"mo.interruption_s.p50", "mo.interruption_s.p95", "mt.interruption_s.p50", "mt.interruption_s.p95",
	"mo.success_ratio_after_detection", "mt.success_ratio_after_detection", "calls.total", "calls.failed"}

// KPITable is a markdown table with one row per run directory (its summary.json, or summary.json.gz) and one column
// per metric (report.Summary.Lookup's dotted paths; "-" where the run has none).
func KPITable(dirs, metrics []string) (string, error) {
	if len(metrics) == 0 {
		metrics = DefaultKPIs
	}
	var b strings.Builder
	b.WriteString("| run | " + strings.Join(metrics, " | ") + " |\n|---" + strings.Repeat("|---", len(metrics)) + "|\n")
	for _, d := range dirs {
		p := filepath.Join(d, "summary.json")
		if _, err := os.Stat(p); err != nil {
			p += ".gz"
		}
		s, err := ReadSummary(p)
		if err != nil {
			return "", fmt.Errorf("kpi table: %w", err)
		}
		b.WriteString("| `" + filepath.ToSlash(d) + "`")
		for _, m := range metrics {
			if v, ok := s.Lookup(m); ok {
				b.WriteString(" | " + strconv.FormatFloat(v, 'g', 4, 64))
			} else {
				b.WriteString(" | -")
			}
		}
		b.WriteString(" |\n")
	}
	return b.String(), nil
}
