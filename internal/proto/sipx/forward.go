package sipx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// Errors of a forward that got no final response.
var (
	ErrNoTarget = errors.New("sipx: no reachable target")
	ErrNoAnswer = errors.New("sipx: no answer")
	// ErrNoProvisional is an INVITE to a pool member that got no provisional response within
	// ForwarderConfig.ProvisionalTimeout (fast failure detection). It is an ErrNoAnswer to the callers.
	ErrNoProvisional = fmt.Errorf("%w (no provisional response in time)", ErrNoAnswer)
)

// ForwarderConfig holds the per-node timers of the target walk.
type ForwarderConfig struct {
	// NoAnswer is how long an attempt may go without any response before the next target is tried (default 2s).
	// It replaces sipgo's 32 s Timer B/F for failover purposes.
	NoAnswer time.Duration `yaml:"no_answer"`
	// InviteNoAnswer is NoAnswer for INVITE (default NoAnswer). A live next hop answers an INVITE with 100 Trying
	// at once, whatever lies behind it, so this need not grow with the hops behind.
	InviteNoAnswer time.Duration `yaml:"invite_no_answer"`
	// Proceeding bounds the wait for a final response once a provisional arrived (default 60s for INVITE,
	// 4×NoAnswer for other methods).
	Proceeding time.Duration `yaml:"proceeding"`
	// ProvisionalTimeout turns fast failure detection on (docs/architecture.md, "Fast failure detection"): an
	// INVITE outside a dialog sent to a pool member (a hop resolved through SRV) that gets no response at all,
	// provisional or final, within this time is sent to the next member, and the silence counts as a missed probe
	// of that member (pool.Health.ProvisionalMissed). A live next hop answers 100 Trying at once (Proxy sends
	// it when this is set), so about 200 ms tells a dead member from a live one. 0 (the default) = off: an
	// INVITE waits InviteNoAnswer like any request. Non-INVITE requests always keep the NoAnswer rules.
	ProvisionalTimeout time.Duration `yaml:"provisional_timeout"`
	// MaxAttempts bounds the targets tried for one request (default 4).
	MaxAttempts int `yaml:"max_attempts"`
	// DownOn5xx marks a peer down when it answers 408/503/504 (default false: those trigger a retry at the next
	// target, but only a missing answer or a transport error marks the peer down, so a P-CSCF answering 504
	// because the S-CSCFs behind it are gone is not itself taken for dead).
	DownOn5xx bool `yaml:"down_on_5xx"`
	// Seed seeds the target order (the node's seed, topology.NodeConfig.Seed); 0 = from the clock.
	Seed uint64 `yaml:"-"`
}

func (c *ForwarderConfig) defaults() {
	if c.NoAnswer <= 0 {
		c.NoAnswer = 2 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 4
	}
}

// Forwarder sends requests to a hop, walking its SRV targets (RFC 2782 order, known-down targets skipped) with
// the retry rules of SPEC §2.2: retry only on 408/503/504, a transport error or no answer; never after a non-100
// provisional; each retry is a new client transaction with a new branch.
type Forwarder struct {
	ep     *Endpoint
	res    pool.Resolver
	health *pool.Health
	rec    *obs.Recorder
	log    *slog.Logger
	cfg    ForwarderConfig

	seed uint64
	mu   sync.Mutex
	rnd  *rand.Rand
}

