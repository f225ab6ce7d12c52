package study

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/analysis/stats"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/ue"
)

// Result is study.json.
type Result struct {
	Study       string `json:"study"`
	Description string `json:"description,omitempty"`
	File        string `json:"file,omitempty"`
	Quick       bool   `json:"quick"`
	// RunsPlanned, RunsDone (with a report, run now or found done), RunsSkipped (found done) and RunsFailed
	// count the plan's runs so far.
	RunsPlanned int `json:"runs_planned"`
	RunsDone    int `json:"runs_done"`
	RunsSkipped int `json:"runs_skipped"`
	RunsFailed  int `json:"runs_failed"`
	// RunsInvalid are the runs left out as invalid by their health record, RunsHealthUnknown those aggregated
	// without one (VariantResult).
	RunsInvalid       int                `json:"runs_invalid"`
	RunsHealthUnknown int                `json:"runs_health_unknown"`
	Provenance        Provenance         `json:"provenance"`
	Experiments       []ExperimentResult `json:"experiments"`
	// Sweeps are the study's sweeps: their experiments' headline KPIs per value and scheme.
	Sweeps []SweepResult `json:"sweeps,omitempty"`
	// Claims are the study file's claims with their verdicts (claims.go).
	Claims []ClaimResult `json:"claims,omitempty"`
}

// ExperimentResult is one experiment of the study.
type ExperimentResult struct {
	Name         string          `json:"name"`
	Scenario     string          `json:"scenario"`
	ScenarioFile string          `json:"scenario_file"`
	Repeat       int             `json:"repeat"`
	Seed         int64           `json:"seed"`
	Setup        compare.Setup   `json:"setup"`
	Variants     []VariantResult `json:"variants"`
	// Figures are the experiment's figures under <out>/figures/ (WriteFigures).
	Figures []Figure `json:"figures,omitempty"`
	// FigureNotes say why a figure is missing.
	FigureNotes []string `json:"figure_notes,omitempty"`
	// Sweep is the value of a sweep this experiment is (docs/study.md, "Sweeps").
	Sweep *SweepPoint `json:"sweep,omitempty"`
}

// VariantResult is one scheme of an experiment over its runs.
type VariantResult struct {
	Variant string `json:"variant"`
	// Runs is the number of runs with a report (n); Failed those that could not be carried out; Pending the
	// planned runs not reached yet.
	Runs    int `json:"n_runs"`
	Failed  int `json:"failed"`
	Pending int `json:"pending"`
	// AffectedUsers is the number of affected users over all the runs (the users behind a per-user KPI).
	AffectedUsers int `json:"n_affected_users"`
	// Seeds and RunDirs (relative to the study's directory) of the runs with a report; Elapsed their wall times
	// in seconds (0 for a run found done).
	Seeds    []int64   `json:"seeds"`
	RunDirs  []string  `json:"run_dirs"`
	ElapsedS []float64 `json:"elapsed_s"`
	Errors   []string  `json:"errors,omitempty"`
	// Invalid counts the runs left out because their health record declares them invalid (summary.json
	// health.valid false: a node stalled, the machine's load exceeded its CPUs, another lab ran), InvalidRuns
	// names them with the reasons; SetAside are invalid runs the runner set aside and ran again
	// (<dir>.invalid-<k>); HealthUnknown are the runs aggregated without a health record (made before it
	// existed), which nothing shows were quiet.
	Invalid       int      `json:"invalid"`
	InvalidRuns   []string `json:"invalid_runs,omitempty"`
	SetAside      []string `json:"set_aside,omitempty"`
	HealthUnknown []string `json:"health_unknown,omitempty"`
	// Metrics are the KPIs over the runs (compare's repetition KPIs, then the survival ones).
	Metrics []compare.RepeatMetric `json:"metrics"`
}

// Metric returns the named metric or nil.
func (v *VariantResult) Metric(name string) *compare.RepeatMetric {
	for i := range v.Metrics {
		if v.Metrics[i].Name == name {
			return &v.Metrics[i]
		}
	}
	return nil
}

