package ue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// CallResult is the caller's view of one call (the same facts as its record).
type CallResult struct {
	CallID       string
	To           string
	Result       string        // "ok" or the failure, as in Record.Result
	Status       int           // final answer to the INVITE (0 = none)
	Setup180     time.Duration // INVITE → first 180/183 (0 = none)
	Setup200     time.Duration // INVITE → 200 (0 = not answered)
	Duration     time.Duration // 200 → end of the BYE transaction (answered calls)
	Ended        string        // "local", "remote" or "shutdown" (answered calls)
	ByeStatus    int           // final answer to our BYE (0 = none sent or no answer)
	PCSCF, SCSCF string
}

// dialog is one call leg of a phone, as caller (mo) or callee (mt). Requests sent inside it go to the
// outbound proxy with the route set as Route headers (RFC 3261 §12.2.1.1, loose routing).
type dialog struct {
	key          string // call-id "|" local tag
	phone        *Phone
	mo           bool
	callID       string
	localTag     string
	remoteTag    string
	local        sip.Uri // our identity (From of our requests)
	remote       sip.Uri // the peer's (To of our requests)
	remoteTarget sip.Uri
	routeSet     []sip.Uri

	ackOnce, byeOnce sync.Once
	acked, bye       chan struct{} // ACK received (mt), BYE received
	refreshed        chan struct{} // a session refresh (UPDATE) received (buffered: one pending signal)

	mu         sync.Mutex
	cseq       uint32
	answeredAt time.Time // mt: 200 sent
	rec        *Record   // mt: the record to finish when the call ends
	finished   bool
}

func newDialog(p *Phone, mo bool, callID, localTag string) *dialog {
	return &dialog{key: callID + "|" + localTag, phone: p, mo: mo, callID: callID, localTag: localTag,
		acked: make(chan struct{}), bye: make(chan struct{}), refreshed: make(chan struct{}, 1)}
}

func (d *dialog) gotAck() { d.ackOnce.Do(func() { close(d.acked) }) }
func (d *dialog) gotBye() { d.byeOnce.Do(func() { close(d.bye) }) }

// request builds an in-dialog request with the given CSeq number.
func (d *dialog) request(u *UE, method sip.RequestMethod, cseq uint32) *sip.Request {
	req := sip.NewRequest(method, d.remoteTarget)
	req.AppendHeader(u.via())
	maxFwd := sip.MaxForwardsHeader(70)
	req.AppendHeader(&maxFwd)
	from := &sip.FromHeader{Address: d.local, Params: sip.NewParams()}
	from.Params.Add("tag", d.localTag)
	req.AppendHeader(from)
	to := &sip.ToHeader{Address: d.remote, Params: sip.NewParams()}
	if d.remoteTag != "" {
		to.Params.Add("tag", d.remoteTag)
	}
	req.AppendHeader(to)
	cid := sip.CallIDHeader(d.callID)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: cseq, MethodName: method})
	for _, r := range d.routeSet {
		req.AppendHeader(&sip.RouteHeader{Address: *r.Clone()})
	}
	req.AppendHeader(sip.NewHeader("User-Agent", userAgent))
	req.SetBody(nil)
	return req
}

func (d *dialog) nextCSeq() uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cseq++
	return d.cseq
}

func (u *UE) addDialog(d *dialog) {
	u.dmu.Lock()
	u.dialogs[d.key] = d
	u.dmu.Unlock()
}

func (u *UE) removeDialog(d *dialog) {
	u.dmu.Lock()
	delete(u.dialogs, d.key)
	u.dmu.Unlock()
}

// dialogOf finds the dialog an incoming in-dialog request belongs to: its Call-ID and its To tag (ours).
func (u *UE) dialogOf(req *sip.Request) *dialog {
	to := req.To()
	if to == nil {
		return nil
	}
	tag, _ := to.Params.Get("tag")
	u.dmu.Lock()
	defer u.dmu.Unlock()
	return u.dialogs[callID(req)+"|"+tag]
}

