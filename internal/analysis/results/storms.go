package results

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// stormRows are the storm table's rows: a label and the value of one run.
var stormRows = []struct {
	label string
	value func(s *report.Summary, p map[string]ProbeCount) string
}{
	{"affected users", func(s *report.Summary, _ map[string]ProbeCount) string { return itoa(s.AffectedUsers) }},
	{"affected users probed (reachability.sample)", survival(func(v *report.Survival) string { return itoa(v.Users) })},
	{"probed users answered again by the last detection + one probe interval", survival(func(v *report.Survival) string { return num(v.RestoredAtBound) })},
	{"probed users answered again by the end (MT and MO)", survival(func(v *report.Survival) string {
		return fmt.Sprintf("%d of %d", v.Service.Restored, v.Service.N)
	})},
	{"median time to the answer, probed users (s)", survival(func(v *report.Survival) string {
		if v.Service.MedianS == nil {
			return "not reached"
		}
		return num(*v.Service.MedianS)
	})},
	{"registrations/s: baseline → peak (at s after t0)", storm(func(st *report.Storm) string {
		r := st.Register
		return fmt.Sprintf("%s → %d (%s)", num(r.BaselinePerS), r.PeakPerS, num(math.Floor(r.PeakAtS)))
	})},
	{"registrations after the fault", storm(func(st *report.Storm) string { return itoa(st.Register.Total) })},
	{"registrations/s from the fault on: median of the seconds", storm(func(st *report.Storm) string { return median(st.Register.PerS) })},
	{"Cx/s at the HSS, all commands: baseline → peak", storm(func(st *report.Storm) string {
		t := st.Cx["total"]
		return fmt.Sprintf("%s → %d", num(t.BaselinePerS), t.PeakPerS)
	})},
	{"Cx/s at the HSS from the fault on: median of the seconds", storm(func(st *report.Storm) string { return median(st.Cx["total"].PerS) })},
	{"UAR / MAR / SAR / LIR after the fault", storm(func(st *report.Storm) string {
		return fmt.Sprintf("%d / %d / %d / %d", st.Cx["UAR"].Total, st.Cx["MAR"].Total, st.Cx["SAR"].Total, st.Cx["LIR"].Total)
	})},
	{"LIR/s: baseline → peak", storm(func(st *report.Storm) string {
		return fmt.Sprintf("%s → %d", num(st.Cx["LIR"].BaselinePerS), st.Cx["LIR"].PeakPerS)
	})},
	{"of the LIRs: MT probes (one LIR each) / LIR with User-Authorization-Type 2", func(s *report.Summary, p map[string]ProbeCount) string {
		return fmt.Sprintf("%d / %d", p["mt"].Attempts, s.CXAfterFault["LIR"]["uat2"])
	}},
	{"SAR restoring a registration (Server-Assignment-Type 3) after the fault", func(s *report.Summary, _ map[string]ProbeCount) string {
		return itoa(s.CXAfterFault["SAR"]["sat3"])
	}},
	{"affected users' own calls after the fault, answered / attempted: MO, MT", func(s *report.Summary, _ map[string]ProbeCount) string {
		return fmt.Sprintf("%d / %d, %d / %d", s.MO.Succeeded, s.MO.Attempts, s.MT.Succeeded, s.MT.Attempts)
	}},
	{"calls / registrations failed after the fault", storm(func(st *report.Storm) string {
		return fmt.Sprintf("%d / %d", st.CallsFailed, st.RegistrationsFailed)
	})},
	{"affected users back by their own traffic (a registration or call)", storm(func(st *report.Storm) string {
		return fmt.Sprintf("%d of %d", st.UsersBack, st.AffectedUsers)
	})},
	{"time to back p50 / p95 / max (s)", storm(func(st *report.Storm) string {
		b := st.BackS
		if b == nil || b.Count == 0 {
			return "–"
		}
		r1 := func(x float64) string { return num(math.Round(x*10) / 10) }
		return fmt.Sprintf("%s / %s / %s", r1(b.P50), r1(b.P95), r1(b.Max))
	})},
	{"load shed (overload events)", func(s *report.Summary, _ map[string]ProbeCount) string {
		if s.Overload == nil {
			return "none"
		}
		var parts []string
		for _, node := range sortedKeys(s.Overload) {
			parts = append(parts, fmt.Sprintf("%s %d", node, s.Overload[node].Shed))
		}
		return strings.Join(parts, ", ")
	}},
}

func survival(f func(*report.Survival) string) func(*report.Summary, map[string]ProbeCount) string {
	return func(s *report.Summary, _ map[string]ProbeCount) string {
		if s.Survival == nil {
			return "null"
		}
		return f(s.Survival)
	}
}

func storm(f func(*report.Storm) string) func(*report.Summary, map[string]ProbeCount) string {
	return func(s *report.Summary, _ map[string]ProbeCount) string {
		if s.Storm == nil {
			return "null"
		}
		return f(s.Storm)
	}
}

// median is the upper median of per-second counts ("null" for none).
func median(xs []int) string {
	if len(xs) == 0 {
		return "null"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return itoa(s[len(s)/2])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// StormTable is the markdown table of storm runs published by PublishRun (issue 13's 100k storms), one column
// per run directory, every figure read from the run's summary.json.gz and probes.json.
func StormTable(dirs []string) (string, error) {
	cols := make([][]string, len(dirs))
	for i, d := range dirs {
		s, err := ReadSummary(filepath.Join(d, "summary.json.gz"))
		if err != nil {
			return "", fmt.Errorf("storm table: %w", err)
		}
		p, err := readProbes(d)
		if err != nil {
			return "", fmt.Errorf("storm table: %w", err)
		}
		for _, r := range stormRows {
			cols[i] = append(cols[i], r.value(s, p))
		}
	}
	var b strings.Builder
	b.WriteString("|")
	for _, d := range dirs {
		fmt.Fprintf(&b, " | `%s`", filepath.Base(d))
	}
	b.WriteString(" |\n|---")
	for range dirs {
		b.WriteString("|---")
	}
	b.WriteString("|\n")
	for i, r := range stormRows {
		b.WriteString("| " + r.label)
		for c := range dirs {
			b.WriteString(" | " + cols[c][i])
		}
		b.WriteString(" |\n")
	}
	return b.String(), nil
}