// NewForwarder builds a forwarder. health may be nil (every target is then up).
func NewForwarder(ep *Endpoint, res pool.Resolver, health *pool.Health, cfg ForwarderConfig, rec *obs.Recorder, log *slog.Logger, seed uint64) *Forwarder {
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	return &Forwarder{ep: ep, res: res, health: health, rec: rec, log: log, cfg: cfg, seed: seed,
		rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// requestRand returns the random source of one request's target walk: derived from the forwarder's seed and the
// request's From and To users, method and CSeq number, so the choice for a request does not depend on the order
// in which concurrent requests reach the node (a user's first REGISTER lands on the same member in every run
// with the same seed, whatever the other phones do).
func (f *Forwarder) requestRand(req *sip.Request) *rand.Rand {
	k := requestKey(req)
	return rand.New(rand.NewPCG(f.seed^k, k^0x9e3779b97f4a7c15))
}

// requestKey is the FNV-1a hash (64 bit) of a request's From user, 0, To user, 0, method, 0 and CSeq number in
// decimal (a missing From, To or CSeq leaves out its part and the separator after or before it).
func requestKey(req *sip.Request) uint64 {
	// FNV-1a (64 bit) over the same bytes as before, written out so that it allocates nothing.
	h := fnvOffset64
	if from := req.From(); from != nil {
		h = fnvString(h, from.Address.User)
		h = fnvByte(h, 0)
	}
	if to := req.To(); to != nil {
		h = fnvString(h, to.Address.User)
		h = fnvByte(h, 0)
	}
	h = fnvString(h, string(req.Method))
	if cs := req.CSeq(); cs != nil {
		h = fnvByte(h, 0)
		var num [20]byte
		for _, c := range strconv.AppendUint(num[:0], uint64(cs.SeqNo), 10) {
			h = fnvByte(h, c)
		}
	}
	return h
}

const (
	fnvOffset64 uint64 = 14695981039346656037
	fnvPrime64  uint64 = 1099511628211
)

func fnvByte(h uint64, c byte) uint64 { return (h ^ uint64(c)) * fnvPrime64 }

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h
}

// Outcome is what a forward produced.
type Outcome struct {
	Final     *sip.Response // the final response (our Via still on top), nil when none came
	Target    pool.Target   // the target of the last attempt
	Attempts  int
	Relayed   bool  // a non-100 provisional was relayed upstream: the caller must not try elsewhere
	Cancelled bool  // the upstream CANCELled
	Err       error // why there is no final response (ErrNoTarget, ErrNoAnswer, transport error)
}

// Succeeded reports a 2xx final response.
func (o Outcome) Succeeded() bool { return o.Final != nil && o.Final.IsSuccess() }

// Retryable reports an outcome after which another hop may be tried: no provisional relayed, and no final
// response or a 408/503/504.
//
// A 504 with the 3GPP restoration body (vocab.IsRestoration) is not retried: it is the network's answer for this user
// (no member holds its registration; the phone must register again), and every other member would give it too.
func (o Outcome) Retryable() bool {
	if o.Relayed || o.Cancelled {
		return false
	}
	return o.Final == nil || Retryable(o.Final.StatusCode) && !vocab.IsRestoration(o.Final)
}

// Retryable reports the status codes that send a request to the next target.
func Retryable(code int) bool { return code == 408 || code == 503 || code == 504 }

// ForwardOption adjusts one forward.
type ForwardOption func(*forwardOpts)

type forwardOpts struct {
	mutate     func(out *sip.Request, t pool.Target)
	exclude    map[string]bool
	onResponse func(res *sip.Response)
}

// WithResponseHook edits every response before it is relayed upstream or returned (for example an SBC
// rewriting Contact), the retransmissions of a 2xx to an INVITE included. Those come after Forward returned, on
// the transaction layer's goroutine, one at a time, each on a copy of its own.
func WithResponseHook(f func(res *sip.Response)) ForwardOption {
	return func(o *forwardOpts) { o.onResponse = f }
}

// WithMutate changes each attempt's copy of the request once its target is known.
func WithMutate(f func(out *sip.Request, t pool.Target)) ForwardOption {
	return func(o *forwardOpts) { o.mutate = f }
}

// WithExclude skips these target addresses (already tried by the caller).
func WithExclude(addrs map[string]bool) ForwardOption {
	return func(o *forwardOpts) { o.exclude = addrs }
}

// Targets resolves a hop to its targets in try order, known-down ones removed.
func (f *Forwarder) Targets(ctx context.Context, hop Hop, tried map[string]bool) ([]pool.Target, error) {
	return f.targets(ctx, hop, tried, nil)
}

// targets is Targets with the random source of one request (nil: the forwarder's shared one).
func (f *Forwarder) targets(ctx context.Context, hop Hop, tried map[string]bool, rnd *rand.Rand) ([]pool.Target, error) {
	var all []pool.Target
	switch {
	case hop.SRV != "":
		ts, err := f.res.LookupSRV(ctx, hop.SRV)
		if err != nil {
			return nil, fmt.Errorf("sipx: resolve %s: %w", hop.SRV, err)
		}
		if hop.Pin != "" {
			var pinned []pool.Target
			for _, t := range ts {
				if strings.EqualFold(strings.TrimSuffix(t.Name, "."), strings.TrimSuffix(hop.Pin, ".")) {
					pinned = append(pinned, t)
				}
			}
			ts = pinned
		}
		all = ts
		if f.health != nil {
			for _, t := range ts {
				f.health.Watch(t) // probe every pool member we may send to (idempotent)
			}
		}
	case hop.Addr != "":
		host, port, err := splitHostPort(hop.Addr)
		if err != nil {
			return nil, err
		}
		ip := host
		if !isIP(host) {
			if ip, err = f.res.LookupHost(ctx, host); err != nil {
				return nil, fmt.Errorf("sipx: resolve %s: %w", host, err)
			}
		}
		all = []pool.Target{{Name: hop.Host, Addr: HostPort(ip, port), Priority: 1, Weight: 1}}
	default:
		return nil, errors.New("sipx: empty hop")
	}
	if rnd == nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		rnd = f.rnd
	}
	if f.health == nil {
		out := pool.Order(all, rnd)
		var keep []pool.Target
		for _, t := range out {
			if !tried[t.Addr] {
				keep = append(keep, t)
			}
		}
		return keep, nil
	}
	return f.health.Candidates(all, rnd, tried), nil
}