// targetURI accepts "user0002", "user0002@ims.test" or a SIP URI.
func (u *UE) targetURI(to string) (sip.Uri, error) {
	var uri sip.Uri
	s := to
	if !strings.HasPrefix(s, "sip:") && !strings.HasPrefix(s, "sips:") && !strings.HasPrefix(s, "tel:") {
		if !strings.Contains(s, "@") {
			s += "@" + u.cfg.Domain
		}
		s = "sip:" + s
	}
	if err := sip.ParseUri(s, &uri); err != nil {
		return uri, fmt.Errorf("ue: callee %q: %w", to, err)
	}
	return uri, nil
}

// Call places a call from this phone to `to` ("user0002", "user0002@ims.test" or a SIP URI) through the
// outbound proxy, and hangs up (BYE) after hold. Without a final answer within Config.CallTimeout the call is
// CANCELled. ctx ends the call early: CANCEL before the answer, BYE after it. The call's record is written
// before Call returns; the error is nil when the call was answered (even if the BYE then failed), otherwise it
// wraps a *StatusError, ErrTimeout or ErrTransport.
func (p *Phone) Call(ctx context.Context, to string, hold time.Duration) (CallResult, error) {
	return p.call(ctx, to, hold, "", "")
}

// call is Call; probe marks a reachability probe (ProbeMT, ProbeMO) of the user probeUser: its record says so,
// it counts apart from the users' calls, and a restoration 504 to it changes nothing in the phone.
func (p *Phone) call(ctx context.Context, to string, hold time.Duration, probe, probeUser string) (CallResult, error) {
	u := p.ue
	if !u.running.Load() {
		return CallResult{}, ErrNotRunning
	}
	target, err := u.targetURI(to)
	if err != nil {
		return CallResult{}, err
	}
	d := newDialog(p, true, vocab.NewCallID(u.advIP), vocab.NewTag())
	d.local, d.remote, d.cseq = p.aor(), target, 1

	inv := sip.NewRequest(sip.INVITE, target)
	inv.AppendHeader(u.via())
	maxFwd := sip.MaxForwardsHeader(70)
	inv.AppendHeader(&maxFwd)
	from := &sip.FromHeader{Address: d.local, Params: sip.NewParams()}
	from.Params.Add("tag", d.localTag)
	inv.AppendHeader(from)
	inv.AppendHeader(&sip.ToHeader{Address: target})
	cid := sip.CallIDHeader(d.callID)
	inv.AppendHeader(&cid)
	inv.AppendHeader(&sip.CSeqHeader{SeqNo: 1, MethodName: sip.INVITE})
	inv.AppendHeader(p.contactHeader())
	inv.AppendHeader(sip.NewHeader("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS, UPDATE"))
	if se := u.cfg.SessionExpires; se > 0 && probe == "" {
		addSessionTimer(inv, se, false)
	}
	inv.AppendHeader(sip.NewHeader("User-Agent", userAgent))
	ct := sip.ContentTypeHeader("application/sdp")
	inv.AppendHeader(&ct)
	inv.SetBody(sdp(u.advIP, 20000+2*(p.n%20000)))
	u.bind(inv)

	start := time.Now()
	rec := Record{Type: "call", Direction: "mo", IMPU: p.impu, CallID: d.callID, To: target.String(), Probe: probe,
		ProbeUser: probeUser}
	stamp(&rec, start)
	if probe == "" && p.backingOff() {
		// The network said 503 Retry-After: the phone does not send, and the user's call fails at once.
		rec.Result, rec.Status = ResultHeldBack, sip.StatusServiceUnavailable
		u.records.write(&rec)
		u.stats.callsHeld.Add(1)
		return CallResult{CallID: rec.CallID, To: rec.To, Result: rec.Result, Status: rec.Status},
			fmt.Errorf("ue: call %s → %s: %w", p.impu, rec.To, ErrBackingOff)
	}
	u.addDialog(d) // a BYE from the callee can arrive as soon as it has answered
	defer u.removeDialog(d)

	var final *sip.Response
	tx, err := u.cli.TransactionRequest(context.Background(), inv, sipgo.ClientRequestBuild)
	if err != nil {
		tx = nil // sipgo returns a typed nil in the interface
		err = fmt.Errorf("%w: %w", ErrTransport, err)
	} else {
		timeout := u.cfg.CallTimeout
		if probe != "" && u.cfg.Reachability.Timeout > 0 {
			timeout = u.cfg.Reachability.Timeout
		}
		final, err = u.awaitAnswer(ctx, tx, inv, start, &rec, timeout)
	}
	hosts := nodeHosts{}
	if final != nil {
		if final.IsSuccess() {
			rec.Setup200 = msp(time.Since(start))
		}
		rec.Status = final.StatusCode
		hosts = moHosts(final)
		if err == nil && !final.IsSuccess() {
			err = &StatusError{Code: final.StatusCode, Reason: final.Reason}
		}
	}
	hosts.fill(p.hosts())
	rec.PCSCF, rec.SCSCF = hosts.pcscf, hosts.scscf
	if vocab.IsRestoration(final) && probe == "" {
		p.onRestoration(rec.CallID, start)
	}
	if probe == "" {
		p.noteRetryAfter(final)
	}
	if ra := retryAfter(final); ra > 0 {
		rec.RetryAfterS = int(ra / time.Second)
	}

	if final != nil && final.IsSuccess() {
		u.confirm(ctx, d, tx, final, hold, err != nil, &rec)
	} else {
		rec.DurationMs = ms(time.Since(start))
	}
	if tx != nil {
		tx.Terminate()
	}
	rec.Result = resultOf(err)
	u.records.write(&rec)

	res := CallResult{CallID: rec.CallID, To: rec.To, Result: rec.Result, Status: rec.Status, Ended: rec.Ended,
		ByeStatus: rec.ByeStatus, PCSCF: rec.PCSCF, SCSCF: rec.SCSCF,
		Duration: time.Duration(rec.DurationMs * float64(time.Millisecond))}
	if rec.Setup180 != nil {
		res.Setup180 = time.Duration(*rec.Setup180 * float64(time.Millisecond))
	}
	if rec.Setup200 != nil {
		res.Setup200 = time.Duration(*rec.Setup200 * float64(time.Millisecond))
	}
	if probe != "" {
		if err != nil {
			u.stats.probesFailed.Add(1)
			return res, fmt.Errorf("ue: probe call %s → %s: %w", p.impu, rec.To, err)
		}
		u.stats.probesOK.Add(1)
		return res, nil
	}
	if err != nil {
		u.stats.callsFailed.Add(1)
		u.log.Debug("ue: call failed", "impu", p.impu, "call_id", rec.CallID, "method", "INVITE",
			"status", rec.Status, "err", err)
		return res, fmt.Errorf("ue: call %s → %s: %w", p.impu, rec.To, err)
	}
	u.stats.callsOK.Add(1)
	u.log.Debug("ue: call done", "impu", p.impu, "call_id", rec.CallID, "method", "INVITE", "status", rec.Status)
	return res, nil
}

