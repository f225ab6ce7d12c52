package report

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"sort"
	"strconv"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// FileUsers is users.csv: one row per affected user (UserKPI).
const FileUsers = "users.csv"

// UserKPI is what happened to one affected user after its fault: when its service came back in each direction and
// when it next re-registered. The comparison of protection schemes (internal/analysis/compare) plots the MT interruption
// against the time to the next re-registration: under load sharing the two coincide.
type UserKPI struct {
	IMPU  string `json:"impu"`
	Fault string `json:"fault"` // the faulted node that affected the user
	// T0S is the fault's instant (offset from the run's start).
	T0S float64 `json:"t0_s"`
	// ReregS is the seconds from the fault to the user's next successful registration (absent: none before the
	// end of the run).
	ReregS *float64 `json:"rereg_s,omitempty"`
	// MOInterruptionS and MTInterruptionS are the seconds from the fault until the user's first successful call in
	// that direction was answered (absent: none after the fault).
	MOInterruptionS *float64 `json:"mo_interruption_s,omitempty"`
	MTInterruptionS *float64 `json:"mt_interruption_s,omitempty"`
	// MOTakenOver and MTTakenOver: a successful call in that direction started after the fault and before the
	// next re-registration.
	MOTakenOver bool `json:"mo_taken_over"`
	MTTakenOver bool `json:"mt_taken_over"`
	// From the reachability probes (Summary.Survival; absent without probes): seconds from the fault to the
	// answer (200) of the first successful MT and MO probe, and to both (RestoreS; MT alone for users that place
	// no calls). SetupStartedS is RestoreS timed at those probes' start instead. Censored: not restored by the end
	// of the run. Probed: the user was probed. A summary written before restoration was timed at the answer has
	// its MT, MO and restore times dropped when read, and its old restore time as SetupStartedS.
	MTRestoreS    *float64 `json:"mt_restore_s,omitempty"`
	MORestoreS    *float64 `json:"mo_restore_s,omitempty"`
	RestoreS      *float64 `json:"restore_s,omitempty"`
	SetupStartedS *float64 `json:"setup_started_s,omitempty"`
	Censored      bool     `json:"censored,omitempty"`
	Probed        bool     `json:"probed,omitempty"`
}

// Signalling counts the messages after the fault, per user, to price a takeover. Affected users are counted from
// their fault to the end of the run, other users from the first fault; the difference of the per-user counts is
// the signalling a takeover costs on top of the normal traffic (docs/report.md).
type Signalling struct {
	// WindowS is the time from the first fault to the end of the run.
	WindowS float64 `json:"window_s"`
	// OtherUsers is the number of users seen in the run that no fault affected.
	OtherUsers int `json:"other_users"`
	// CxPerAffectedUser / CxPerOtherUser: Cx requests about a user (HSS cx_answer events by the user part of
	// their Public-Identity or User-Name), by command and "total".
	CxPerAffectedUser map[string]float64 `json:"cx_per_affected_user"`
	CxPerOtherUser    map[string]float64 `json:"cx_per_other_user"`
	// SIPPerAffectedUser / SIPPerOtherUser: SIP messages (deduplicated trace, every hop) of the user's calls and
	// registrations (by Call-ID); a message of a call between two users counts for both.
	SIPPerAffectedUser float64 `json:"sip_per_affected_user"`
	SIPPerOtherUser    float64 `json:"sip_per_other_user"`
	// Replication: repl_send events of the pool members (state replication), over the whole run and after the
	// first fault, with their bytes.
	ReplMessages           int     `json:"repl_messages"`
	ReplBytes              int     `json:"repl_bytes"`
	ReplMessagesAfterFault int     `json:"repl_messages_after_fault"`
	ReplBytesAfterFault    int     `json:"repl_bytes_after_fault"`
	ReplPerAffectedUser    float64 `json:"repl_per_affected_user"`
}

// users fills Summary.Users from the analysis.
func (a *analysis) users() {
	for _, impu := range a.s.AffectedIMPUs {
		u := a.affected[impu]
		k := UserKPI{IMPU: impu, Fault: u.fault.Target, T0S: u.fault.T0S}
		if u.reregNs != 0 {
			v := round(float64(u.reregNs-u.t0Ns) / 1e9)
			k.ReregS = &v
		}
		for dir, dst := range map[string]**float64{"mo": &k.MOInterruptionS, "mt": &k.MTInterruptionS} {
			t, ok := a.firstOK[dir][impu]
			if !ok {
				continue
			}
			v := round(float64(t-u.t0Ns) / 1e9)
			*dst = &v
		}
		k.MOTakenOver = a.takenOver["mo"][impu]
		k.MTTakenOver = a.takenOver["mt"][impu]
		a.s.Users = append(a.s.Users, k)
	}
}

