package results

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// Issue11Dir is where issue 11's runs are published.
const Issue11Dir = "docs/results/issue11"

// Issue11Process are issue 11's scenarios that act on processes (seed 42): the local backend, then compose/….
var Issue11Process = []string{"hss-outage", "failback-pcscf", "failback-scscf-stale", "dns-outage", "site-loss",
	"flapping-scscf", "gray-pcscf", "compose/hss-outage", "compose/site-loss", "compose/gray-pcscf",
	"compose/failback-pcscf", "compose/dns-outage", "compose/flapping-scscf"}

// Issue11Network are issue 11's network-fault runs, scenario:seed: --netns on the local backend, compose/… on
// the compose backend.
var Issue11Network = []string{"partition-bac-pcscf:42", "partition-bac-pcscf:43", "partition-bac-pcscf:44",
	"loss-pcscf:42", "wan-latency:42", "compose/loss-pcscf:42", "compose/wan-latency:42",
	"compose/partition-bac-pcscf:42"}

// issue11Run is one published run: its directory under the issue's and its label in the table.
type issue11Run struct{ dir, label string }

func issue11Runs(network bool) []issue11Run {
	var runs []issue11Run
	if !network {
		for _, s := range Issue11Process {
			runs = append(runs, issue11Run{s, s})
		}
		return runs
	}
	for _, r := range Issue11Network {
		s, seed, _ := strings.Cut(r, ":")
		runs = append(runs, issue11Run{s + "-seed" + seed, s + " (" + seed + ")"})
	}
	return runs
}

