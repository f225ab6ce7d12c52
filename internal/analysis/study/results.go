package study

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"
)

// column is a KPI of a results.md table and its heading.
type column struct{ name, head string }

// resultsKPIs are the columns of results.md's headline tables, in order.
var resultsKPIs = []column{
	{"affected_users", "affected users"},
	{"detected_first_s", "first node detects (s)"},
	{"detected_last_s", "last node detects (s)"},
	{"restored_at_bound", "answered again by its own bound (last detection + 1 probe interval)"},
	{"restored_at_5s", "answered again by 5 s"},
	{"restored_at_end", "answered again by the end"},
	{"mt_interruption_s", "MT interruption (s)"},
	{"mo_interruption_s", "MO interruption (s)"},
}

// faultResultsKPIs are the columns of results.md's table for experiments with two faults: each victim's users
// apart.
var faultResultsKPIs = []column{
	{"restored_at_end", "restored by the end, all affected users"},
	{"restored_at_end_fault1", "the first fault's users"},
	{"restored_at_end_fault2", "the second fault's users"},
}

// table1ResultsKPIs are the columns of results.md's second table per experiment: Table 1's redundancy and
// data-sync rows (aggregate.go, table1KPIs).
var table1ResultsKPIs = []column{
	{"peak_load_ratio", "busiest survivor's requests/s over a member's before"},
	{"cpu_peak_ratio", "the same in CPU"},
	{"repl_msgs_per_s", "replication msgs/s"},
	{"repl_bytes_per_s", "replication B/s"},
}

// perceivedResultsKPIs are the columns of results.md's table of the users' own calls after the fault
// (aggregate.go, table1KPIs).
var perceivedResultsKPIs = []column{
	{"mo_failed_share", "their own calls that failed"},
	{"mt_failed_share", "calls to them that failed"},
}

// takeoverCxResultsKPIs are the columns of the takeover's Cx cost table (aggregate.go, table1KPIs).
var takeoverCxResultsKPIs = []column{
	{"takeover_extra_lir_per_call", "extra LIR per call of an affected user"},
	{"takeover_extra_reg_cx_per_user", "extra UAR+MAR+SAR per affected user (once)"},
	{"takeover_extra_cx_per_sub_hour", fmt.Sprintf("extra Cx /sub-h while taken over (%g call each way)", OperatorCallsPerHour)},
}

// extraResultsTables are results.md's further tables per experiment, each written where a run has one of its KPIs.
var extraResultsTables = []struct {
	intro string
	kpis  []column
}{
	{"Table 1's redundancy and data-sync rows (a ratio is given only where a member received at least 1 request/s " +
		"before the fault)", table1ResultsKPIs},
	{"What the affected users perceive: the share of their own calls (the reachability probes excepted) started " +
		"after their fault that failed; a run whose affected users placed or received no call has no value, so n " +
		"says how many runs had calls", perceivedResultsKPIs},
	{"The takeover's Cx cost at the HSS (docs/report.md, \"Takeover Cx\"), per call and per user rather than per " +
		"affected user over the run, so that the reachability probes' calls do not set it", takeoverCxResultsKPIs},
}

// costResultsKPIs are the columns of results.md's steady-state cost table (aggregate.go, costKPIs): Table 1's
// data-sync and cost rows per subscriber-hour at the experiment's own workload.
var costResultsKPIs = []column{
	{"cx_per_sub_hour", "Cx at the HSS /sub-h"},
	{"repl_msgs_per_sub_hour", "replication msgs /sub-h"},
	{"repl_bytes_per_sub_hour", "replication B /sub-h"},
	{"cpu_ms_per_sub_hour", "lab CPU ms /sub-h"},
	{"pool_cpu_ms_per_sub_hour", "pools' CPU ms /sub-h"},
	{"pool_cpu_extra_share", "pools' CPU the " + BaselineScheme + " does not spend (same seed)"},
}

// procedureResultsKPIs are the columns of the per-procedure table, and the composed operator profiles after them.
var procedureResultsKPIs = []column{
	{"cx_per_registration", "Cx per refresh"},
	{"cx_per_call", "Cx per call"},
	{"repl_per_registration", "replication msgs per refresh"},
}