// signalling fills Summary.Signalling (only for runs with a fault).
func (a *analysis) signalling(r *run, msgs []msg) {
	if a.firstT0 == 0 {
		return
	}
	sg := &Signalling{CxPerAffectedUser: map[string]float64{}, CxPerOtherUser: map[string]float64{}}
	sg.WindowS = round(float64(r.lastTime()-a.firstT0) / 1e9)
	users := map[string]bool{}
	callUsers := map[string][]string{} // Call-ID → user parts of its parties
	for _, x := range r.records {
		u := userPart(x.IMPU)
		users[u] = true
		if x.CallID != "" && !containsStr(callUsers[x.CallID], u) {
			callUsers[x.CallID] = append(callUsers[x.CallID], u)
		}
	}
	affected := map[string]*affectedUser{} // by user part
	for impu, u := range a.affected {
		affected[userPart(impu)] = u
	}
	others := 0
	for u := range users {
		if affected[u] == nil {
			others++
		}
	}
	sg.OtherUsers = others
	// counts reports whether a message about user u at tNs is after its fault, and whether u is affected.
	counts := func(u string, tNs int64) (after, aff bool) {
		if au := affected[u]; au != nil {
			return tNs >= au.t0Ns, true
		}
		return tNs >= a.firstT0, false
	}
	for _, e := range r.events {
		switch x := e.Data.(type) {
		case obs.CxAnswer:
			id := x.IMPU
			if id == "" {
				id = x.IMPI
			}
			if id == "" {
				continue
			}
			after, aff := counts(userPart(id), e.TNs)
			if !after {
				continue
			}
			m := sg.CxPerOtherUser
			if aff {
				m = sg.CxPerAffectedUser
			}
			cmd := x.Cmd
			if cmd == "" {
				cmd = "unknown"
			}
			m[cmd]++
			m["total"]++
		case obs.ReplSend:
			sg.ReplMessages++
			sg.ReplBytes += x.Bytes
			if e.TNs >= a.firstT0 {
				sg.ReplMessagesAfterFault++
				sg.ReplBytesAfterFault += x.Bytes
			}
		}
	}
	var sipAff, sipOth int
	for _, m := range msgs {
		if m.Proto != "sip" || m.callID == "" {
			continue
		}
		for _, u := range callUsers[m.callID] {
			after, aff := counts(u, m.TNs)
			switch {
			case !after:
			case aff:
				sipAff++
			default:
				sipOth++
			}
		}
	}
	per := func(n float64, users int) float64 {
		if users == 0 {
			return 0
		}
		return round(n / float64(users))
	}
	for k, v := range sg.CxPerAffectedUser {
		sg.CxPerAffectedUser[k] = per(v, a.s.AffectedUsers)
	}
	for k, v := range sg.CxPerOtherUser {
		sg.CxPerOtherUser[k] = per(v, others)
	}
	sg.SIPPerAffectedUser = per(float64(sipAff), a.s.AffectedUsers)
	sg.SIPPerOtherUser = per(float64(sipOth), others)
	sg.ReplPerAffectedUser = per(float64(sg.ReplMessagesAfterFault), a.s.AffectedUsers)
	a.s.Signalling = sg
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// censored is users.csv's censored column: true/false for a probed user, empty otherwise.
func censored(u UserKPI) string {
	if !u.Probed {
		return ""
	}
	return strconv.FormatBool(u.Censored)
}

// writeUsers writes users.csv: one row per affected user.
func writeUsers(path string, s *Summary) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write([]string{"impu", "fault", "t0_s", "rereg_s", "mo_interruption_s", "mt_interruption_s",
		"mo_taken_over", "mt_taken_over", "mt_restore_s", "mo_restore_s", "restore_s", "censored",
		"setup_started_s"})
	opt := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	users := append([]UserKPI(nil), s.Users...)
	sort.Slice(users, func(i, j int) bool { return users[i].IMPU < users[j].IMPU })
	for _, u := range users {
		_ = w.Write([]string{u.IMPU, u.Fault, strconv.FormatFloat(u.T0S, 'f', -1, 64), opt(u.ReregS),
			opt(u.MOInterruptionS), opt(u.MTInterruptionS), strconv.FormatBool(u.MOTakenOver),
			strconv.FormatBool(u.MTTakenOver), opt(u.MTRestoreS), opt(u.MORestoreS), opt(u.RestoreS),
			censored(u), opt(u.SetupStartedS)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("report: users.csv: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
