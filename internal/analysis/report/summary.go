package report

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/provenance"
)

// Summary is the JSON of summary.json: the KPIs of SPEC §6 for one run. docs/report.md defines every field.
type Summary struct {
	Scenario    string  `json:"scenario"`
	Description string  `json:"description,omitempty"`
	Seed        int64   `json:"seed"`
	StartNs     int64   `json:"start_ns"`
	DurationS   float64 `json:"duration_s"`
	Faults      []Fault `json:"faults"`
	// Provenance is the code, toolchain, machine and command of the run (from scenario.json; absent for runs
	// recorded before it was kept).
	Provenance *provenance.Info `json:"provenance,omitempty"`

	// AffectedUsers is the number of users registered through a faulted node when its fault began;
	// AffectedIMPUs lists them.
	AffectedUsers int      `json:"affected_users"`
	AffectedIMPUs []string `json:"affected_impus"`

	MO Direction `json:"mo"`
	MT Direction `json:"mt"`

	// TimeToDetectS maps a node name to the seconds from the (first) fault to that node's first peer_state
	// "down" event for the faulted node. Nodes that never noticed are absent.
	TimeToDetectS map[string]float64 `json:"time_to_detect_s"`

	// CX counts the HSS's cx_answer events by command ("UAR", …) and, inside, "total", "uat<N>", "sat<N>" and
	// "failed" (answers whose result is not 2xxx). CXAfterFault is the same from the first fault on.
	CX           map[string]map[string]int `json:"cx"`
	CXAfterFault map[string]map[string]int `json:"cx_after_fault,omitempty"`

	// Users: per affected user, its interruption in each direction and its time to the next re-registration
	// (also users.csv). Signalling: messages per user after the fault (absent without a fault).
	Users      []UserKPI   `json:"users,omitempty"`
	Signalling *Signalling `json:"signalling,omitempty"`
	// TakeoverCx is the takeover's Cx cost per call and per user (absent without a fault).
	TakeoverCx *TakeoverCx `json:"takeover_cx,omitempty"`
	// Survival is the affected users' time to restore from the reachability probes, as Kaplan–Meier curves
	// (absent without probes).
	Survival *Survival `json:"survival,omitempty"`
	// MemberLoad is each pool member's load before the first fault and after its takeover (absent without a
	// fault).
	MemberLoad *MemberLoad `json:"member_load,omitempty"`
	// Cost is the steady-state cost per subscriber-hour and per procedure, before the first fault (absent when
	// that window is shorter than 10 s).
	Cost *Cost `json:"cost,omitempty"`

	// PostDialDelay, CallsCut and ProbeLoad (absent without a fault): the post-dial delay of calls to or from
	// affected users after their fault, the calls up at the first fault that it cut, and the probes' share of the
	// phones' signalling after it. docs/report.md, "Post-dial delay", "Calls cut" and "Probe load".
	PostDialDelay *PostDialDelay `json:"post_dial_delay,omitempty"`
	CallsCut      *CallsCut      `json:"calls_cut,omitempty"`
	ProbeLoad     *ProbeLoad     `json:"probe_load,omitempty"`

	SetupLatencyMs SetupLatency `json:"setup_latency_ms"`
	Calls          CallCounts   `json:"calls"`
	Registrations  RegCounts    `json:"registrations"`
	Bins           []Bin        `json:"bins"`
	Ladders        []LadderInfo `json:"ladders,omitempty"`
	Pcap           PcapInfo     `json:"pcap"`
	// Security counts the requests the nodes refused (absent when none was).
	Security *Security `json:"security,omitempty"`
	// Overload is what each node shed (absent when none did); Storm the load the first fault set off (absent
	// without a fault). docs/report.md, "Shed load" and "Storm".
	Overload map[string]*NodeOverload `json:"overload,omitempty"`
	// SelfLag is, per node, the moments its own timers ran late (absent when none did). docs/report.md.
	SelfLag map[string]*SelfLag `json:"self_lag,omitempty"`
	// Health is the run's record of the machine it ran on: each node's worst scheduling stall, the machine's
	// load, steal and other labs, and whether the run is valid for timing (docs/report.md, "Run health").
	Health *Health `json:"health,omitempty"`
	// UDPDrops is, per node (and "ue" for the phones), the datagrams the kernel dropped at its SIP socket
	// because the receive buffer was full (absent when none were). docs/report.md.
	UDPDrops     map[string]*UDPDrops `json:"udp_drops,omitempty"`
	Storm        *Storm               `json:"storm,omitempty"`
	Expectations any                  `json:"expectations,omitempty"` // filled by the scenario runner
	Warnings     []string             `json:"warnings,omitempty"`
	// Events is how many event lines the report read, and the lines it could not read (docs/events.md).
	Events EventsRead `json:"events"`
	Files  []string   `json:"files"`
}

// EventsRead counts the lines of the nodes' events files (events/*.jsonl).
type EventsRead struct {
	Read int `json:"read"` // lines read through the event catalogue
	// Errors is the lines that could not be read: a kind not in the catalogue, a line that does not decode. Each
	// is left out of every KPI.
	Errors int `json:"errors"`
	// ErrorLines names each ("events/pcscf1.jsonl:17: unknown event kind \"x\""), the first MaxEventErrors.
	ErrorLines []string `json:"error_lines,omitempty"`
}

// MaxEventErrors is how many unreadable event lines summary.json and the report name (all are counted).
const MaxEventErrors = 50

// Fault is one fault of the scenario with the instant it actually happened.
type Fault struct {
	Kind   string  `json:"kind"`
	Target string  `json:"target"`
	AtS    float64 `json:"at_s"`
	ForS   float64 `json:"for_s"`
	// T0S is the offset of the lab's fault event for this target (the scenario's at_s when the lab recorded
	// none); every KPI of this fault counts from it.
	T0S           float64            `json:"t0_s"`
	AffectedUsers int                `json:"affected_users"`
	TimeToDetectS map[string]float64 `json:"time_to_detect_s"`
	// Nodes are the nodes of a pool or site target (absent for a node target).
	Nodes []string `json:"nodes,omitempty"`
	// PlannedTarget, PlannedAtS and JitterS are set for a randomised fault (docs/scenarios.md): the target and
	// instant as the scenario planned them (random:pcscf; at), Target and AtS being the ones drawn from the seed.
	PlannedTarget string   `json:"planned_target,omitempty"`
	PlannedAtS    *float64 `json:"planned_at_s,omitempty"`
	JitterS       float64  `json:"jitter_s,omitempty"`
	// Params are the fault's parameters in words ("peers bac, silent drop"; absent when it has none).
	Params string `json:"params,omitempty"`
	// HealS is the offset of the lab's fault_heal event of this fault (the kinds that record one; absent when
	// it was not healed or the kind records none).
	HealS *float64 `json:"heal_s,omitempty"`
	// During counts every user's calls and registrations that started while the fault was in place (t0 to its
	// scheduled end t0 + for, when the heal begins, or the end of the run); AfterHeal those that started after
	// the heal was done (heal_s; t0 + for for kinds that record no heal; absent when it lasted to the end).
	During         *Window `json:"during"`
	AfterHeal      *Window `json:"after_heal,omitempty"`
	t0Ns, detectNs int64
}

// Window counts the calls (judged by the caller's record, by start time) and registration procedures of every
// user in a time window of the run.
type Window struct {
	FromS    float64 `json:"from_s"`
	ToS      float64 `json:"to_s"`
	Calls    int     `json:"calls"`
	Answered int     `json:"answered"`
	Failed   int     `json:"failed"`
	// AnsweredInWindow: calls of the window answered (200) before its end; a call started during an outage and
	// answered after it does not count.
	AnsweredInWindow    int `json:"answered_in_window"`
	Registrations       int `json:"registrations"`
	RegistrationsFailed int `json:"registrations_failed"`
}

// nodes returns the nodes the fault acted on.
func (f *Fault) nodes() []string {
	if len(f.Nodes) > 0 {
		return f.Nodes
	}
	return []string{f.Target}
}

// Direction holds the KPIs of one call direction (MO: the user called; MT: the user was called).
type Direction struct {
	// Attempts and Succeeded count affected users' calls in this direction that started at or after their
	// fault (all calls in a run without faults).
	Attempts  int `json:"attempts"`
	Succeeded int `json:"succeeded"`
	// AttemptsAfterDetection/SucceededAfterDetection restrict them to calls that started at or after the
	// fault's first detection; SuccessRatioAfterDetection is their ratio (absent when there were none).
	AttemptsAfterDetection     int      `json:"attempts_after_detection"`
	SucceededAfterDetection    int      `json:"succeeded_after_detection"`
	SuccessRatioAfterDetection *float64 `json:"success_ratio_after_detection,omitempty"`
	// UsersAttempted: affected users with at least one call in this direction after the fault.
	UsersAttempted int `json:"users_attempted"`
	// AffectedUsersWithSuccess: affected users taken over, with a successful call that started after the fault
	// and before their next re-registration (its answer may come after it).
	AffectedUsersWithSuccess int `json:"affected_users_with_success"`
	// RefreshedFirst: attempting users whose periodic re-registration came before any test of the takeover (no
	// call that succeeded, nor one placed after the fault's first detection, before it). They are no evidence
	// either way. A registration a restoration 504 set off is not a periodic refresh: those users stay tested.
	// UsersTested = UsersAttempted − RefreshedFirst.
	RefreshedFirst int `json:"refreshed_first"`
	UsersTested    int `json:"users_tested"`
	// TakenOverBeforeReregistration = AffectedUsersWithSuccess / UsersTested.
	TakenOverBeforeReregistration *float64 `json:"taken_over_before_reregistration,omitempty"`
	// InterruptionS: per affected user with a successful call after the fault, fault → start of that call.
	InterruptionS *Percentiles `json:"interruption_s,omitempty"`
	// NotDelivered (MT only): calls to affected users started after their fault that failed without reaching the
	// callee's phone (a caller's record with no callee record), which Attempts cannot count.
	NotDelivered int `json:"not_delivered,omitempty"`
}

// Percentiles are nearest-rank percentiles of a sample.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	Max   float64 `json:"max"`
}

// Latency is the setup latency of answered calls, from the caller's INVITE to the 200 (and to the 180).
type Latency struct {
	Count    int     `json:"count"`
	P50      float64 `json:"p50"`
	P95      float64 `json:"p95"`
	Max      float64 `json:"max"`
	Count180 int     `json:"count_180"`
	P50180   float64 `json:"p50_180"`
	P95180   float64 `json:"p95_180"`
}

// SetupLatency compares takeover calls (an affected party, after its fault) with all other calls.
type SetupLatency struct {
	Normal   Latency `json:"normal"`
	Takeover Latency `json:"takeover"`
}

// CallCounts counts calls (distinct Call-IDs), judged by the caller's record (the callee's when only it exists).
type CallCounts struct {
	Total    int            `json:"total"`
	Answered int            `json:"answered"`
	Failed   int            `json:"failed"`
	ByCause  map[string]int `json:"by_cause"`
}

// RegCounts counts registration procedures (records of type register).
type RegCounts struct {
	Total   int            `json:"total"`
	Failed  int            `json:"failed"`
	ByKind  map[string]int `json:"by_kind"`
	ByCause map[string]int `json:"by_cause,omitempty"`
}

// Bin is one time bin of "call success over time": MO and MT records together, by start time.
type Bin struct {
	StartS            float64 `json:"start_s"`
	AffectedAttempts  int     `json:"affected_attempts"`
	AffectedSucceeded int     `json:"affected_succeeded"`
	OthersAttempts    int     `json:"others_attempts"`
	OthersSucceeded   int     `json:"others_succeeded"`
}

// LadderInfo names one ladder diagram drawn for the run.
type LadderInfo struct {
	Direction string  `json:"direction"`
	CallID    string  `json:"call_id"`
	IMPU      string  `json:"impu"`
	StartS    float64 `json:"start_s"`
	File      string  `json:"file"`
	// PNG is the same diagram as a PNG (Liberation Sans, 2 pixels per point), for slides and papers.
	PNG      string   `json:"png,omitempty"`
	Lanes    []string `json:"lanes"`
	Messages int      `json:"messages"`
}

// PcapInfo describes trace.pcap.
type PcapInfo struct {
	File     string `json:"file,omitempty"`
	Packets  int    `json:"packets"`
	SIP      int    `json:"sip"`
	Diameter int    `json:"diameter"`
	// Duplicates is the number of trace lines dropped because the sender's copy of the same message was
	// recorded too.
	Duplicates int `json:"duplicates"`
}

// Lookup returns a numeric KPI by its dotted JSON path ("mo.success_ratio_after_detection",
// "time_to_detect_s.bac", "mo.interruption_s.max", "cx.LIR.uat2", "affected_users"); false if absent or not a
// number. Array elements are addressed by index ("faults.0.t0_s").
func (s *Summary) Lookup(path string) (float64, bool) {
	if s == nil {
		return 0, false
	}
	b, err := json.Marshal(s)
	if err != nil {
		return 0, false
	}
	var v any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return 0, false
	}
	for _, key := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[key]; !ok {
				return 0, false
			}
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(x) {
				return 0, false
			}
			v = x[i]
		default:
			return 0, false
		}
	}
	if b, ok := v.(bool); ok { // health.valid: 1 or 0
		if b {
			return 1, true
		}
		return 0, true
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// HealthLine is the run's health in one line for the runner's output ("" when the run has no record).
func (s *Summary) HealthLine() string {
	if s == nil || s.Health == nil {
		return ""
	}
	return "run health: " + s.Health.Describe()
}

// percentile is the nearest-rank percentile of sorted xs: the smallest value with at least p% of the sample at
// or below it.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	k = min(max(k, 1), len(sorted))
	return sorted[k-1]
}

func percentiles(xs []float64) *Percentiles {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return &Percentiles{Count: len(s), P50: round(percentile(s, 50)), P95: round(percentile(s, 95)), Max: round(s[len(s)-1])}
}

func latency(l200, l180 []float64) Latency {
	var l Latency
	if p := percentiles(l200); p != nil {
		l.Count, l.P50, l.P95, l.Max = p.Count, p.P50, p.P95, p.Max
	}
	if p := percentiles(l180); p != nil {
		l.Count180, l.P50180, l.P95180 = p.Count, p.P50, p.P95
	}
	return l
}

// round keeps microsecond precision (and exact values in tests).
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func ratio(num, den int) *float64 {
	if den == 0 {
		return nil
	}
	r := round(float64(num) / float64(den))
	return &r
}