// survivalKPIs are per-run values from the reachability probes' Kaplan–Meier curves (summary.json "survival",
// docs/report.md), timed at the answer: a user is restored when a call to it, and for a caller a call from it, is
// answered again. Runs without probes have none; a summary written before restoration was timed at the answer is
// converted when read (survival.legacy) and has no MT or MO curve of its own.
var survivalKPIs = append([]survivalKPI{
	{"restored_at_bound", "share", "share of the affected users whose MT and MO calls are answered again " +
		"(Kaplan–Meier) by the run's own bound, the last node's detection + one probe interval " +
		"(survival.restored_at_bound)",
		func(s *report.Survival) *float64 { return curveAt(s.Service, s.BoundS) }},
	{"mt_restored_at_bound", "share", "the same for MT alone", func(s *report.Survival) *float64 {
		return curveAt(s.MT, s.BoundS)
	}},
	{"mo_restored_at_bound", "share", "the same for MO alone (users that place calls)", func(s *report.Survival) *float64 {
		return curveAt(s.MO, s.BoundS)
	}},
	{"restore_bound_s", "s", "the run's own bound, the last node's detection + one probe interval: the instant the " +
		"previous three are read at (survival.bound_s)",
		func(s *report.Survival) *float64 { return fp(s.BoundS) }},
}, fixedInstantKPIs()...)

// detectionKPIs are the first and the last node's detection of the run's fault (report.Summary.Detection: the
// probed fault's, else the first fault's), for every run with a fault that some node noticed.
var detectionKPIs = []struct {
	name, doc string
	last      bool
}{
	{"detected_first_s", "fault → the first node that noticed it (survival.detected_first_s for the probed " +
		"fault; without probes, the first fault's time_to_detect_s)", false},
	{"detected_last_s", "fault → the last node that noticed it (survival.detected_last_s): each run's bound " +
		"counts from it", true},
}

// survivalTail follows the fixed instants: the end of the run and the medians.
var survivalTail = []survivalKPI{
	{"restored_at_end", "share", "share of the probed users restored (MT and MO answered) by the end of the run",
		func(s *report.Survival) *float64 {
			if s.Service.N == 0 {
				return nil
			}
			return fp(float64(s.Service.Restored) / float64(s.Service.N))
		}},
	{"restore_median_s", "s", "median time from the fault until an affected user's MT and MO calls are answered " +
		"again (Kaplan–Meier, survival.service.median_s); none where fewer than half were restored by the end of " +
		"the run (the run then has no value, and n says how many runs had one)",
		func(s *report.Survival) *float64 { return s.Service.MedianS }},
	{"setup_started_median_s", "s", "the same to the start of those successful probes rather than their answer " +
		"(survival.setup_started.median_s, secondary): a probe placed just after the fault can be answered through " +
		"a failover seconds later, and its user was not served before",
		func(s *report.Survival) *float64 { return s.SetupStarted.MedianS }},
}

type survivalKPI struct {
	name, unit, doc string
	val             func(*report.Survival) *float64
}

// fixedInstantKPIs are restored_at_<t>s for every report.FixedInstants: the curve read at instants common to
// every scheme, where restored_at_bound moves with each scheme's own detection.
func fixedInstantKPIs() []survivalKPI {
	var ks []survivalKPI
	for _, t := range report.FixedInstants {
		ks = append(ks, survivalKPI{fmt.Sprintf("restored_at_%gs", t), "share", fmt.Sprintf("share of the affected "+
			"users whose MT and MO calls are answered again within %g s of their fault (Kaplan–Meier, "+
			"survival.restored_at): an instant common to every scheme; none where the run observed less while "+
			"some user was still waiting", t),
			func(s *report.Survival) *float64 {
				if rd := s.ReadingAt(t); rd != nil {
					return fp(rd.Restored)
				}
				return nil
			}})
	}
	return ks
}

// curveAt is c read at t, nil for an empty curve.
func curveAt(c report.KMCurve, t float64) *float64 {
	if c.N == 0 {
		return nil
	}
	return fp(c.At(t))
}

func fp(x float64) *float64 { return &x }

