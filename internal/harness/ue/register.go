package ue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// Registration kinds in records.
const (
	kindInitial    = "initial"
	kindRefresh    = "refresh"
	kindDeregister = "deregister"
	// kindRestoration ("restoration"): an initial registration triggered by a 504 with the restoration body.
)

// Phone is one simulated subscriber. Its methods are safe for concurrent use.
type Phone struct {
	ue        *UE
	n         int
	user      string // user0001
	impi      string // user0001@ims.test
	impu      string // sip:user0001@ims.test
	password  string
	caller    bool        // places generated calls (Config.Mix)
	role      Role        // in the traffic model (Config.Model)
	prober    bool        // a reachability prober (Config.Reachability), not a user
	busy      atomic.Bool // in a generated outgoing call
	restoring atomic.Bool // an initial registration after a restoration 504 is on its way
	// backoffUntil (unix ns): the network answered 503 with Retry-After; no new request before then (RFC 3261
	// §21.5.4, §20.33).
	backoffUntil atomic.Int64

	regMu sync.Mutex // one registration procedure at a time

	mu        sync.Mutex
	regCallID string
	regTag    string
	cseq      uint32
	expiresAt time.Time
	// registeredAt is when the last registration procedure succeeded (a restoration 504 to a request sent
	// before it is stale).
	registeredAt time.Time
	reg          Registration
	refresh      *time.Timer
}

// Registration is what a phone knows about its registration.
type Registration struct {
	Registered     bool
	Expires        time.Duration // granted by the registrar
	ExpiresAt      time.Time
	CallID         string // the Call-ID every REGISTER of this phone uses
	CSeq           uint32 // of the last REGISTER sent
	ServiceRoute   []string
	AssociatedURIs []string // P-Associated-URI
	Path           []string
	PCSCF, SCSCF   string // host names from Path and Service-Route
	Count          int    // successful registrations so far (initial and refreshes)
}

// User returns the user name (user0001).
func (p *Phone) User() string { return p.user }

// IMPU returns the public identity (sip:user0001@ims.test).
func (p *Phone) IMPU() string { return p.impu }

// IMPI returns the private identity (user0001@ims.test).
func (p *Phone) IMPI() string { return p.impi }

// Registered reports whether the phone holds a registration that has not expired.
func (p *Phone) Registered() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Now().Before(p.expiresAt)
}

// Registration returns a copy of the phone's registration state.
func (p *Phone) Registration() Registration {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.reg
	r.Registered = time.Now().Before(p.expiresAt)
	r.ServiceRoute = append([]string(nil), r.ServiceRoute...)
	r.AssociatedURIs = append([]string(nil), r.AssociatedURIs...)
	r.Path = append([]string(nil), r.Path...)
	return r
}

func (p *Phone) aor() sip.Uri { return sip.Uri{Scheme: "sip", User: p.user, Host: p.ue.cfg.Domain} }

func (p *Phone) contactHeader() *sip.ContactHeader {
	return &sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: p.user, Host: p.ue.advIP, Port: p.ue.advPort}}
}

func (p *Phone) hosts() nodeHosts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return nodeHosts{pcscf: p.reg.PCSCF, scscf: p.reg.SCSCF}
}

// Register registers the phone (or refreshes its registration) with the configured period: a REGISTER with an
// empty Authorization, then, on 401, the SIP Digest answer to the challenge with CSeq+1. On success the phone
// refreshes on its own at about half the granted period until the UE stops. A non-2xx final answer is
// returned as *StatusError (403: wrong password).
func (p *Phone) Register(ctx context.Context) error {
	kind := kindInitial
	if p.Registered() {
		kind = kindRefresh
	}
	return p.register(ctx, kind)
}

// Deregister removes the registration (REGISTER with Expires 0) and stops the refreshes.
func (p *Phone) Deregister(ctx context.Context) error { return p.register(ctx, kindDeregister) }

