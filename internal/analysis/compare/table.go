package compare

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// Row is one row of the measured Table 1: one variant's run. docs/compare.md defines every column.
type Row struct {
	Variant string   `json:"variant"`
	Scheme  string   `json:"scheme"`
	Options []string `json:"options,omitempty"`
	// RunDir is the variant's run directory, relative to the comparison's directory.
	RunDir string `json:"run_dir"`
	// Error is set when the run could not be carried out (only with keep-going); the KPIs are then absent.
	Error string `json:"error,omitempty"`

	// ActiveMembers and Members per pool (P-CSCF, S-CSCF).
	ActiveMembers   [2]int  `json:"active_members"`
	Members         [2]int  `json:"members"`
	SpareCapacity   float64 `json:"spare_capacity"`
	StateReplicated bool    `json:"state_replicated"`
	// PeakLoadRatio and CPUPeakRatio: the faulted pool's busiest survivor after the takeover over an active
	// member before the fault, in SIP requests/s and in CPU (report member_load; absent when not measured).
	PeakLoadRatio *float64 `json:"peak_load_ratio,omitempty"`
	CPUPeakRatio  *float64 `json:"cpu_peak_ratio,omitempty"`

	AffectedUsers int `json:"affected_users"`
	// TimeToDetectS is the first detection of the fault by any node (absent: nobody reported it down);
	// TimeToDetectByNode has every node's.
	TimeToDetectS      *float64           `json:"time_to_detect_s,omitempty"`
	TimeToDetectByNode map[string]float64 `json:"time_to_detect_by_node,omitempty"`

	MO Dir `json:"mo"`
	MT Dir `json:"mt"`

	CallsTotal  int `json:"calls_total"`
	CallsFailed int `json:"calls_failed"`

	// Signalling per affected user after the fault, on top of what an unaffected user generated in the same
	// time (report.Signalling): Cx by command and total, SIP messages, replication messages.
	CxExtraPerUser   map[string]float64 `json:"cx_extra_per_user,omitempty"`
	SIPExtraPerUser  *float64           `json:"sip_extra_per_user,omitempty"`
	ReplPerUser      *float64           `json:"repl_per_user,omitempty"`
	ReplMessagesRun  int                `json:"repl_messages_run"`
	ReplBytesRun     int                `json:"repl_bytes_run"`
	SetupNormalMs    report.Latency     `json:"setup_normal_ms"`
	SetupTakeoverMs  report.Latency     `json:"setup_takeover_ms"`
	ExpectationsOK   int                `json:"expectations_ok"`
	ExpectationsAll  int                `json:"expectations_all"`
	ExpectationsMiss []string           `json:"expectations_missed,omitempty"`
	// Warnings: the run does not look like the variant asked for (e.g. phones re-registering on a 504 under
	// ignore-504).
	Warnings []string `json:"warnings,omitempty"`
	// Repeat summarises the variant's repeated runs (compare --repeat K > 1; also in <variant>/repeat.json).
	Repeat *Repeat `json:"repeat,omitempty"`
}

// Dir holds one direction's columns.
type Dir struct {
	// InterruptionS: p50/p95/max over the affected users with a successful call (Count of them).
	InterruptionS *report.Percentiles `json:"interruption_s,omitempty"`
	// TakenOver: share of the affected users (who tried) served before their next re-registration.
	TakenOver      *float64 `json:"taken_over_before_reregistration,omitempty"`
	UsersAttempted int      `json:"users_attempted"`
	Attempts       int      `json:"attempts"`
	// Failed: affected users' calls in this direction after the fault that failed; for MT including the calls
	// that never reached the phone (report: mt.not_delivered).
	Failed int `json:"failed"`
	// ReregGapP50S: median over the affected users with both of |first successful call − next
	// re-registration| (s): near 0 when service only comes back with the re-registration.
	ReregGapP50S *float64 `json:"rereg_gap_p50_s,omitempty"`
}

