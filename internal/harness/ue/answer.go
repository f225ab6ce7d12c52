package ue

import (
	"errors"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// The phones' server side: incoming calls (the callee's leg), in-dialog requests of both legs, OPTIONS.
func (u *UE) handle(srv *sipgo.Server) {
	srv.OnInvite(u.onInvite)
	srv.OnAck(u.onAck)
	srv.OnBye(u.onBye)
	srv.OnCancel(u.onCancel)
	srv.OnOptions(u.onOptions)
	srv.OnUpdate(u.onUpdate)
}

func (u *UE) respond(tx sip.ServerTransaction, req *sip.Request, code int, reason string) {
	if err := tx.Respond(sip.NewResponseFromRequest(req, code, reason, nil)); err != nil {
		u.log.Debug("ue: respond", "call_id", callID(req), "method", string(req.Method), "status", code, "err", err)
	}
}

// answer builds a response of the callee's dialog: our To tag and Contact, and an SDP answer when sdpBody.
func (u *UE) answer(req *sip.Request, d *dialog, code int, reason string, sdpBody bool) *sip.Response {
	var body []byte
	if sdpBody {
		body = sdp(u.advIP, 20000+2*(d.phone.n%20000))
	}
	res := sip.NewResponseFromRequest(req, code, reason, body)
	if to := res.To(); to != nil {
		to.Params.Add("tag", d.localTag)
	}
	res.AppendHeader(d.phone.contactHeader())
	if sdpBody {
		ct := sip.ContentTypeHeader("application/sdp")
		res.AppendHeader(&ct)
	}
	return res
}

// onInvite answers a call to one of the phones: 100, 180, and 200 with SDP after the ring time; the 200 is
// retransmitted until the ACK comes (RFC 3261 §13.3.1.4). A CANCEL is answered by sipgo (200, and 487 to the
// INVITE). A Request-URI user that is not one of our phones gets 404.
func (u *UE) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	if to := req.To(); to != nil && to.Params.Has("tag") {
		u.onReInvite(req, tx)
		return
	}
	start := time.Now()
	rec := &Record{Type: "call", Direction: "mt", CallID: callID(req), IMPU: "sip:" + req.Recipient.User + "@" + u.cfg.Domain}
	stamp(rec, start)
	if f := req.From(); f != nil {
		rec.From = f.Address.String()
	}
	if t := req.To(); t != nil {
		rec.To = t.Address.String()
	}
	hosts := mtHosts(req)
	rec.PCSCF, rec.SCSCF = hosts.pcscf, hosts.scscf
	switch {
	case u.isProber(req.Recipient.User):
		rec.Probe = ProbeMO
	case req.From() != nil && u.isProber(req.From().Address.User):
		rec.Probe = ProbeMT
	}

	p := u.byUser[req.Recipient.User]
	if p == nil || !u.running.Load() {
		code, reason := sip.StatusNotFound, "Not Found"
		if p != nil {
			code, reason = sip.StatusTemporarilyUnavailable, "Temporarily Unavailable"
		}
		u.respond(tx, req, code, reason)
		u.finishMTRecord(rec, code, start)
		return
	}
	rec.IMPU = p.impu
	u.respond(tx, req, 100, "Trying")

	d := newDialog(p, false, rec.CallID, vocab.NewTag())
	d.local = p.aor()
	if t := req.To(); t != nil {
		d.local = *t.Address.Clone()
	}
	if f := req.From(); f != nil {
		d.remote = *f.Address.Clone()
		d.remoteTag, _ = f.Params.Get("tag")
	}
	if c := req.Contact(); c != nil {
		d.remoteTarget = *c.Address.Clone()
	}
	for _, h := range req.GetHeaders("Record-Route") {
		if rr, ok := h.(*sip.RecordRouteHeader); ok {
			d.routeSet = append(d.routeSet, *rr.Address.Clone()) // the callee's route set keeps the order
		}
	}
	u.addDialog(d)

	cancelled := make(chan struct{})
	var cancelOnce sync.Once
	markCancelled := func() { cancelOnce.Do(func() { close(cancelled) }) }
	if !tx.OnCancel(func(*sip.Request) { markCancelled() }) {
		markCancelled() // cancelled (or ended) before we could listen
	}

	fail := func(code int) {
		u.removeDialog(d)
		u.finishMTRecord(rec, code, start)
	}
	if err := tx.Respond(u.answer(req, d, 180, "Ringing", false)); err != nil {
		fail(0)
		return
	}
	rec.Setup180 = msp(time.Since(start))
	ring := time.NewTimer(u.cfg.RingTime)
	defer ring.Stop()
	select {
	case <-ring.C:
	case <-cancelled:
		fail(sip.StatusRequestTerminated)
		return
	case <-tx.Done():
		fail(0)
		return
	case <-u.runCtx.Done():
		u.respond(tx, req, sip.StatusTemporarilyUnavailable, "Temporarily Unavailable")
		fail(sip.StatusTemporarilyUnavailable)
		return
	}

	ok := u.answer(req, d, sip.StatusOK, "OK", true)
	se := sessionExpires(req)
	if se > 0 && u.cfg.SessionExpires > 0 {
		addSessionTimer(ok, se, true)
	} else {
		se = 0
	}
	rec.Status = sip.StatusOK
	rec.Setup200 = msp(time.Since(start))
	d.mu.Lock()
	d.rec, d.answeredAt = rec, time.Now()
	d.mu.Unlock()
	if err := tx.Respond(ok); err != nil {
		d.mu.Lock()
		taken := d.finished // written already (shutdown)
		d.finished, d.rec = true, nil
		d.mu.Unlock()
		if taken {
			return
		}
		code := 0
		if errors.Is(err, sip.ErrTransactionCanceled) {
			code = sip.StatusRequestTerminated // the CANCEL won the race
		}
		rec.Status, rec.Setup200 = 0, nil
		fail(code)
		return
	}

	wait := sip.T1
	retransmit := time.NewTimer(wait)
	defer retransmit.Stop()
	giveUp := time.NewTimer(64 * sip.T1)
	defer giveUp.Stop()
	watch := func() {
		if se > 0 {
			u.goBackground(func() { u.watchSession(d, se) })
		}
	}
	for {
		select {
		case <-d.acked:
			watch()
			return
		case <-tx.Acks():
			d.gotAck()
			watch()
			return
		case <-d.bye:
			return
		case <-retransmit.C:
			_ = tx.Respond(ok)
			wait = min(2*wait, sip.T2)
			retransmit.Reset(wait)
		case <-giveUp.C:
			u.log.Debug("ue: no ACK for 200", "impu", p.impu, "call_id", rec.CallID, "method", "INVITE")
			u.finishMT(d, "timeout", "")
			return
		}
	}
}