// table1KPIs are per-run values of the study's Table 1 redundancy and data-sync rows, from summary.json's
// member_load and signalling, and the takeover's Cx cost from its takeover_cx (docs/report.md). The takeover's Cx
// is priced per call and per user, not per affected user over the run: the reachability probes call every user
// not restored yet every 250 ms, so a count per affected user would measure the probes, while a call costs the
// HSS the same whoever placed it.
var table1KPIs = []struct {
	name, unit, doc string
	val             func(*report.Summary) *float64
}{
	{"peak_load_ratio", "ratio", "SIP requests/s of the faulted pool's busiest survivor after the takeover over " +
		"the mean of its active members before the fault (member_load.pools.*.peak_load_ratio: the headroom a " +
		"member needs; absent when a member received under 1 request/s before the fault, OPTIONS and " +
		"reachability probes excepted)",
		func(s *report.Summary) *float64 {
			if p := faultedPool(s); p != nil {
				return p.PeakLoadRatio
			}
			return nil
		}},
	{"cpu_peak_ratio", "ratio", "the same in CPU seconds per second (member_load.pools.*.cpu_peak_ratio; the " +
		"reachability probes' work included)",
		func(s *report.Summary) *float64 {
			if p := faultedPool(s); p != nil {
				return p.CPUPeakRatio
			}
			return nil
		}},
	{"takeover_extra_lir_per_call", "LIR/call", "LIRs a call of an affected user costs the HSS beyond a call of " +
		"another user, from the fault to the end of the run, the probes' calls included " +
		"(takeover_cx.extra_lir_per_call: about 0.5 when every MO call of a taken-over user asks the HSS with " +
		"User-Authorization-Type 2; absent in runs made before takeover_cx existed)",
		func(s *report.Summary) *float64 {
			if s.TakeoverCx == nil {
				return nil
			}
			return fp(s.TakeoverCx.ExtraLIRPerCall)
		}},
	{"takeover_extra_reg_cx_per_user", "Cx/user", "UARs, MARs and SARs per affected user beyond another user's " +
		"in the same window (takeover_cx.extra_reg_cx_per_user): what restoring a user costs once, the SAR " +
		"of an S-CSCF takeover or a whole registration when the phone registers again",
		func(s *report.Summary) *float64 {
			if s.TakeoverCx == nil {
				return nil
			}
			return fp(s.TakeoverCx.ExtraRegCxPerUser)
		}},
	{"takeover_extra_cx_per_sub_hour", "Cx/sub-h", fmt.Sprintf("the takeover's extra LIRs per affected "+
		"subscriber and hour while it is taken over (until its next registration) at %g call placed and %g "+
		"received per subscriber-hour: takeover_extra_lir_per_call × %g", OperatorCallsPerHour,
		OperatorCallsPerHour, 2*OperatorCallsPerHour),
		func(s *report.Summary) *float64 {
			if s.TakeoverCx == nil {
				return nil
			}
			return fp(s.TakeoverCx.ExtraLIRPerCall * 2 * OperatorCallsPerHour)
		}},
	{"mo_failed_share", "share", "share of the affected users' own calls (the reachability probes excepted) " +
		"started after their fault that failed, as the users perceive the failure (mo.attempts − mo.succeeded over " +
		"mo.attempts; absent when they placed none): needs a call rate at which users call during the run",
		func(s *report.Summary) *float64 {
			if s.AffectedUsers == 0 || s.MO.Attempts == 0 { // no fault: mo counts every call
				return nil
			}
			return fp(float64(s.MO.Attempts-s.MO.Succeeded) / float64(s.MO.Attempts))
		}},
	{"mt_failed_share", "share", "the same for the calls to them: failed or never delivered to the phone " +
		"(mt.attempts − mt.succeeded + mt.not_delivered over mt.attempts + mt.not_delivered)",
		func(s *report.Summary) *float64 {
			n := s.MT.Attempts + s.MT.NotDelivered
			if s.AffectedUsers == 0 || n == 0 {
				return nil
			}
			return fp(float64(s.MT.Attempts-s.MT.Succeeded+s.MT.NotDelivered) / float64(n))
		}},
	{"repl_msgs_per_s", "msgs/s", "state-replication messages per second between pool members over the whole run " +
		"(its registrations, calls and end-of-run de-registrations; signalling.repl_messages / duration): what " +
		"the schemes with synchronisation pay whether a member fails or not; 0 for those without",
		func(s *report.Summary) *float64 {
			if s.Signalling == nil || s.DurationS <= 0 {
				return nil
			}
			return fp(float64(s.Signalling.ReplMessages) / s.DurationS)
		}},
	{"repl_bytes_per_s", "B/s", "the same in bytes per second (signalling.repl_bytes / duration)",
		func(s *report.Summary) *float64 {
			if s.Signalling == nil || s.DurationS <= 0 {
				return nil
			}
			return fp(float64(s.Signalling.ReplBytes) / s.DurationS)
		}},
}

// costKPI is a per-run KPI read from summary.json's cost.
type costKPI struct {
	name, unit, doc string
	val             func(*report.Cost) *float64
}