func profileResultsKPIs() []column {
	var out []column
	for _, p := range OperatorProfiles {
		secs := int(p.Seconds())
		out = append(out, column{fmt.Sprintf("cx_per_sub_hour_%ds", secs), fmt.Sprintf("Cx /sub-h at %d s", secs)},
			column{fmt.Sprintf("repl_msgs_per_sub_hour_%ds", secs), fmt.Sprintf("replication msgs /sub-h at %d s", secs)})
	}
	return out
}

// figuresMarkdown lists an experiment's figures (links relative to the study's out directory).
func figuresMarkdown(b *bytes.Buffer, e ExperimentResult) {
	if len(e.Figures)+len(e.FigureNotes) == 0 {
		return
	}
	fmt.Fprintf(b, "### Figures of %s\n\n", e.Name)
	for _, f := range e.Figures {
		fmt.Fprintf(b, "![%s](%s)\n\n**%s** ([SVG](%s), [PNG](%s)). %s\n\n", f.Title, f.SVG, f.Title, f.SVG, f.PNG, f.Caption)
	}
	for _, n := range e.FigureNotes {
		fmt.Fprintf(b, "%s\n\n", n)
	}
}

// Results renders results.md: per experiment, a table of the headline KPIs per scheme (mean [95 % CI]; median)
// with n runs / n users, made from the study's results alone (study.json), with the provenance of the numbers
// under it. docs/results.md's study section is this file.
func Results(r *Result) string {
	var b bytes.Buffer
	title := r.Study
	if r.Quick {
		title += " (quick)"
	}
	quick := ""
	if r.Quick {
		quick = " --quick"
	}
	fmt.Fprintf(&b, "<!-- Generated by `imslab study` from study.json (docs/study.md, \"results.md: results from data\"); "+
		"do not edit by hand: regenerate with `imslab study %s%s --results-only --out <this directory>`. -->\n\n",
		r.File, quick)
	fmt.Fprintf(&b, "### Study %s: headline KPIs\n\n", title)
	fmt.Fprintf(&b, "From `study.json` of the study file `%s`: %d of %d planned runs with a report, %d failed, %d "+
		"not run yet. Each cell: mean [95 %% CI]; median. %s A per-user KPI pools the users of every run. n: "+
		"valid runs with a report / affected users over them; a KPI with fewer values says so in its cell.\n\n",
		r.File, r.RunsDone, r.RunsPlanned, r.RunsFailed, pendingOf(r), ciText)
	healthMarkdown(&b, r)
	for _, e := range r.Experiments {
		fmt.Fprintf(&b, "#### %s\n\nScenario `%s`, %d repetitions per scheme (seeds %d…%d). Setup: %s.\n\n", e.Name,
			e.Scenario, e.Repeat, e.Seed, e.Seed+int64(e.Repeat)-1, setupLine(e.Setup))
		if faulted(e) {
			kpiTable(&b, e, resultsKPIs)
		} else {
			b.WriteString("No fault in this experiment: no takeover KPIs.\n")
		}
		if hasAny(e, faultResultsKPIs[1:]) {
			b.WriteString("\nThe users of each fault apart (a user is probed from the first fault that affects it until it " +
				"is restored, so a later fault that takes its service again is not seen for it):\n\n")
			kpiTable(&b, e, faultResultsKPIs)
		}
		for _, t := range extraResultsTables {
			if hasAny(e, t.kpis) {
				b.WriteString("\n" + t.intro + ":\n\n")
				kpiTable(&b, e, t.kpis)
			}
		}
		if hasAny(e, costResultsKPIs) {
			b.WriteString("\nTable 1's data-sync and cost rows in steady state (t0 to the first fault, or the whole run " +
				"without one; docs/report.md, \"Cost\"), per registered subscriber and hour at this experiment's " +
				"registration period and call rate:\n\n")
			kpiTable(&b, e, costResultsKPIs)
			b.WriteString("\nPer procedure, and composed for an operator's registration periods (TS 24.229 refreshes) " +
				fmt.Sprintf("with %g call per subscriber-hour, run by run from the run's own per-procedure costs:\n\n",
					OperatorCallsPerHour))
			kpiTable(&b, e, append(slices.Clone(procedureResultsKPIs), profileResultsKPIs()...))
			var kinds []column
			for _, k := range CostCPUKinds {
				kinds = append(kinds, column{"cpu_ms_per_sub_hour_" + k, k + " CPU ms /sub-h"})
			}
			if hasAny(e, kinds) {
				b.WriteString("\nCPU per kind of node (per subscriber and hour; the BAC, I-CSCF and HSS do the same work " +
					"under every scheme, apart from the probes of more members under N+1 and 1+1, so their spread " +
					"between schemes is what the measurement itself moves):\n\n")
				kpiTable(&b, e, kinds)
			}
		}
		b.WriteString("\n")
		for _, f := range e.Figures {
			fmt.Fprintf(&b, "- %s: [SVG](%s), [PNG](%s)\n", f.Title, f.SVG, f.PNG)
		}
		if len(e.Figures) > 0 {
			b.WriteString("\n")
		}
	}
	for _, s := range r.Sweeps {
		sweepMarkdown(&b, s, "####")
	}
	claimsMarkdown(&b, r.Claims, "###")
	p := r.Provenance
	commit := "`" + p.Commit + "`"
	if p.Dirty {
		commit += " with uncommitted changes"
	}
	var rc []string
	for c, n := range p.RunCommits {
		rc = append(rc, fmt.Sprintf("`%s` %d", c, n))
	}
	slices.Sort(rc)
	if len(rc) == 0 {
		rc = []string{"not recorded"}
	}
	machine := fmt.Sprintf("CPU %s, %d cores", p.CPUModel, p.CPUs)
	if len(p.RunMachines) > 0 {
		machine = "runs by machine: " + countsText(p.RunMachines)
	}
	fmt.Fprintf(&b, "Provenance: aggregated at commit %s; runs by commit: %s; %s", commit, strings.Join(rc, ", "), machine)
	if len(p.RunCPUs) > 0 {
		fmt.Fprintf(&b, " (runs by the CPUs they could use: %s)", countsText(p.RunCPUs))
	}
	if p.LoadAvgMax > 0 {
		fmt.Fprintf(&b, ", highest 1-min load average at a run's start or end %.2f", p.LoadAvgMax)
	}
	fmt.Fprintf(&b, "; %s; written %s. Full provenance and every run: study.md.\n", p.GoVersion, p.Finished.Format(time.RFC3339))
	return b.String()
}