// RowOf builds the row of one variant from its run's summary and outcome (either may be nil when the run failed).
func RowOf(v Variant, active [2]int, runDir string, s *report.Summary, o *scenario.Outcome, runErr error) Row {
	r := Row{Variant: v.Name, Scheme: v.Scheme, Options: v.Options, RunDir: runDir, ActiveMembers: active,
		Members:         [2]int{Members(v.Scheme, active[0]), Members(v.Scheme, active[1])},
		SpareCapacity:   round(SpareCapacity(v.Scheme, active[0])),
		StateReplicated: StateReplicated(v.Scheme)}
	if runErr != nil {
		r.Error = runErr.Error()
	}
	if o != nil {
		for _, res := range o.Results {
			r.ExpectationsAll++
			if res.OK {
				r.ExpectationsOK++
			} else {
				r.ExpectationsMiss = append(r.ExpectationsMiss, res.Title())
			}
		}
	}
	if s == nil {
		return r
	}
	r.AffectedUsers = s.AffectedUsers
	if p := FaultedPoolLoad(s); p != nil {
		r.PeakLoadRatio, r.CPUPeakRatio = p.PeakLoadRatio, p.CPUPeakRatio
	}
	if len(s.TimeToDetectS) > 0 {
		r.TimeToDetectByNode = s.TimeToDetectS
		first := math.Inf(1)
		for _, t := range s.TimeToDetectS {
			first = min(first, t)
		}
		r.TimeToDetectS = &first
	}
	r.MO = dirOf(s.MO, s.Users, func(u report.UserKPI) *float64 { return u.MOInterruptionS })
	r.MT = dirOf(s.MT, s.Users, func(u report.UserKPI) *float64 { return u.MTInterruptionS })
	r.CallsTotal, r.CallsFailed = s.Calls.Total, s.Calls.Failed
	if sg := s.Signalling; sg != nil && s.AffectedUsers > 0 {
		r.CxExtraPerUser = map[string]float64{}
		for k, v := range sg.CxPerAffectedUser {
			r.CxExtraPerUser[k] = round(v - sg.CxPerOtherUser[k])
		}
		for k, v := range sg.CxPerOtherUser {
			if _, ok := sg.CxPerAffectedUser[k]; !ok {
				r.CxExtraPerUser[k] = round(-v)
			}
		}
		sip := round(sg.SIPPerAffectedUser - sg.SIPPerOtherUser)
		r.SIPExtraPerUser = &sip
		repl := sg.ReplPerAffectedUser
		r.ReplPerUser = &repl
		r.ReplMessagesRun, r.ReplBytesRun = sg.ReplMessages, sg.ReplBytes
	}
	r.SetupNormalMs, r.SetupTakeoverMs = s.SetupLatencyMs.Normal, s.SetupLatencyMs.Takeover
	if n := s.Registrations.ByKind["restoration"]; n > 0 && slices.Contains(v.Options, "ignore-504") {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the phones registered %d times on a 504 restoration answer "+
			"although the variant has ignore-504: this run did not apply traffic.on_restoration_504", n))
	}
	return r
}

func dirOf(d report.Direction, users []report.UserKPI, interruption func(report.UserKPI) *float64) Dir {
	out := Dir{InterruptionS: d.InterruptionS, TakenOver: d.TakenOverBeforeReregistration,
		UsersAttempted: d.UsersAttempted, Attempts: d.Attempts + d.NotDelivered,
		Failed: d.Attempts - d.Succeeded + d.NotDelivered}
	var gaps []float64
	for _, u := range users {
		if i := interruption(u); i != nil && u.ReregS != nil {
			gaps = append(gaps, math.Abs(*i-*u.ReregS))
		}
	}
	if len(gaps) > 0 {
		sort.Float64s(gaps)
		g := round(gaps[(len(gaps)-1)/2])
		out.ReregGapP50S = &g
	}
	return out
}

func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }
