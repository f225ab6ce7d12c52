package ue

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
)

// RFC 4028 session timers (Config.SessionExpires). The caller is always the refresher (refresher=uac): it sends
// an in-dialog UPDATE every half session interval while it holds an answered call. The callee confirms the
// interval in its 200 and ends the call when no refresh comes in time. Either side that finds the session
// broken ends the call as cut: its record says ended "cut" and, in cut_ns, when the phone noticed.

// EndedCut is Record.Ended of an answered call whose session could not be kept up: a session refresh timed out,
// got 408 or 481, or none succeeded within the session interval (the caller), or no refresh came within the
// session interval (the callee).
const EndedCut = "cut"

// headers is what a request and a response share here.
type headers interface {
	GetHeader(name string) sip.Header
	AppendHeader(h sip.Header)
}

// sessionExpires reads the delta-seconds of a message's Session-Expires header (short form x); 0 = none.
func sessionExpires(m headers) time.Duration {
	h := m.GetHeader("Session-Expires")
	if h == nil {
		h = m.GetHeader("x")
	}
	if h == nil {
		return 0
	}
	v, _, _ := strings.Cut(h.Value(), ";")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// addSessionTimer puts the session timer's headers on an INVITE, an UPDATE or a 2xx to either.
func addSessionTimer(m headers, se time.Duration, require bool) {
	m.AppendHeader(sip.NewHeader("Session-Expires", strconv.Itoa(int(se/time.Second))+";refresher=uac"))
	if require {
		m.AppendHeader(sip.NewHeader("Require", "timer"))
	} else {
		m.AppendHeader(sip.NewHeader("Supported", "timer"))
	}
}

// sessionGrace is how long before the session interval runs out the side that does not refresh gives up (RFC
// 4028 §10: the smaller of 32 s and a third of the interval).
func sessionGrace(se time.Duration) time.Duration { return min(32*time.Second, se/3) }

// holdCall holds an answered outgoing call for hold, refreshing the session every se/2 when se > 0. It sets
// rec.Ended when the call ends otherwise than by the hold running out: "remote" (BYE received), "shutdown",
// or EndedCut (with rec.CutNs and rec.RefreshResult); the caller then sends BYE.
func (u *UE) holdCall(ctx context.Context, d *dialog, hold, se time.Duration, rec *Record) {
	t := time.NewTimer(hold)
	defer t.Stop()
	var tick <-chan time.Time
	if se > 0 {
		tk := time.NewTicker(se / 2)
		defer tk.Stop()
		tick = tk.C
	}
	lastOK := time.Now()
	for {
		select {
		case <-t.C:
			return
		case <-d.bye:
			rec.Ended = "remote"
			return
		case <-ctx.Done():
			if u.runCtx.Err() != nil {
				rec.Ended = "shutdown"
			}
			return
		case <-tick:
		}
		result := u.refreshSession(ctx, d, se)
		now := time.Now()
		switch {
		case ctx.Err() != nil:
			if u.runCtx.Err() != nil {
				rec.Ended = "shutdown"
			}
			return
		case result == "ok":
			lastOK = now
			rec.Refreshes++
			rec.LastRefreshNs = now.UnixNano()
			continue
		}
		select {
		case <-d.bye: // the peer hung up while the refresh was on its way
			rec.Ended = "remote"
			return
		default:
		}
		// RFC 4028 §10: a refresh that times out or gets 408 or 481 ends the session; after any other failure
		// it lasts until its interval runs out without a successful refresh.
		if result == "timeout" || result == "transport" || result == "408" || result == "481" ||
			now.Sub(lastOK) >= se-sessionGrace(se) {
			rec.Ended, rec.CutNs, rec.RefreshResult = EndedCut, now.UnixNano(), result
			return
		}
	}
}

// refreshSession sends one session refresh (UPDATE) in d and returns its result as a record's ("ok", the
// status code, "timeout", "transport"). A refresh gets at most half the session interval (and the transaction
// timeout) for its answer: no answer by the next refresh counts as a timeout.
func (u *UE) refreshSession(ctx context.Context, d *dialog, se time.Duration) string {
	req := d.request(u, sip.UPDATE, d.nextCSeq())
	req.AppendHeader(d.phone.contactHeader())
	addSessionTimer(req, se, false)
	rctx, done := context.WithTimeout(ctx, min(se/2, 64*sip.T1))
	defer done()
	res, err := u.do(rctx, req)
	switch {
	case err != nil && ctx.Err() == nil && rctx.Err() != nil:
		return "timeout" // our own deadline, not the call's end
	case err != nil:
		return resultOf(err)
	case !res.IsSuccess():
		return strconv.Itoa(res.StatusCode)
	}
	return "ok"
}

// watchSession ends an answered incoming call as cut when no session refresh (UPDATE) comes within the session
// interval less the grace (RFC 4028 §10): it sends BYE and writes the callee's record. It returns when the call
// ends otherwise or the phones stop.
func (u *UE) watchSession(d *dialog, se time.Duration) {
	wait := se - sessionGrace(se)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-d.bye:
			return
		case <-u.runCtx.Done():
			return
		case <-d.refreshed:
			t.Reset(wait)
			continue
		case <-t.C:
		}
		d.mu.Lock()
		over := d.finished || d.rec == nil
		d.mu.Unlock()
		if over {
			return
		}
		noticed := time.Now()
		bye := d.request(u, sip.BYE, d.nextCSeq())
		bctx, done := context.WithTimeout(u.lastWord, 64*sip.T1)
		res, err := u.do(bctx, bye)
		done()
		d.mu.Lock()
		if rec := d.rec; rec != nil && !d.finished {
			rec.CutNs, rec.RefreshResult = noticed.UnixNano(), "expired"
			switch {
			case err != nil:
				rec.ByeResult = resultOf(err)
			default:
				rec.ByeStatus, rec.ByeResult = res.StatusCode, "ok"
				if !res.IsSuccess() {
					rec.ByeResult = strconv.Itoa(res.StatusCode)
				}
			}
		}
		d.mu.Unlock()
		u.finishMT(d, "ok", EndedCut)
		return
	}
}