// Forward sends req to hop and waits for a final response, relaying provisional responses (except 100) to stx
// when stx is not nil. req must already carry the Route/Request-URI the next hop needs; Forward adds this node's
// Via to a copy per attempt and decrements Max-Forwards. The final response is returned, not relayed: the caller
// decides (relay it with Respond, try another hop, or answer itself).
func (f *Forwarder) Forward(ctx context.Context, stx sip.ServerTransaction, req *sip.Request, hop Hop, opts ...ForwardOption) Outcome {
	var o forwardOpts
	for _, opt := range opts {
		opt(&o)
	}
	tried := map[string]bool{}
	for k := range o.exclude {
		tried[k] = true
	}
	// req is read, never changed: each attempt forwards its own copy (attempt), Max-Forwards decremented there.
	base := req

	var cancelled chan struct{} // only an INVITE can be cancelled; a nil channel never fires
	if stx != nil && req.IsInvite() {
		cancelled = make(chan struct{})
		var cancelOnce sync.Once
		stx.OnCancel(func(*sip.Request) { cancelOnce.Do(func() { close(cancelled) }) })
	}

	var out Outcome
	rnd := f.requestRand(req)
	// Passive detection only for the members of a pool (a hop resolved through SRV): they are probed, and there
	// is another member to fail over to. A hop named by its address is a phone's contact (or a host outside the
	// pools): the lab's phones share one socket, so one phone's silence would take every phone behind that
	// address down, and with it every ACK and request the node sends them.
	health := f.health
	if hop.SRV == "" {
		health = nil
	}
	// Fast failure detection only toward pool members, and only for a dialog-forming INVITE: a re-INVITE belongs
	// to its dialog's member, a phone's contact may be slow to answer, and a non-INVITE has no 100 Trying.
	var provisional time.Duration
	if hop.SRV != "" && req.IsInvite() && !HasToTag(req) {
		provisional = f.cfg.ProvisionalTimeout
	}
	for out.Attempts < f.cfg.MaxAttempts {
		targets, err := f.targets(ctx, hop, tried, rnd)
		if err != nil {
			out.Err = err
			return out
		}
		if len(targets) == 0 {
			if out.Final == nil && out.Err == nil {
				out.Err = fmt.Errorf("%w for %s", ErrNoTarget, hop)
			}
			return out
		}
		t := targets[0]
		tried[t.Addr] = true
		out.Attempts++
		out.Target = t
		var sent time.Time
		if health != nil {
			sent = health.Now()
		}
		var answeredIn time.Duration
		res, relayed, wasCancelled, err := f.attempt(ctx, stx, base, t, &o, cancelled, &answeredIn, provisional)
		out.Final, out.Relayed, out.Cancelled, out.Err = res, relayed, wasCancelled, err
		switch {
		case wasCancelled || relayed:
			return out
		case errors.Is(err, ErrNoProvisional):
			// A missed probe, not a dead peer: a member slow once keeps its users; two in a row (with the probes,
			// FailuresToDown) take it down.
			if health != nil {
				health.ProvisionalMissed(t, sent)
			}
			continue
		case err != nil:
			if health != nil {
				if r := failureReason(err); r == pool.ReasonTimeout {
					// Not held against a peer that answered anything since: the silence is downstream.
					if health.TransactionTimedOut(t, sent) == pool.SilenceDownstream && !base.IsInvite() {
						// Nor sent on to another member: the peer is alive and still waiting on its own next hop
						// (a BYE to a phone that does not answer); a second copy elsewhere would wait for the same
						// silence, and every proxy upstream would do the same (RFC 4321 §2's amplification).
						// The caller answers 408.
						out.Err = fmt.Errorf("%w (%s answered since the request was sent: the silence is further "+
							"on, not failed over)", err, t.Name)
						return out
					}
				} else {
					health.TransactionFailed(t, r)
				}
			}
			continue
		case Retryable(res.StatusCode) && !vocab.IsRestoration(res):
			switch {
			case health != nil && f.cfg.DownOn5xx:
				health.TransactionFailed(t, strconv.Itoa(res.StatusCode))
			case health != nil:
				health.Heard(t) // it answered: alive, if busy
			}
			continue
		default:
			if health != nil {
				health.TransactionSucceeded(t, answeredIn)
			}
			return out
		}
	}
	return out
}