// costKPIs are per-run values of summary.json's cost (the steady state before the first fault: docs/report.md,
// "Cost"), Table 1's data-sync and cost rows per subscriber-hour and per procedure.
var costKPIs = []costKPI{
	{"cx_per_sub_hour", "Cx/sub-h", "Cx requests at the HSS per registered subscriber and hour in steady state " +
		"(cost.per_subscriber_hour.cx), at the run's own registration period and call rate",
		func(c *report.Cost) *float64 { return fp(c.PerSubscriberHour["cx"]) }},
	{"cx_per_registration", "Cx", "Cx requests (UAR, MAR, SAR) per registration refresh (cost.cx_per_registration)",
		func(c *report.Cost) *float64 { return c.CxPerRegistration }},
	{"cx_per_call", "Cx", "LIRs per call (cost.cx_per_call)", func(c *report.Cost) *float64 { return c.CxPerCall }},
	{"repl_msgs_per_sub_hour", "msgs/sub-h", "state-replication messages between members per subscriber and hour " +
		"(cost.per_subscriber_hour.repl_messages)",
		func(c *report.Cost) *float64 { return fp(c.PerSubscriberHour["repl_messages"]) }},
	{"repl_bytes_per_sub_hour", "B/sub-h", "the same in bytes (cost.per_subscriber_hour.repl_bytes)",
		func(c *report.Cost) *float64 { return fp(c.PerSubscriberHour["repl_bytes"]) }},
	{"repl_per_registration", "msgs", "state-replication messages per registration refresh " +
		"(cost.repl_per_registration)", func(c *report.Cost) *float64 { return c.ReplPerRegistration }},
	{"cpu_ms_per_sub_hour", "CPU ms/sub-h", "CPU milliseconds of every node of the lab per subscriber and hour " +
		"(cost.per_subscriber_hour.cpu_ms; absent without resource samples)",
		func(c *report.Cost) *float64 { return perSubHour(c, "cpu_ms") }},
	{"pool_cpu_ms_per_sub_hour", "CPU ms/sub-h", "the same for the P- and S-CSCF pools' members alone (standbys " +
		"and spares included), where the schemes differ", func(c *report.Cost) *float64 { return poolCPU(c) }},
}

// CostCPUKinds are the kinds of node whose CPU per subscriber-hour the study keeps apart (cpu_ms_per_sub_hour_<kind>):
// the pools, and the nodes whose work is the same under every scheme, which show how much the measurement moves
// between runs of the same work.
var CostCPUKinds = []string{"pcscf", "scscf", "bac", "icscf", "hss"}

func init() {
	for _, k := range CostCPUKinds {
		costKPIs = append(costKPIs, costKPI{"cpu_ms_per_sub_hour_" + k, "CPU ms/sub-h", "CPU ms of the " + k +
			" nodes per subscriber and hour (cost.per_subscriber_hour.cpu_ms_" + k + ")",
			func(c *report.Cost) *float64 { return perSubHour(c, "cpu_ms_"+k) }})
	}
}

// OperatorProfiles are the registration periods results.md composes the per-procedure costs for (TS 24.229
// phones refresh at half a period up to 1200 s, 600 s before the end of a longer one: ue.RefreshAfter), with
// OperatorCallsPerHour calls placed per subscriber and hour.
var OperatorProfiles = []time.Duration{600 * time.Second, 3600 * time.Second}

// OperatorCallsPerHour is the calls per subscriber and hour of the composed profiles: about one busy-hour call
// attempt per subscriber, a common planning figure for voice.
const OperatorCallsPerHour = 1.0

// composedKPIs returns the per-run KPIs of one operator profile: Cx and replication messages per subscriber-hour from
// the run's per-procedure costs.
func composedKPIs() []costKPI {
	var out []costKPI
	for _, p := range OperatorProfiles {
		refreshes := float64(time.Hour) / float64(ue.RefreshAfter(p))
		secs := int(p.Seconds())
		out = append(out, costKPI{fmt.Sprintf("cx_per_sub_hour_%ds", secs), "Cx/sub-h", fmt.Sprintf("Cx requests per subscriber-hour "+
			"composed for a registration period of %d s (%.2f refreshes per hour) and %g call per subscriber-hour: "+
			"cx_per_registration × %.2f + cx_per_call × %g, from the run's own per-procedure costs", secs,
			refreshes, OperatorCallsPerHour, refreshes, OperatorCallsPerHour),
			func(c *report.Cost) *float64 {
				if c.CxPerRegistration == nil || c.CxPerCall == nil {
					return nil
				}
				return fp(*c.CxPerRegistration*refreshes + *c.CxPerCall*OperatorCallsPerHour)
			}}, costKPI{fmt.Sprintf("repl_msgs_per_sub_hour_%ds", secs), "msgs/sub-h", fmt.Sprintf("state-replication messages "+
			"per subscriber-hour composed for a registration period of %d s: repl_per_registration × %.2f "+
			"(replication copies registrations only)", secs, refreshes),
			func(c *report.Cost) *float64 {
				if c.ReplPerRegistration == nil {
					return nil
				}
				return fp(*c.ReplPerRegistration * refreshes)
			}})
	}
	return out
}

// perSubHour returns c.PerSubscriberHour[k] or nil.
func perSubHour(c *report.Cost, k string) *float64 {
	if v, ok := c.PerSubscriberHour[k]; ok {
		return fp(v)
	}
	return nil
}

// poolCPU is the pools' CPU ms per subscriber-hour (P-CSCFs and S-CSCFs), nil without samples.
func poolCPU(c *report.Cost) *float64 {
	p, okP := c.PerSubscriberHour["cpu_ms_pcscf"]
	q, okS := c.PerSubscriberHour["cpu_ms_scscf"]
	if !okP && !okS {
		return nil
	}
	return fp(p + q)
}

// BaselineScheme is the scheme the others' pool CPU is compared with, run by run (same seed, same workload).
const BaselineScheme = "quasi-pool"

// restoredOfFault is the share of the users probed after fault k (0-based, in the summary's order) that were
// restored by the end of the run, from summary.json's users; nil when the run has no such fault or it affected no
// probed user. A study with two faults (studies/risk.yaml) reads each victim's users apart: restored_at_end pools
// them, and the users of the first victim may be restored before the second fault, which then goes unmeasured
// for them (a user is probed from its own fault until restored; docs/study.md, "Claims").
func restoredOfFault(s *report.Summary, k int) *float64 {
	if k >= len(s.Faults) {
		return nil
	}
	f := s.Faults[k]
	n, restored := 0, 0
	for _, u := range s.Users {
		if !u.Probed || (u.Fault != f.Target && !slices.Contains(f.Nodes, u.Fault)) {
			continue
		}
		n++
		if !u.Censored { // the users' own times of a converted older summary are gone, the flag stays
			restored++
		}
	}
	if n == 0 {
		return nil
	}
	return fp(float64(restored) / float64(n))
}

// faultedPoolName is the pool of the first faulted member in member_load ("" when none is).
func faultedPoolName(s *report.Summary) string {
	if s.MemberLoad == nil {
		return ""
	}
	for _, m := range s.MemberLoad.Members {
		if m.Faulted {
			return m.Pool
		}
	}
	return ""
}

// faultedPool is member_load's pool of the faulted member, or nil.
func faultedPool(s *report.Summary) *report.PoolLoad {
	if n := faultedPoolName(s); n != "" {
		return s.MemberLoad.Pools[n]
	}
	return nil
}

// Aggregate summarises the results so far per experiment and variant.
func Aggregate(p *Plan, file string, prov Provenance, results []RunResult) (*Result, error) {
	res := &Result{Study: p.Name, Description: p.Description, File: file, Quick: p.Quick, RunsPlanned: len(p.Runs),
		Provenance: prov, Experiments: []ExperimentResult{}}
	if err := checkBuilds(p, &res.Provenance, results); err != nil {
		return nil, err
	}
	type key struct{ exp, variant string }
	byKey := map[key][]RunResult{}
	for _, r := range results {
		byKey[key{r.Experiment, r.Variant}] = append(byKey[key{r.Experiment, r.Variant}], r)
		switch {
		case r.Summary != nil && r.Err == nil:
			res.RunsDone++
			if r.Skipped {
				res.RunsSkipped++
			}
		default:
			res.RunsFailed++
		}
	}
	for _, e := range p.Experiments {
		var vs []compare.Variant
		for _, name := range e.Variants {
			vs = append(vs, compare.Variant{Name: name})
		}
		er := ExperimentResult{Name: e.Name, Scenario: e.Scenario, ScenarioFile: e.ScenarioFile, Repeat: e.Repeat,
			Seed: e.Seed, Variants: []VariantResult{}, Sweep: e.Sweep}
		if e.Base != nil {
			er.Setup = setupOf(e.Base, vs)
		}
		base := map[int64]*report.Summary{}
		for _, r := range byKey[key{e.Name, BaselineScheme}] {
			if r.Summary != nil && r.Err == nil && (r.Summary.Health == nil || r.Summary.Health.Valid) {
				base[r.Seed] = r.Summary
			}
		}
		for _, v := range e.Variants {
			b := base
			if v == BaselineScheme {
				b = nil // its own runs: no comparison
			}
			vr, err := aggregateVariant(e, v, byKey[key{e.Name, v}], b)
			if err != nil {
				return nil, fmt.Errorf("study: %s/%s: %w", e.Name, v, err)
			}
			er.Variants = append(er.Variants, vr)
			res.RunsInvalid += vr.Invalid
			res.RunsHealthUnknown += len(vr.HealthUnknown)
		}
		res.Experiments = append(res.Experiments, er)
	}
	aggregateSweeps(res)
	res.Claims = evalClaims(p.Claims, res, p.NRaised)
	return res, nil
}