// Issue11Table is the table of issue 11's process-fault scenarios (network: its network-fault runs) from the
// runs published under dir (<scenario>[-seed<N>]/summary.json and expectations.json, or error.txt for a run
// that did not finish).
func Issue11Table(dir string, network bool) (string, error) {
	var b strings.Builder
	if network {
		b.WriteString("| scenario (seed) | fault (instant, heal) | affected users | calls during the fault: answered in it / all | after the heal: answered / all | all calls: answered / all | MO / MT affected users served before re-registration | interruption p50 / p95 / max MO, MT (s) | time to detect (s) | expectations held |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("| scenario | fault (instant, heal) | affected users | calls during the fault: answered in it / all | after the heal: answered / all | MO / MT affected users served before re-registration | interruption p50 / max MO, MT (s) | time to detect (s) | expectations held |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	}
	for _, r := range issue11Runs(network) {
		run := filepath.Join(dir, r.dir)
		if e, err := os.ReadFile(filepath.Join(run, "error.txt")); err == nil {
			pad := "||||||||"
			if network {
				pad += "|"
			}
			fmt.Fprintf(&b, "| %s | the run did not finish: %s %s\n", r.label, strings.TrimRight(string(e), "\n"), pad)
			continue
		}
		s, err := ReadSummary(filepath.Join(run, "summary.json"))
		if err != nil {
			return "", fmt.Errorf("issue 11 table: %w", err)
		}
		e, err := ReadExpectations(filepath.Join(run, "expectations.json"))
		if err != nil {
			return "", fmt.Errorf("issue 11 table: %w", err)
		}
		b.WriteString(issue11Row(r.label, s, e, network) + "\n")
	}
	return b.String(), nil
}

func issue11Row(label string, s *report.Summary, e *Expectations, network bool) string {
	if len(s.Faults) == 0 {
		return "| " + label + " | no fault |"
	}
	f := s.Faults[0]
	var b strings.Builder
	fmt.Fprintf(&b, "| %s | %s %s", label, f.Kind, f.Target)
	if network && f.Params != "" {
		fmt.Fprintf(&b, " (%s)", f.Params)
	}
	fmt.Fprintf(&b, " at %s s", r2(&f.T0S))
	if f.HealS != nil {
		fmt.Fprintf(&b, ", healed %s s", r2(f.HealS))
	}
	if !network && len(s.Faults) > 1 {
		var more []string
		for _, g := range s.Faults[1:] {
			more = append(more, fmt.Sprintf("%s %s at %s s", g.Kind, g.Target, r2(&g.T0S)))
		}
		b.WriteString(" (+ " + strings.Join(more, ", ") + ")")
	}
	fmt.Fprintf(&b, " | %d | %s | %s ", s.AffectedUsers, window(f.During, true), window(f.AfterHeal, false))
	if network {
		fmt.Fprintf(&b, "| %d / %d ", s.Calls.Answered, s.Calls.Total)
	}
	fmt.Fprintf(&b, "| %d / %d ", s.MO.AffectedUsersWithSuccess, s.MT.AffectedUsersWithSuccess)
	mo, mt := s.MO.InterruptionS, s.MT.InterruptionS
	if network {
		fmt.Fprintf(&b, "| %s / %s / %s, %s / %s / %s ", pct(mo, "p50"), pct(mo, "p95"), pct(mo, "max"),
			pct(mt, "p50"), pct(mt, "p95"), pct(mt, "max"))
	} else {
		fmt.Fprintf(&b, "| %s / %s, %s / %s ", pct(mo, "p50"), pct(mo, "max"), pct(mt, "p50"), pct(mt, "max"))
	}
	fmt.Fprintf(&b, "| %s | %s |", detection(s.Faults), e.held())
	return b.String()
}

// window is "answered / calls" of a fault's window (answered in it when inWindow), "–" when it has none.
func window(w *report.Window, inWindow bool) string {
	if w == nil {
		return "–"
	}
	a := w.Answered
	if inWindow {
		a = w.AnsweredInWindow
	}
	return fmt.Sprintf("%d / %d", a, w.Calls)
}

// pct is one percentile of an interruption, two decimals, "–" when there is none.
func pct(p *report.Percentiles, which string) string {
	if p == nil {
		return "–"
	}
	v := map[string]float64{"p50": p.P50, "p95": p.P95, "max": p.Max}[which]
	return r2(&v)
}

// detection is each node's time to detect, from the first fault it noticed, by node name ("none").
func detection(faults []report.Fault) string {
	seen := map[string]string{}
	for _, f := range faults {
		for _, node := range sortedKeys(f.TimeToDetectS) {
			if _, ok := seen[node]; !ok {
				v := f.TimeToDetectS[node]
				seen[node] = node + " " + r2(&v)
			}
		}
	}
	if len(seen) == 0 {
		return "none"
	}
	var parts []string
	for _, node := range sortedKeys(seen) {
		parts = append(parts, seen[node])
	}
	return strings.Join(parts, ", ")
}

// RunFunc runs imslab with args (the same binary: "run …", "compare …") and returns what it wrote on stderr.
type RunFunc func(ctx context.Context, args ...string) (stderr string, err error)

// RunIssue11 runs issue 11's scenarios again (all, or the named ones: scenario for the process faults,
// scenario:seed for the network ones) into runs/issue11-…, and publishes each run's summary.json and
// expectations.json under dir (error.txt with the first line of its error when it did not finish).
func RunIssue11(ctx context.Context, run RunFunc, dir string, network bool, only []string) error {
	todo := only
	if len(todo) == 0 {
		todo = Issue11Process
		if network {
			todo = Issue11Network
		}
	}
	for _, t := range todo {
		s, seed := t, "42"
		if network {
			var ok bool
			if s, seed, ok = strings.Cut(t, ":"); !ok {
				return fmt.Errorf("issue 11: %q: want scenario:seed", t)
			}
		} else if !slices.Contains(Issue11Process, s) {
			return fmt.Errorf("issue 11: %q is not one of its process-fault scenarios", s)
		}
		name := strings.TrimPrefix(s, "compose/")
		backend := []string{"--netns"}
		if !network {
			backend = nil
		}
		if strings.HasPrefix(s, "compose/") {
			backend = []string{"--backend", "compose"}
		}
		pub := s
		out := "runs/issue11-" + strings.ReplaceAll(s, "/", "-")
		if network {
			pub += "-seed" + seed
			out += "-seed" + seed
		}
		if err := os.RemoveAll(out); err != nil { // a run directory is appended to: start from nothing
			return err
		}
		args := append([]string{"run", filepath.Join("scenarios", name+".yaml")}, backend...)
		stderr, _ := run(ctx, append(args, "--seed", seed, "--out", out)...)
		dst := filepath.Join(dir, pub)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if !exists(filepath.Join(out, "summary.json")) { // the run did not finish: its error, not an older run's figures
			first, _, _ := strings.Cut(stderr, "\n")
			if err := os.WriteFile(filepath.Join(dst, "error.txt"), []byte(first+"\n"), 0o644); err != nil {
				return err
			}
			continue
		}
		for _, f := range []string{"summary.json", "expectations.json"} {
			if err := copyFile(filepath.Join(out, f), filepath.Join(dst, f)); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