// awaitAnswer reads the INVITE's responses until a final one. On the call timeout or when ctx ends, it CANCELs
// (once a provisional response has come, RFC 3261 §9.1) and waits for the final answer to the INVITE, which
// it returns with the reason it gave up (ErrTimeout or aborted).
func (u *UE) awaitAnswer(ctx context.Context, tx sip.ClientTransaction, inv *sip.Request, start time.Time,
	rec *Record, callTimeout time.Duration) (*sip.Response, error) {
	timeout := time.NewTimer(callTimeout)
	defer timeout.Stop()
	provisional := false
	seen := func(r *sip.Response) {
		provisional = true
		if r.StatusCode >= 180 && rec.Setup180 == nil {
			rec.Setup180 = msp(time.Since(start))
		}
	}
	var cause error
wait:
	for {
		select {
		case r := <-tx.Responses():
			if r.IsProvisional() {
				seen(r)
				continue
			}
			return r, nil
		case <-tx.Done():
			return nil, txError(tx.Err())
		case <-timeout.C:
			cause = fmt.Errorf("%w within the call timeout (%s)", ErrTimeout, callTimeout)
			break wait
		case <-ctx.Done():
			cause = fmt.Errorf("%w: %w", errAborted, ctx.Err())
			break wait
		}
	}
	if !provisional {
		return nil, cause
	}
	go u.cancel(inv)
	giveUp := time.NewTimer(64 * sip.T1)
	defer giveUp.Stop()
	for {
		select {
		case r := <-tx.Responses():
			if r.IsProvisional() {
				seen(r)
				continue
			}
			return r, cause // usually 487; a 200 that crossed the CANCEL is ACKed and hung up by the caller
		case <-tx.Done():
			return nil, cause
		case <-giveUp.C:
			return nil, cause
		case <-u.lastWord.Done(): // stopping, and the network did not answer within StopGrace
			return nil, cause
		}
	}
}