// aggregateVariant aggregates the runs of one variant; base holds the baseline scheme's summaries of the same
// experiment by seed (nil for the baseline itself), for the paired CPU comparison.
func aggregateVariant(e PlannedExperiment, v string, runs []RunResult, base map[int64]*report.Summary) (VariantResult, error) {
	vr := VariantResult{Variant: v, Pending: e.Repeat - len(runs), Seeds: []int64{}, RunDirs: []string{},
		ElapsedS: []float64{}, Metrics: []compare.RepeatMetric{}}
	var reps []compare.RepeatRun
	var sums []*report.Summary
	for _, r := range runs {
		vr.SetAside = append(vr.SetAside, r.SetAside...)
		if r.Summary == nil || r.Err != nil {
			vr.Failed++
			if r.Err != nil {
				vr.Errors = append(vr.Errors, fmt.Sprintf("rep %d (seed %d): %v", r.Rep, r.Seed, r.Err))
			}
			continue
		}
		switch h := r.Summary.Health; {
		case h == nil:
			vr.HealthUnknown = append(vr.HealthUnknown, r.Dir)
		case !h.Valid:
			vr.Invalid++
			vr.InvalidRuns = append(vr.InvalidRuns, fmt.Sprintf("%s: %s", r.Dir, strings.Join(h.Reasons, "; ")))
			continue
		}
		vr.Runs++
		vr.AffectedUsers += r.Summary.AffectedUsers
		vr.Seeds = append(vr.Seeds, r.Seed)
		vr.RunDirs = append(vr.RunDirs, r.Dir)
		vr.ElapsedS = append(vr.ElapsedS, math.Round(r.Elapsed.Seconds()*10)/10)
		reps = append(reps, compare.RepeatRun{Seed: r.Seed, RunDir: r.Dir, Summary: r.Summary})
		sums = append(sums, r.Summary)
	}
	if len(reps) == 0 {
		return vr, nil
	}
	agg, err := compare.Aggregate(e.Scenario, v, reps)
	if err != nil {
		return vr, err
	}
	vr.Metrics = append(vr.Metrics, agg.Metrics...)
	boot := uint64(vr.Seeds[0])
	perRun := func(name, unit, doc string, val func(*report.Summary) *float64) error {
		vals := make([]float64, len(sums))
		for i, s := range sums {
			vals[i] = math.NaN()
			if x := val(s); x != nil {
				vals[i] = *x
			}
		}
		st, err := summarise(name, unit, vals, sums, boot)
		if errors.Is(err, stats.ErrNoValues) {
			return nil
		}
		if err != nil {
			return err
		}
		vr.Metrics = append(vr.Metrics, compare.RepeatMetric{Name: name, Unit: unit, Per: "run", Doc: doc, Stat: st})
		return nil
	}
	for _, k := range append(slices.Clone(survivalKPIs), survivalTail...) {
		err := perRun(k.name, k.unit, k.doc, func(s *report.Summary) *float64 {
			if s.Survival == nil {
				return nil
			}
			return k.val(s.Survival)
		})
		if err != nil {
			return vr, err
		}
	}
	for _, k := range detectionKPIs {
		err := perRun(k.name, "s", k.doc, func(s *report.Summary) *float64 {
			first, last, ok := s.Detection()
			switch {
			case !ok:
				return nil
			case k.last:
				return fp(last)
			}
			return fp(first)
		})
		if err != nil {
			return vr, err
		}
	}
	for k := range 2 {
		err := perRun(fmt.Sprintf("restored_at_end_fault%d", k+1), "share", fmt.Sprintf("restored_at_end among the "+
			"users of the run's fault %d alone (summary.json users with that fault's target; absent when the "+
			"run has no such fault)", k+1), func(s *report.Summary) *float64 {
			if len(s.Faults) < 2 {
				return nil // one fault: restored_at_end is the same
			}
			return restoredOfFault(s, k)
		})
		if err != nil {
			return vr, err
		}
	}
	for _, k := range table1KPIs {
		if err := perRun(k.name, k.unit, k.doc, k.val); err != nil {
			return vr, err
		}
	}
	for _, k := range append(slices.Clone(costKPIs), composedKPIs()...) {
		err := perRun(k.name, k.unit, k.doc, func(s *report.Summary) *float64 {
			if s.Cost == nil {
				return nil
			}
			return k.val(s.Cost)
		})
		if err != nil {
			return vr, err
		}
	}
	if base != nil {
		seedOf := map[*report.Summary]int64{}
		for i, s := range sums {
			seedOf[s] = vr.Seeds[i]
		}
		err := perRun("pool_cpu_extra_share", "share", "(pools' CPU − the "+BaselineScheme+"'s pools' CPU) / "+
			"pools' CPU, run by run against the "+BaselineScheme+" run of the same seed (the same phones, calls "+
			"and refreshes): the share of this scheme's pool CPU that the "+BaselineScheme+" does not spend "+
			"(synchronisation, standbys and spares); negative when it spends less",
			func(s *report.Summary) *float64 {
				b := base[seedOf[s]]
				if s.Cost == nil || b == nil || b.Cost == nil {
					return nil
				}
				x, y := poolCPU(s.Cost), poolCPU(b.Cost)
				if x == nil || y == nil || *x <= 0 {
					return nil
				}
				return fp((*x - *y) / *x)
			})
		if err != nil {
			return vr, err
		}
	}
	return vr, nil
}