func pendingOf(r *Result) int {
	n := 0
	for _, e := range r.Experiments {
		for _, v := range e.Variants {
			n += v.Pending
		}
	}
	return n
}

// faulted reports whether a run of e had a fault that affected users (an experiment without one, studies/cost.yaml,
// has no takeover to tabulate).
func faulted(e ExperimentResult) bool {
	for _, v := range e.Variants {
		if v.AffectedUsers > 0 || v.Metric("time_to_detect_s") != nil {
			return true
		}
	}
	return false
}

// hasAny reports whether a variant of e has one of kpis.
func hasAny(e ExperimentResult, kpis []column) bool {
	for _, v := range e.Variants {
		for _, k := range kpis {
			if v.Metric(k.name) != nil {
				return true
			}
		}
	}
	return false
}

// kpiTable writes a table of kpis per scheme of e: mean [95 % CI]; median, with n runs / n users.
func kpiTable(b *bytes.Buffer, e ExperimentResult, kpis []column) {
	b.WriteString("| scheme | n runs / n users |")
	for _, k := range kpis {
		fmt.Fprintf(b, " %s |", k.head)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(kpis)) + "\n")
	for _, v := range e.Variants {
		n := fmt.Sprintf("%d / %d", v.Runs, v.AffectedUsers)
		if v.Pending > 0 || v.Failed > 0 {
			n += fmt.Sprintf(" (%d pending, %d failed)", v.Pending, v.Failed)
		}
		fmt.Fprintf(b, "| %s | %s |", v.Variant, n)
		for _, k := range kpis {
			m := v.Metric(k.name)
			if m == nil {
				b.WriteString(" – |")
				continue
			}
			st := m.Stat
			c := fmt.Sprintf("%s %s; median %s", num(st.Mean), ci(st.MeanCI), num(st.Median))
			switch {
			case m.Per == "user":
				c += fmt.Sprintf(" (%d users)", st.Values)
			case st.Runs != v.Runs:
				c += fmt.Sprintf(" (%d runs)", st.Runs)
			}
			fmt.Fprintf(b, " %s |", c)
		}
		b.WriteString("\n")
	}
}