func failureReason(err error) string {
	switch {
	case errors.Is(err, ErrNoAnswer), errors.Is(err, sip.ErrTransactionTimeout):
		return pool.ReasonTimeout
	default:
		return pool.ReasonTransportError
	}
}

// attempt runs one client transaction to one target. It sets *answeredIn to the time from sending the request to
// the target's first response, provisional or final (left alone when nothing came). provisional > 0 gives up on
// an INVITE that got no response within it (ErrNoProvisional); the transaction is then left to watchAbandoned.
func (f *Forwarder) attempt(ctx context.Context, stx sip.ServerTransaction, base *sip.Request, t pool.Target,
	o *forwardOpts, cancelled <-chan struct{}, answeredIn *time.Duration, provisional time.Duration) (
	final *sip.Response, relayed, wasCancelled bool, err error) {
	out := base.Clone()
	if mf := out.MaxForwards(); mf != nil {
		mf.Dec()
	} else {
		mf := sip.MaxForwardsHeader(70)
		out.AppendHeader(&mf)
	}
	out.PrependHeader(f.ep.Via())
	f.ep.Bind(out)
	out.SetDestination(t.Addr)
	if o.mutate != nil {
		o.mutate(out, t)
	}
	start := time.Now()
	tx, err := f.ep.Client.TransactionRequest(ctx, out, noBuild)
	if err != nil {
		f.record(out, t, 0, start, "transport_error")
		return nil, false, false, fmt.Errorf("sipx: send %s to %s: %w", out.Method, t.Addr, err)
	}
	keep := false // the transaction outlives the attempt (a 2xx to an INVITE: see below)
	defer func() {
		if !keep {
			tx.Terminate()
		}
	}()

	proceeding := f.cfg.Proceeding
	if proceeding <= 0 {
		if out.IsInvite() {
			proceeding = 60 * time.Second
		} else {
			proceeding = 4 * f.cfg.NoAnswer
		}
	}
	noAnswer := f.cfg.NoAnswer
	if out.IsInvite() && f.cfg.InviteNoAnswer > 0 {
		noAnswer = f.cfg.InviteNoAnswer
	}
	first := noAnswer
	if provisional <= 0 || provisional >= noAnswer {
		provisional = 0 // the ordinary no-answer time comes first anyway
	} else {
		first = provisional
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	gotProvisional := false
	for {
		select {
		case res, ok := <-tx.Responses():
			if !ok {
				continue
			}
			if !gotProvisional && *answeredIn == 0 {
				*answeredIn = time.Since(start)
			}
			if o.onResponse != nil {
				res = res.Clone()
				o.onResponse(res)
			}
			if res.IsProvisional() {
				if !gotProvisional {
					gotProvisional = true
					timer.Reset(proceeding)
					if f.health != nil {
						f.health.Heard(t)
					}
				}
				if res.StatusCode != 100 {
					relayed = true
					if stx != nil {
						f.Relay(stx, base, res)
					}
				}
				continue
			}
			f.record(out, t, res.StatusCode, start, "")
			if out.IsInvite() && res.IsSuccess() && stx != nil {
				// RFC 6026 §7.1: the 2xx is retransmitted end to end by the callee until its ACK arrives, and
				// a proxy forwards each retransmission upstream. The client transaction stays (Accepted, until
				// Timer M) to catch them; without this a 2xx or an ACK lost on any hop lost the whole call.
				// Each goes through the response hook as the first did: the BAC's hook puts the phone's token in
				// the Contact, and a retransmission relayed unedited (the only 200 a caller got when the first
				// was lost) leaked the phone's own address into the core as the dialog's remote target.
				hook := o.onResponse
				tx.OnRetransmission(func(r *sip.Response) {
					if !r.IsSuccess() {
						return
					}
					if hook != nil {
						r = r.Clone()
						hook(r)
					}
					f.Relay(stx, base, r)
				})
				keep = true
			}
			return res, relayed, false, nil
		case <-tx.Done():
			f.record(out, t, 0, start, failureReason(tx.Err()))
			return nil, relayed, false, fmt.Errorf("sipx: %s to %s: %w", out.Method, t.Addr, tx.Err())
		case <-timer.C:
			if !gotProvisional && provisional > 0 {
				f.record(out, t, 0, start, "no_provisional")
				keep = true
				go f.watchAbandoned(tx, out, t, noAnswer-provisional)
				return nil, relayed, false, fmt.Errorf("%w: %s to %s, nothing within %s", ErrNoProvisional, out.Method,
					t.Addr, provisional)
			}
			if gotProvisional && out.IsInvite() {
				f.sendCancel(out, t)
			}
			f.record(out, t, 0, start, "timeout")
			return nil, relayed, false, fmt.Errorf("%w from %s (%s)", ErrNoAnswer, t.Addr, out.Method)
		case <-cancelled:
			cancelled = nil // once
			wasCancelled = true
			if gotProvisional {
				f.sendCancel(out, t)
			} else {
				// Nothing to cancel yet downstream; RFC 3261 §9.1 says wait for a provisional. Give up here.
				f.record(out, t, 487, start, "cancelled")
				return nil, relayed, true, nil
			}
			timer.Reset(f.cfg.NoAnswer)
		case <-ctx.Done():
			if gotProvisional && out.IsInvite() {
				f.sendCancel(out, t)
			}
			return nil, relayed, wasCancelled, ctx.Err()
		}
		if wasCancelled {
			// Keep reading for the 487 (or a 200 that raced the CANCEL).
			continue
		}
	}
}

// watchAbandoned follows an INVITE client transaction given up for want of a provisional response
// (ErrNoProvisional), while the request is tried at the next member. A late provisional means the member is alive
// but slow: it is heard (pool.Health.Heard) and the INVITE is cancelled there (RFC 3261 §9.1), so the call is not
// set up twice; a late final response ends the watch (sipgo acknowledges a non-2xx; a 2xx, rare after the
// CANCEL, is left unacknowledged, and the callee ends that dialog, RFC 3261 §13.3.1.4). Nothing within rest (the
// remainder of the ordinary no-answer time) ends the watch too: the transaction is terminated, which stops its
// retransmissions to a member that is likely dead.
func (f *Forwarder) watchAbandoned(tx sip.ClientTransaction, out *sip.Request, t pool.Target, rest time.Duration) {
	defer tx.Terminate()
	timer := time.NewTimer(rest)
	defer timer.Stop()
	cancelled := false
	for {
		select {
		case res, ok := <-tx.Responses():
			if !ok {
				continue
			}
			if f.health != nil {
				f.health.Heard(t)
			}
			if !res.IsProvisional() {
				f.log.Debug("sipx: final response after failover", "call_id", callID(out), "peer", t.Name,
					"status", res.StatusCode)
				return
			}
			if !cancelled {
				cancelled = true
				f.log.Info("sipx: provisional response after failover: cancelled there", "call_id", callID(out),
					"peer", t.Name, "status", res.StatusCode)
				f.sendCancel(out, t)
				timer.Reset(4 * f.cfg.NoAnswer) // wait for the 487
			}
		case <-tx.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// noBuild is a client option that keeps the request as the proxy built it (any option disables sipgo's own
// header building).
func noBuild(*sipgo.Client, *sip.Request) error { return nil }

// sendCancel cancels an INVITE client transaction (RFC 3261 §9.1): same Request-URI, Call-ID, From, To, CSeq
// number, top Via and Route as the INVITE.
func (f *Forwarder) sendCancel(invite *sip.Request, t pool.Target) {
	c := sip.NewRequest(sip.CANCEL, invite.Recipient)
	if v := invite.Via(); v != nil {
		c.AppendHeader(v.Clone())
	}
	for _, h := range invite.GetHeaders("Route") {
		c.AppendHeader(sip.HeaderClone(h))
	}
	if h := invite.From(); h != nil {
		c.AppendHeader(sip.HeaderClone(h))
	}
	if h := invite.To(); h != nil {
		c.AppendHeader(sip.HeaderClone(h))
	}
	if h := invite.CallID(); h != nil {
		c.AppendHeader(sip.HeaderClone(h))
	}
	if h := invite.CSeq(); h != nil {
		c.AppendHeader(&sip.CSeqHeader{SeqNo: h.SeqNo, MethodName: sip.CANCEL})
	}
	mf := sip.MaxForwardsHeader(70)
	c.AppendHeader(&mf)
	c.SetBody(nil)
	f.ep.Bind(c)
	c.SetDestination(t.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 4*f.cfg.NoAnswer)
	go func() {
		defer cancel()
		tx, err := f.ep.Client.TransactionRequest(ctx, c, noBuild)
		if err != nil {
			f.log.Warn("sipx: cancel", "call_id", callID(invite), "peer", t.Name, "err", err)
			return
		}
		defer tx.Terminate()
		select {
		case <-tx.Responses():
		case <-tx.Done():
		case <-ctx.Done():
		}
	}()
}

// Relay sends a downstream response upstream on stx: our own Via (the top one) is removed from a copy.
func (f *Forwarder) Relay(stx sip.ServerTransaction, req *sip.Request, res *sip.Response) {
	up := res.Clone()
	up.RemoveHeader("Via")
	up.SetDestination(req.Source())
	if err := stx.Respond(up); err != nil {
		f.log.Debug("sipx: relay response", "call_id", callID(req), "status", res.StatusCode, "err", err)
	}
}

func (f *Forwarder) record(out *sip.Request, t pool.Target, status int, start time.Time, failure string) {
	if f.rec == nil {
		return
	}
	f.rec.Emit(obs.SIPTx{Method: string(out.Method), CallID: callID(out), Peer: t.Name, Addr: t.Addr,
		Status: status, LatencyUs: time.Since(start).Microseconds(), Failure: failure})
}

func callID(m sip.Message) string { return vocab.CallID(m) }