// WriteOutputs writes study.json, study.md and results.md into dir.
func WriteOutputs(dir string, r *Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("study: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileJSON), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileMarkdown), []byte(Markdown(r)), 0o644); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileResults), []byte(Results(r)), 0o644); err != nil {
		return fmt.Errorf("study: %w", err)
	}
	return nil
}

// headline are the KPIs of study.md's tables, in order.
var headline = []string{"affected_users", "time_to_detect_s", "detected_first_s", "detected_last_s",
	"restored_at_bound", "mt_restored_at_bound", "mo_restored_at_bound", "restored_at_1s", "restored_at_3s",
	"restored_at_5s", "restored_at_10s", "restored_at_30s", "restored_at_end", "restore_median_s",
	"setup_started_median_s", "restored_at_end_fault1", "restored_at_end_fault2", "mo_interruption_s", "mt_interruption_s", "rereg_s", "mo_taken_over",
	"mt_taken_over", "peak_load_ratio", "cpu_peak_ratio", "takeover_extra_lir_per_call", "takeover_extra_reg_cx_per_user",
	"takeover_extra_cx_per_sub_hour", "mo_failed_share", "mt_failed_share", "repl_msgs_per_s", "repl_bytes_per_s", "cx_per_sub_hour",
	"cx_per_registration", "cx_per_call", "repl_msgs_per_sub_hour", "repl_bytes_per_sub_hour", "repl_per_registration",
	"cpu_ms_per_sub_hour", "pool_cpu_ms_per_sub_hour", "pool_cpu_extra_share"}

