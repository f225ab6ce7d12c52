package report

import (
	"math"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// TakeoverCx prices a takeover at the HSS per call and per user (docs/report.md, "Takeover Cx"), so that the
// reachability probes, which call the affected users every 250 ms until they are restored, do not set the figure:
// Cx per call does not depend on who placed the call. Window: from each user's fault (the first fault for the
// other users) to the end of the run, so the de-registrations as the phones stop are left out.
type TakeoverCx struct {
	// WindowS is the time from the first fault to the end of the run.
	WindowS float64 `json:"window_s"`
	// Affected counts the affected users' Cx and calls after their fault; Other the other users' after the first
	// fault (the probers included: they are phones like the others).
	Affected CxParty `json:"affected"`
	Other    CxParty `json:"other"`
	// ExtraLIRPerCall is Affected's LIRs beyond the one every call to a user costs, per call of theirs, minus the
	// same for the other users: what a call of a taken-over user costs the HSS on top of a normal call (about 0.5
	// for a P-CSCF takeover, where every MO call carries restore=1 and asks the HSS with User-Authorization-Type 2;
	// 0 when the users are not served at all).
	ExtraLIRPerCall float64 `json:"extra_lir_per_call"`
	// ExtraRegCxPerUser is Affected's UAR, MAR and SAR per user minus Other's over the same window: what
	// restoring a user costs once (the SAR of an S-CSCF takeover; a whole registration when the phone registers
	// again).
	ExtraRegCxPerUser float64 `json:"extra_reg_cx_per_user"`
}

// CxParty is one group of users' Cx requests (HSS cx_answer events about them) and calls in the window.
type CxParty struct {
	Users int `json:"users"`
	// MOCalls and MTCalls count the calls the users placed and were called in (attempts, answered or not; the
	// reachability probes' calls included), by start time.
	MOCalls int `json:"mo_calls"`
	MTCalls int `json:"mt_calls"`
	// Cx requests about the users by command, with the restoration-marked ones apart: LIR and UAR with
	// User-Authorization-Type 2 (REGISTRATION_AND_CAPABILITIES, the study's restoration query) and SAR with
	// Server-Assignment-Type 3 (UNREGISTERED_USER: a new S-CSCF fetching the restoration data).
	LIR     int `json:"lir"`
	LIRUAT2 int `json:"lir_uat2"`
	UAR     int `json:"uar"`
	UARUAT2 int `json:"uar_uat2"`
	MAR     int `json:"mar"`
	SAR     int `json:"sar"`
	SARSAT3 int `json:"sar_sat3"`
	// LIRPerCall is LIRs beyond one per MT call, per call (MO + MT); RegCxPerUser is (UAR + MAR + SAR) / Users.
	LIRPerCall   float64 `json:"lir_beyond_mt_per_call"`
	RegCxPerUser float64 `json:"reg_cx_per_user"`
}

// takeoverCx fills Summary.TakeoverCx (absent without a fault).
func (a *analysis) takeoverCx(r *run) {
	if a.firstT0 == 0 {
		return
	}
	end := a.s.StartNs + int64(math.Round(a.s.DurationS*1e9))
	affected := map[string]int64{} // user part → its fault's instant
	for impu, u := range a.affected {
		affected[userPart(impu)] = u.t0Ns
	}
	// inWindow reports whether something about user u at tNs is in the window, and whether u is affected.
	inWindow := func(u string, tNs int64) (in, aff bool) {
		from, aff := affected[u]
		if !aff {
			from = a.firstT0
		}
		return tNs >= from && tNs < end, aff
	}
	tc := &TakeoverCx{WindowS: round(float64(end-a.firstT0) / 1e9)}
	party := func(aff bool) *CxParty {
		if aff {
			return &tc.Affected
		}
		return &tc.Other
	}
	// Calls: one per Call-ID, its caller and callee from whichever record names them, its start the earliest
	// record's; the probes' records too.
	type callInfo struct {
		from, to string
		tNs      int64
	}
	calls := map[string]*callInfo{}
	users := map[string]bool{}
	for _, recs := range [][]record{r.records, r.probes} {
		for i := range recs {
			x := &recs[i]
			users[userPart(x.IMPU)] = true
			if x.Type != "call" || x.CallID == "" {
				continue
			}
			c := calls[x.CallID]
			if c == nil {
				c = &callInfo{tNs: x.TNs}
				calls[x.CallID] = c
			}
			c.tNs = min(c.tNs, x.TNs)
			if c.from == "" && x.From != "" {
				c.from = userPart(x.From)
			}
			if c.to == "" && x.To != "" {
				c.to = userPart(x.To)
			}
			if x.Direction == "mo" && c.from == "" {
				c.from = userPart(x.IMPU)
			}
			if x.Direction == "mt" && c.to == "" {
				c.to = userPart(x.IMPU)
			}
		}
	}
	tc.Affected.Users = a.s.AffectedUsers
	for u := range users {
		if _, aff := affected[u]; !aff {
			tc.Other.Users++
		}
	}
	for _, c := range calls {
		if c.from != "" {
			if in, aff := inWindow(c.from, c.tNs); in {
				party(aff).MOCalls++
			}
		}
		if c.to != "" {
			if in, aff := inWindow(c.to, c.tNs); in {
				party(aff).MTCalls++
			}
		}
	}
	for _, e := range r.events {
		x, ok := e.Data.(obs.CxAnswer)
		if !ok {
			continue
		}
		id := x.IMPU
		if id == "" {
			id = x.IMPI
		}
		if id == "" {
			continue
		}
		in, aff := inWindow(userPart(id), e.TNs)
		if !in {
			continue
		}
		p := party(aff)
		uat2 := x.UAT != nil && *x.UAT == 2
		switch x.Cmd {
		case "LIR":
			p.LIR++
			if uat2 {
				p.LIRUAT2++
			}
		case "UAR":
			p.UAR++
			if uat2 {
				p.UARUAT2++
			}
		case "MAR":
			p.MAR++
		case "SAR":
			p.SAR++
			if x.SAT != nil && *x.SAT == 3 {
				p.SARSAT3++
			}
		}
	}
	for _, p := range []*CxParty{&tc.Affected, &tc.Other} {
		if n := p.MOCalls + p.MTCalls; n > 0 {
			p.LIRPerCall = round(float64(p.LIR-p.MTCalls) / float64(n))
		}
		if p.Users > 0 {
			p.RegCxPerUser = round(float64(p.UAR+p.MAR+p.SAR) / float64(p.Users))
		}
	}
	tc.ExtraLIRPerCall = round(tc.Affected.LIRPerCall - tc.Other.LIRPerCall)
	tc.ExtraRegCxPerUser = round(tc.Affected.RegCxPerUser - tc.Other.RegCxPerUser)
	a.s.TakeoverCx = tc
}