// cancel sends CANCEL for inv (same Request-URI, top Via, Call-ID, From, To and CSeq number as the INVITE).
func (u *UE) cancel(inv *sip.Request) {
	req := sip.NewRequest(sip.CANCEL, *inv.Recipient.Clone())
	req.AppendHeader(inv.Via().Clone())
	maxFwd := sip.MaxForwardsHeader(70)
	req.AppendHeader(&maxFwd)
	req.AppendHeader(sip.HeaderClone(inv.From()))
	req.AppendHeader(sip.HeaderClone(inv.To()))
	req.AppendHeader(sip.HeaderClone(inv.CallID()))
	req.AppendHeader(&sip.CSeqHeader{SeqNo: inv.CSeq().SeqNo, MethodName: sip.CANCEL})
	for _, h := range inv.GetHeaders("Route") {
		req.AppendHeader(sip.HeaderClone(h))
	}
	req.SetBody(nil)
	ctx, done := context.WithTimeout(u.lastWord, 64*sip.T1)
	defer done()
	if _, err := u.do(ctx, req); err != nil {
		u.log.Debug("ue: CANCEL failed", "call_id", callID(inv), "method", "CANCEL", "err", err)
	}
}

// confirm completes an answered call: the dialog from the 2xx, ACK (again for each retransmitted 2xx), the
// hold time, and BYE unless the callee hung up first. hangUp skips the hold (the answer came after a CANCEL).
func (u *UE) confirm(ctx context.Context, d *dialog, tx sip.ClientTransaction, ok *sip.Response, hold time.Duration,
	hangUp bool, rec *Record) {
	if to := ok.To(); to != nil {
		d.remoteTag, _ = to.Params.Get("tag")
	}
	d.remoteTarget = d.remote
	if c := ok.Contact(); c != nil {
		d.remoteTarget = *c.Address.Clone()
	}
	for _, h := range ok.GetHeaders("Record-Route") {
		if rr, isRR := h.(*sip.RecordRouteHeader); isRR {
			d.routeSet = append(d.routeSet, *rr.Address.Clone())
		}
	}
	slices.Reverse(d.routeSet) // the caller's route set is the Record-Route of the 2xx, reversed

	ack := d.request(u, sip.ACK, 1) // CSeq number of the INVITE
	u.bind(ack)
	template := ack.Clone()
	if err := u.cli.WriteRequest(ack, sipgo.ClientRequestBuild); err != nil {
		u.log.Debug("ue: ACK failed", "call_id", d.callID, "method", "ACK", "err", err)
	}
	tx.OnRetransmission(func(r *sip.Response) {
		if r.IsSuccess() {
			_ = u.cli.WriteRequest(template.Clone(), sipgo.ClientRequestBuild)
		}
	})

	answered := time.Now()
	rec.Ended = "local"
	if !hangUp {
		// Session timers only when the callee confirmed them in its 200 (RFC 4028 §9).
		u.holdCall(ctx, d, hold, sessionExpires(ok), rec)
	}
	if rec.Ended != "remote" {
		bye := d.request(u, sip.BYE, d.nextCSeq())
		bctx, done := context.WithTimeout(u.lastWord, 64*sip.T1)
		res, err := u.do(bctx, bye)
		done()
		switch {
		case err != nil:
			rec.ByeResult = resultOf(err)
		case res.IsSuccess():
			rec.ByeStatus, rec.ByeResult = res.StatusCode, "ok"
		default:
			rec.ByeStatus, rec.ByeResult = res.StatusCode, resultOf(&StatusError{Code: res.StatusCode})
		}
		if err != nil || !res.IsSuccess() {
			u.log.Debug("ue: BYE failed", "call_id", d.callID, "method", "BYE", "status", rec.ByeStatus, "err", err)
		}
	}
	rec.DurationMs = ms(time.Since(answered))
}