// Markdown renders study.md.
func Markdown(r *Result) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Study %s", r.Study)
	if r.Quick {
		b.WriteString(" (quick)")
	}
	b.WriteString("\n\n")
	if r.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(r.Description))
	}
	fmt.Fprintf(&b, "Written by `imslab study` from the study file `%s` (docs/study.md). Runs: %d planned, %d with a "+
		"report (%d found done and not run again), %d failed.\n\n", r.File, r.RunsPlanned, r.RunsDone, r.RunsSkipped,
		r.RunsFailed)
	b.WriteString("Each cell is mean [95 % CI] over the runs, then median, min–max and, from 20 values on, p95. " +
		ciText + " *runs* is n (valid runs with a report), *users* the affected users over those runs.\n\n")
	healthMarkdown(&b, r)
	for _, e := range r.Experiments {
		fmt.Fprintf(&b, "## %s\n\nScenario `%s` (%s), %d runs per scheme from seed %d (seeds %d…%d). Setup: %s.\n\n",
			e.Name, e.Scenario, e.ScenarioFile, e.Repeat, e.Seed, e.Seed, e.Seed+int64(e.Repeat)-1, setupLine(e.Setup))
		b.WriteString("| KPI |")
		for _, v := range e.Variants {
			fmt.Fprintf(&b, " %s |", v.Variant)
		}
		b.WriteString("\n|---|")
		for range e.Variants {
			b.WriteString("---|")
		}
		b.WriteString("\n| runs (failed, invalid, pending) |")
		for _, v := range e.Variants {
			fmt.Fprintf(&b, " %d (%d, %d, %d) |", v.Runs, v.Failed, v.Invalid, v.Pending)
		}
		b.WriteString("\n| affected users (all runs) |")
		for _, v := range e.Variants {
			fmt.Fprintf(&b, " %d |", v.AffectedUsers)
		}
		b.WriteString("\n")
		for _, name := range headline {
			var row []string
			unit, per, any := "", "", false
			for i := range e.Variants {
				m := e.Variants[i].Metric(name)
				if m == nil {
					row = append(row, "–")
					continue
				}
				any, unit, per = true, m.Unit, m.Per
				row = append(row, cell(m.Stat))
			}
			if !any {
				continue
			}
			fmt.Fprintf(&b, "| %s (%s, per %s) | %s |\n", name, unit, per, strings.Join(row, " | "))
		}
		b.WriteString("\n")
		for _, v := range e.Variants {
			for _, er := range v.Errors {
				fmt.Fprintf(&b, "- %s: failed run %s\n", v.Variant, er)
			}
		}
		b.WriteString("Runs:")
		for _, v := range e.Variants {
			for i, d := range v.RunDirs {
				fmt.Fprintf(&b, " [%s](%s/) (seed %d)", d, d, v.Seeds[i])
			}
		}
		b.WriteString("\n\n")
		figuresMarkdown(&b, e)
	}
	for _, s := range r.Sweeps {
		sweepMarkdown(&b, s, "##")
	}
	claimsMarkdown(&b, r.Claims, "##")
	b.WriteString("## KPIs\n\n")
	seen := map[string]bool{}
	for _, e := range r.Experiments {
		for _, v := range e.Variants {
			for _, m := range v.Metrics {
				if !seen[m.Name] {
					seen[m.Name] = true
					fmt.Fprintf(&b, "- **%s** (%s, per %s): %s.\n", m.Name, m.Unit, m.Per, m.Doc)
				}
			}
		}
	}
	b.WriteString("\n")
	b.WriteString(r.Provenance.Markdown())
	return b.String()
}

func cell(s stats.Summary) string {
	c := fmt.Sprintf("%s %s; median %s; %s–%s", num(s.Mean), ci(s.MeanCI), num(s.Median), num(s.Min), num(s.Max))
	if s.P95 != nil {
		c += "; p95 " + num(*s.P95)
	}
	if s.Values != s.Runs {
		c += fmt.Sprintf(" (n %d runs, %d users)", s.Runs, s.Values)
	} else {
		c += fmt.Sprintf(" (n %d)", s.Runs)
	}
	return c
}

func num(x float64) string { return fmt.Sprintf("%.3g", x) }

func ci(i *stats.Interval) string {
	if i == nil {
		return "[no CI: 1 run]"
	}
	return fmt.Sprintf("[%s, %s]", num(i.Low), num(i.High))
}

func setupLine(s compare.Setup) string {
	faults := strings.Join(s.Faults, "; ")
	if faults == "" {
		faults = "none"
	}
	return fmt.Sprintf("%g s, %d phones, %d+%d active P-/S-CSCFs, probing every %g s (%d failures to down), "+
		"registration period %g s, faults %s", s.DurationS, s.Phones, s.ActivePCSCF, s.ActiveSCSCF, s.ProbingS,
		s.FailuresToDown, s.ExpiresS, faults)
}

// setupOf describes the experiment's scenario before the schemes (as compare's setup section).
func setupOf(sc *scenario.Scenario, vs []compare.Variant) compare.Setup {
	s := compare.Setup{DurationS: sc.Duration.Seconds(), Phones: sc.Traffic.Phones, CallRate: sc.Traffic.CallRate,
		ProbeIntervalS: sc.Traffic.ProbeInterval.Seconds(), HoldS: sc.Traffic.Hold.Seconds(),
		ExpiresS: sc.Topology.Registration.Expires.Seconds(), ProbingS: sc.Topology.Probing.Interval.Seconds(),
		FailuresToDown: sc.Topology.Probing.FailuresToDown, ActivePCSCF: sc.Topology.Pools.PCSCF.Size,
		ActiveSCSCF: sc.Topology.Pools.SCSCF.Size, Faults: []string{}}
	for _, f := range sc.Faults {
		s.Faults = append(s.Faults, f.String())
	}
	for _, v := range vs {
		s.Variants = append(s.Variants, v.Name)
	}
	return s
}