// finishMTRecord writes the record of an incoming call that was not answered (code = what we answered, 0 =
// the transaction failed).
func (u *UE) finishMTRecord(rec *Record, code int, start time.Time) {
	rec.Status = code
	rec.DurationMs = ms(time.Since(start))
	if code == 0 {
		rec.Result = "transport"
	} else {
		rec.Result = resultOf(&StatusError{Code: code})
	}
	if rec.Probe == "" {
		u.stats.mtFailed.Add(1)
	}
	u.records.write(rec)
	u.log.Debug("ue: incoming call not answered", "impu", rec.IMPU, "call_id", rec.CallID, "method", "INVITE",
		"status", code)
}

// finishMT ends an answered incoming call once: result "ok" when it ended normally.
func (u *UE) finishMT(d *dialog, result, ended string) {
	d.mu.Lock()
	rec := d.rec
	if d.finished || rec == nil {
		d.mu.Unlock()
		return
	}
	d.finished = true
	rec.Result, rec.Ended = result, ended
	rec.DurationMs = ms(time.Since(d.answeredAt))
	d.mu.Unlock()
	u.removeDialog(d)
	switch {
	case rec.Probe != "":
	case result == "ok":
		u.stats.mtOK.Add(1)
	default:
		u.stats.mtFailed.Add(1)
	}
	u.records.write(rec)
}

// closeMTDialogs writes the records of incoming calls still up at shutdown.
func (u *UE) closeMTDialogs() {
	u.dmu.Lock()
	var open []*dialog
	for _, d := range u.dialogs {
		if !d.mo {
			open = append(open, d)
		}
	}
	u.dmu.Unlock()
	for _, d := range open {
		u.finishMT(d, "ok", "shutdown")
	}
}

func (u *UE) onReInvite(req *sip.Request, tx sip.ServerTransaction) {
	d := u.dialogOf(req)
	if d == nil {
		u.respond(tx, req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist")
		return
	}
	if err := tx.Respond(u.answer(req, d, sip.StatusOK, "OK", true)); err != nil {
		u.log.Debug("ue: respond to re-INVITE", "call_id", d.callID, "method", "INVITE", "err", err)
	}
}

func (u *UE) onAck(req *sip.Request, _ sip.ServerTransaction) {
	if d := u.dialogOf(req); d != nil {
		d.gotAck()
	}
}

func (u *UE) onBye(req *sip.Request, tx sip.ServerTransaction) {
	d := u.dialogOf(req)
	if d == nil {
		u.respond(tx, req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist")
		return
	}
	u.respond(tx, req, sip.StatusOK, "OK")
	d.gotBye()
	if !d.mo {
		u.finishMT(d, "ok", "remote")
	}
}

// onCancel sees only CANCELs that match no INVITE transaction (sipgo answers the others).
func (u *UE) onCancel(req *sip.Request, tx sip.ServerTransaction) {
	u.respond(tx, req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist")
}

func (u *UE) onOptions(req *sip.Request, tx sip.ServerTransaction) {
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
	res.AppendHeader(sip.NewHeader("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS, UPDATE"))
	if err := tx.Respond(res); err != nil {
		u.log.Debug("ue: respond to OPTIONS", "call_id", callID(req), "method", "OPTIONS", "err", err)
	}
}

// onUpdate answers an in-dialog UPDATE; one with Session-Expires is a session refresh (RFC 4028), confirmed in
// the 200 and noted by the callee's session watch.
func (u *UE) onUpdate(req *sip.Request, tx sip.ServerTransaction) {
	d := u.dialogOf(req)
	if d == nil {
		u.respond(tx, req, sip.StatusCallTransactionDoesNotExists, "Call/Transaction Does Not Exist")
		return
	}
	res := u.answer(req, d, sip.StatusOK, "OK", false)
	if se := sessionExpires(req); se > 0 {
		addSessionTimer(res, se, true)
		select {
		case d.refreshed <- struct{}{}:
		default:
		}
	}
	if err := tx.Respond(res); err != nil {
		u.log.Debug("ue: respond to UPDATE", "call_id", d.callID, "method", "UPDATE", "err", err)
	}
}