func (p *Phone) register(ctx context.Context, kind string) error {
	u := p.ue
	if !u.running.Load() {
		return ErrNotRunning
	}
	p.regMu.Lock()
	defer p.regMu.Unlock()
	expires := u.cfg.Expires
	if kind == kindDeregister {
		expires = 0
		p.stopRefresh()
	}
	start := time.Now()
	uri := "sip:" + u.cfg.Domain
	res, err := p.sendRegister(ctx, expires, emptyAuthorization(p.impi, u.cfg.Domain, uri))
	if err == nil && res.StatusCode == sip.StatusUnauthorized {
		var ch challenge
		if ch, err = parseChallenges(headerValues(res, "WWW-Authenticate")); err == nil {
			res, err = p.sendRegister(ctx, expires, digestAuthorization(ch, p.impi, p.password, "REGISTER", uri))
		}
	}
	if err == nil && !res.IsSuccess() {
		err = &StatusError{Code: res.StatusCode, Reason: res.Reason}
	}

	p.mu.Lock()
	rec := Record{Type: "register", IMPU: p.impu, CallID: p.regCallID, Kind: kind, Result: resultOf(err),
		DurationMs: ms(time.Since(start))}
	if p.prober {
		rec.Probe = ProbeProber
	}
	stamp(&rec, start)
	if res != nil {
		rec.Status = res.StatusCode
	}
	switch {
	case err == nil && kind == kindDeregister:
		p.expiresAt = time.Time{}
	case err == nil:
		granted := p.grantedExpires(res, expires)
		p.expiresAt = start.Add(time.Duration(granted) * time.Second)
		p.registeredAt = time.Now()
		hosts := registerHosts(res)
		p.reg = Registration{Expires: time.Duration(granted) * time.Second, ExpiresAt: p.expiresAt,
			CallID: p.regCallID, CSeq: p.cseq, ServiceRoute: headerList(res, "Service-Route"),
			AssociatedURIs: headerList(res, "P-Associated-URI"), Path: headerList(res, "Path"),
			PCSCF: hosts.pcscf, SCSCF: hosts.scscf, Count: p.reg.Count + 1}
		rec.Expires, rec.PCSCF, rec.SCSCF = granted, hosts.pcscf, hosts.scscf
		if granted > 0 {
			p.scheduleLocked(p.refreshDelayLocked(time.Duration(granted) * time.Second))
		}
	default:
		p.reg.CSeq = p.cseq
		if res != nil && (res.StatusCode == sip.StatusForbidden || res.StatusCode == sip.StatusNotFound) {
			p.expiresAt = time.Time{} // the network refuses this subscriber
		}
		if kind != kindDeregister && (!u.cfg.Manual || time.Now().Before(p.expiresAt)) {
			// Keep trying, soon enough to refresh before the registration runs out if it has not yet. In
			// manual mode only a registered phone keeps trying; the test drives the others. A Retry-After of
			// an overloaded network is honoured first.
			retry := u.jitter(u.cfg.RegisterRetry, 0.2)
			if left := time.Until(p.expiresAt); left > 0 {
				retry = min(retry, max(time.Second, left/4))
			}
			if ra := p.noteRetryAfter(res); ra > 0 {
				retry = max(retry, ra)
				rec.RetryAfterS = int(ra / time.Second)
			}
			p.scheduleLocked(retry)
		}
	}
	p.mu.Unlock()
	u.records.write(&rec)

	if err != nil {
		u.stats.regFailed.Add(1)
		lvl := u.log.Debug
		if rec.Status == sip.StatusForbidden {
			lvl = u.log.Warn // a configuration error more often than a fault
		}
		lvl("ue: registration failed", "impu", p.impu, "call_id", rec.CallID, "status", rec.Status, "err", err)
		return fmt.Errorf("ue: register %s: %w", p.impu, err)
	}
	u.stats.regOK.Add(1)
	u.log.Debug("ue: registered", "impu", p.impu, "call_id", rec.CallID, "status", rec.Status, "kind", kind,
		"expires", rec.Expires)
	return nil
}

// sendRegister sends one REGISTER on the phone's registration Call-ID with the next CSeq.
func (p *Phone) sendRegister(ctx context.Context, expires int, authorization string) (*sip.Response, error) {
	u := p.ue
	p.mu.Lock()
	if p.regCallID == "" {
		p.regCallID, p.regTag = vocab.NewCallID(u.advIP), vocab.NewTag()
	}
	p.cseq++
	callID, tag, cseq := p.regCallID, p.regTag, p.cseq
	p.mu.Unlock()

	req := sip.NewRequest(sip.REGISTER, sip.Uri{Scheme: "sip", Host: u.cfg.Domain})
	req.AppendHeader(u.via())
	maxFwd := sip.MaxForwardsHeader(70)
	req.AppendHeader(&maxFwd)
	from := &sip.FromHeader{Address: p.aor(), Params: sip.NewParams()}
	from.Params.Add("tag", tag)
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: p.aor()})
	cid := sip.CallIDHeader(callID)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: cseq, MethodName: sip.REGISTER})
	req.AppendHeader(p.contactHeader())
	exp := sip.ExpiresHeader(expires)
	req.AppendHeader(&exp)
	req.AppendHeader(sip.NewHeader("Authorization", authorization))
	req.AppendHeader(sip.NewHeader("Supported", "path"))
	req.AppendHeader(sip.NewHeader("User-Agent", userAgent))
	req.SetBody(nil)
	return u.do(ctx, req)
}

// grantedExpires reads the period the registrar granted (vocab.GrantedExpiry): our Contact's expires parameter,
// the only Contact's (the BAC rewrites Contacts), the Expires header, or what was asked for.
func (p *Phone) grantedExpires(res *sip.Response, asked int) int {
	mine := func(u sip.Uri) bool { return u.User == p.user && u.Host == p.ue.advIP && u.Port == p.ue.advPort }
	if n, ok := vocab.GrantedExpiry(res, mine); ok {
		return n
	}
	return asked
}

// refreshDelayLocked (p.mu held, p.reg just updated) is when the phone refreshes the registration it was just
// granted for period: RefreshAfter(period) ±10 %, except for a phone's first registration with
// Config.RefreshPhase steady, which refreshes at a uniform random point of (0, RefreshAfter(period)] drawn from
// the seed and the user number, so the phones' registrations have spread ages at any instant of the run.
func (p *Phone) refreshDelayLocked(period time.Duration) time.Duration {
	every := RefreshAfter(period)
	if p.ue.cfg.RefreshPhase == RefreshSteady && !p.prober && p.reg.Count == 1 {
		return SteadyFirstRefresh(p.ue.seed, p.n, every)
	}
	return p.ue.jitter(every, 0.1)
}

// SteadyFirstRefresh is the delay of subscriber n's first refresh under Config.RefreshPhase steady: uniform in
// (0, every], from the run's seed and n only (the same phone refreshes at the same point in every run of a
// seed, whatever the goroutines' order).
func SteadyFirstRefresh(seed int64, n int, every time.Duration) time.Duration {
	return time.Duration((1 - phoneRand(seed, n, 4).Float64()) * float64(every))
}

// scheduleLocked (p.mu held) arms the next registration attempt after d.
func (p *Phone) scheduleLocked(d time.Duration) {
	if p.refresh != nil {
		p.refresh.Stop()
	}
	p.refresh = time.AfterFunc(d, func() {
		u := p.ue
		u.goBackground(func() {
			if u.runCtx.Err() != nil {
				return
			}
			kind := kindInitial
			if p.Registered() {
				kind = kindRefresh
			}
			_ = p.register(u.runCtx, kind)
		})
	})
}

func (p *Phone) stopRefresh() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refresh != nil {
		p.refresh.Stop()
		p.refresh = nil
	}
}

func headerValues(m sip.Message, name string) []string {
	var out []string
	for _, h := range m.GetHeaders(name) {
		out = append(out, h.Value())
	}
	return out
}

// registerAll registers every phone, starting one registration every 1/RegisterRate seconds, and returns
// when each has succeeded or failed.
func (u *UE) registerAll(ctx context.Context) {
	interval := time.Duration(float64(time.Second) / u.cfg.RegisterRate)
	var wg sync.WaitGroup
	next := time.Now()
	for _, p := range append(append([]*Phone(nil), u.phones...), u.probers...) {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		next = next.Add(interval)
		wg.Go(func() {
			if err := p.register(ctx, kindInitial); err != nil {
				u.stats.initialFailed.Add(1)
			} else {
				u.stats.initialOK.Add(1)
			}
		})
	}
	wg.Wait()
}

// deregisterAll de-registers every registered phone, 64 at a time, within 10 seconds.
func (u *UE) deregisterAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, p := range append(append([]*Phone(nil), u.phones...), u.probers...) {
		if !p.Registered() {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := p.Deregister(ctx); err == nil {
				u.stats.deregistered.Add(1)
			}
		})
	}
	wg.Wait()
}

// noteRetryAfter starts the phone's back-off when res is a 503 with Retry-After and returns its length (0: none).
func (p *Phone) noteRetryAfter(res *sip.Response) time.Duration {
	ra := retryAfter(res)
	if ra <= 0 {
		return 0
	}
	until := time.Now().Add(ra).UnixNano()
	for {
		old := p.backoffUntil.Load()
		if old >= until || p.backoffUntil.CompareAndSwap(old, until) {
			break
		}
	}
	p.ue.stats.retryAfters.Add(1)
	return ra
}

// backingOff reports whether the phone is told to wait (a Retry-After not over yet).
func (p *Phone) backingOff() bool { return time.Now().UnixNano() < p.backoffUntil.Load() }

// retryAfter is the delay of a 503's Retry-After header (RFC 3261 §20.33: seconds, optional comment and
// parameters), 0 for anything else.
func retryAfter(res *sip.Response) time.Duration {
	if res == nil || res.StatusCode != sip.StatusServiceUnavailable {
		return 0
	}
	h := res.GetHeader("Retry-After")
	if h == nil {
		return 0
	}
	v := strings.TrimSpace(h.Value())
	if i := strings.IndexAny(v, " ;("); i >= 0 {
		v = v[:i]
	}
	secs, err := strconv.Atoi(v)
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(min(secs, 3600)) * time.Second
}
