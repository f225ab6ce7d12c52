package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Reasons recorded with a peer_state event. Passive failures from a final response use the status code
// (StatusReason(503) = "503").
const (
	ReasonProbeOK        = "probe_ok"        // up: SuccessesToUp probes in a row answered
	ReasonProbeTimeout   = "probe_timeout"   // down: probes got no final response within Timeout
	ReasonProbeError     = "probe_error"     // down: probes failed otherwise
	ReasonTransportError = "transport_error" // down: a probe or a transaction could not be sent
	ReasonTimeout        = "timeout"         // down: a transaction got no answer (passive)
	ReasonTransactionOK  = "transaction_ok"  // up: a transaction was answered while probing is disabled
	ReasonHoldExpired    = "hold_expired"    // up: probing is disabled and DownHold has passed
	// ReasonNoProvisional: down: INVITEs got no provisional response in time (ProvisionalMissed), with the
	// probes FailuresToDown misses in a row.
	ReasonNoProvisional = "no_provisional"
)

// StatusReason is the reason for a passive failure caused by a final response: "408", "503", "504".
func StatusReason(code int) string { return strconv.Itoa(code) }

// HealthConfig sets failure detection (SPEC §2.2). The zero value disables probing; DefaultHealthConfig has the lab
// defaults. Zero Timeout, FailuresToDown, SuccessesToUp and DownHold take their defaults.
type HealthConfig struct {
	Interval       time.Duration `yaml:"interval"`         // OPTIONS probe interval per peer (lab 1 s; 0 disables probing)
	Timeout        time.Duration `yaml:"timeout"`          // probe timeout (default 500 ms)
	FailuresToDown int           `yaml:"failures_to_down"` // consecutive failed probes before down (default 2)
	SuccessesToUp  int           `yaml:"successes_to_up"`  // consecutive successful probes before up again (default 1)
	// DownHold applies only when probing is disabled: a peer taken down by a failed transaction counts as down for
	// this long and is then tried again (default 10 s). With probing enabled only probes bring a peer back up.
	DownHold time.Duration `yaml:"down_hold"`
	// Panic turns panic routing on: a request whose every candidate is down goes to all of them as if they were up
	// (Candidates). Off by default: such a request is refused at once (Candidates returns nothing), and the
	// quasi-pool's restoration starts from that fast failure.
	Panic bool `yaml:"panic"`
	// LagExcuse: a probe or transaction timeout is not held against the peer when this process's own timers ran
	// more than LagExcuse late while it waited (WithLag: the process itself was starved of CPU, so the answer may
	// have come and waited unread). 0 takes the default, half the Timeout; negative turns it off. Without a
	// LagSource it does nothing.
	LagExcuse time.Duration `yaml:"lag_excuse"`
	// Jitter spreads the probes: each wait between two probes of a peer is Interval plus a uniform draw in
	// [-Jitter, +Jitter] (from the seed and the peer's name), so a node's probes of many peers, and many nodes'
	// probes of one peer, do not fall in step. 0 = none; it must be less than Interval.
	Jitter time.Duration `yaml:"jitter"`
}

// Health defaults.
const (
	DefaultProbeInterval  = time.Second
	DefaultProbeTimeout   = 500 * time.Millisecond
	DefaultFailuresToDown = 2
	DefaultSuccessesToUp  = 1
	DefaultDownHold       = 10 * time.Second
)

// DefaultHealthConfig returns the lab defaults: probe every 1 s, 500 ms timeout, down after 2 failed probes, up
// after 1 answered probe.
func DefaultHealthConfig() HealthConfig {
	return HealthConfig{Interval: DefaultProbeInterval}.withDefaults()
}

// Validate checks the configuration and names the bad field.
func (c HealthConfig) Validate() error {
	switch {
	case c.Interval < 0:
		return errors.New("pool: health config: interval: must not be negative")
	case c.Timeout < 0:
		return errors.New("pool: health config: timeout: must not be negative")
	case c.FailuresToDown < 0:
		return errors.New("pool: health config: failures_to_down: must not be negative")
	case c.SuccessesToUp < 0:
		return errors.New("pool: health config: successes_to_up: must not be negative")
	case c.DownHold < 0:
		return errors.New("pool: health config: down_hold: must not be negative")
	case c.Jitter < 0:
		return errors.New("pool: health config: jitter: must not be negative")
	case c.Jitter > 0 && c.Jitter >= c.Interval:
		return fmt.Errorf("pool: health config: jitter: %s must be less than the interval (%s)", c.Jitter, c.Interval)
	}
	return nil
}

func (c HealthConfig) withDefaults() HealthConfig {
	if c.Timeout == 0 {
		c.Timeout = DefaultProbeTimeout
	}
	if c.FailuresToDown == 0 {
		c.FailuresToDown = DefaultFailuresToDown
	}
	if c.SuccessesToUp == 0 {
		c.SuccessesToUp = DefaultSuccessesToUp
	}
	if c.DownHold == 0 {
		c.DownHold = DefaultDownHold
	}
	if c.LagExcuse == 0 {
		c.LagExcuse = c.Timeout / 2
	}
	return c
}

// PeerState is one peer as Snapshot reports it.
type PeerState struct {
	Name    string
	Addr    string
	Down    bool
	Since   time.Time // last state change; zero if the peer never changed state
	Reason  string    // reason of the last state change
	Watched bool      // probed (when probing is enabled)
	// Consecutive probe results that count towards FailuresToDown / SuccessesToUp.
	ConsecutiveFailures  int
	ConsecutiveSuccesses int
	Probes               uint64        // probes finished
	ProbeFailures        uint64        // of which failed
	LastProbeError       string        // "" when the last probe succeeded
	LastProbeRTT         time.Duration // round trip of the last answered probe (OPTIONS sent → final response)
	// ExcusedTimeouts counts transactions that got no answer while the peer answered something else after they
	// were sent (TransactionTimedOut): the silence was further downstream, the peer stayed up.
	ExcusedTimeouts uint64
	// LateAnswers counts transactions answered, but later than the probe timeout after they were sent
	// (TransactionSucceeded): proof of life, not of health, so they do not reset the probe failures.
	LateAnswers uint64
	// LagExcused counts probe and transaction timeouts not held against the peer because this process itself ran
	// late while it waited (HealthConfig.LagExcuse).
	LagExcused uint64
	// ProvisionalMisses counts INVITEs that got no provisional response in time (ProvisionalMissed).
	ProvisionalMisses uint64
}

// State returns "up" or "down".
func (s PeerState) State() string { return stateName(s.Down) }

// Health keeps per-peer health from OPTIONS probing and passive detection, keyed by the peer's Addr ("ip:port").
// The state machine follows Kamailio's dispatcher: FailuresToDown failed probes in a row take a peer down (a local
// timeout is a failure, never an answer), SuccessesToUp answered probes in a row bring it back; a failed
// transaction (transport error, no answer, 408/503/504) takes it down at once. Every change is logged once and
// recorded as a peer_state event. Unknown peers are up. All methods are safe for concurrent use.
type Health struct {
	cfg    HealthConfig
	prober Prober
	log    *slog.Logger
	rec    *obs.Recorder
	clock  Clock
	seed   uint64 // probe phases (WithSeed); 0: no phase, the first probe at once
	lag    LagSource

	mu      sync.Mutex
	peers   map[string]*peer
	panics  uint64    // requests routed in panic (Candidates), in all
	panicN  uint64    // of which since the last pool_panic event
	panicAt time.Time // last pool_panic event
	running bool
	runCtx  context.Context
	wg      sync.WaitGroup
}

type peer struct {
	name, addr string
	down       bool
	since      time.Time
	reason     string
	fails, oks int
	watched    bool
	probing    bool      // a probe loop runs for this peer
	holdUntil  time.Time // probing disabled: when a passive down state expires
	probes     uint64
	probeFails uint64
	lastErr    string
	heard      time.Time // last answer from the peer: a probe answered, a transaction answered (provisional or final)
	excused    uint64    // timeouts not held against the peer: it answered something after the request was sent
	late       uint64    // transactions answered later than the probe timeout (TransactionSucceeded)
	lagExcused uint64    // timeouts not held against the peer: this process ran late while it waited
	provMissed uint64    // INVITEs with no provisional response in time (ProvisionalMissed)
	jitter     *rand.Rand
	lastRTT    time.Duration
	rtts       []time.Duration // round trips of the answered probes since the last TakeRTTs
}

// maxRTTWindow bounds the round trips a peer keeps between two TakeRTTs (a caller that never takes them).
const maxRTTWindow = 1024

// HealthOption configures a Health.
type HealthOption func(*Health)

// WithLag sets the process's LagSource (HealthConfig.LagExcuse). A source with a Run(context.Context) method (a
// *LagMonitor) is run by Health.Run.
func WithLag(l LagSource) HealthOption { return func(h *Health) { h.lag = l } }

// WithLogger sets the logger for state changes (default slog.Default()).
func WithLogger(l *slog.Logger) HealthOption {
	return func(h *Health) {
		if l != nil {
			h.log = l
		}
	}
}

// WithEvents sets the recorder that receives a peer_state event per state change.
func WithEvents(r *obs.Recorder) HealthOption { return func(h *Health) { h.rec = r } }

// WithSeed sets the seed of the probe phases (the node's seed): each peer's first probe waits a random time,
// uniform in [0, Interval), drawn from the seed and the peer's name, so probing is not in phase with the lab's
// start, nor therefore with a fault at a fixed offset. 0 (or no WithSeed): no phase, a peer is probed as soon as
// it is watched.
func WithSeed(seed uint64) HealthOption { return func(h *Health) { h.seed = seed } }

// WithClock sets the clock that paces probes and stamps state changes (tests). Probe timeouts use the system
// clock, through the context given to the Prober.
func WithClock(c Clock) HealthOption {
	return func(h *Health) {
		if c != nil {
			h.clock = c
		}
	}
}

// NewHealth returns a Health. prober may be nil only when probing is disabled (Interval 0).
func NewHealth(cfg HealthConfig, prober Prober, opts ...HealthOption) (*Health, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval > 0 && prober == nil {
		return nil, errors.New("pool: health: prober: required when interval > 0")
	}
	h := &Health{
		cfg:    cfg.withDefaults(),
		prober: prober,
		log:    slog.Default(),
		clock:  systemClock{},
		peers:  map[string]*peer{},
	}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// Config returns the configuration in use, defaults applied.
func (h *Health) Config() HealthConfig { return h.cfg }

// Run probes every watched peer, each in its own loop: a probe when the peer is first watched (after its phase,
// WithSeed), then one every
// Interval (measured from the start of the previous probe; probes of one peer never overlap, so a Timeout longer
// than Interval stretches the period). A dead peer is thus down within Interval×FailuresToDown+Timeout. Peers
// watched while Run runs start at once. Run blocks until ctx is done, waits for the probe loops and returns nil;
// it is an error to call it while it runs. Without probing (Interval 0) it just waits for ctx.
func (h *Health) Run(ctx context.Context) error {
	h.mu.Lock()
	if h.running {
		h.mu.Unlock()
		return errors.New("pool: health: Run already running")
	}
	h.running, h.runCtx = true, ctx
	for _, p := range h.peers {
		h.startLocked(p)
	}
	if r, ok := h.lag.(interface{ Run(context.Context) }); ok {
		h.wg.Go(func() { r.Run(ctx) })
	}
	h.mu.Unlock()

	<-ctx.Done()

	h.mu.Lock()
	h.running, h.runCtx = false, nil // no loop starts after this, so Wait below cannot race an Add
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}

// Watch starts probing t (idempotent, keyed by t.Addr). Before Run the peer is queued; with probing disabled
// Watch only makes the peer known.
func (h *Health) Watch(t Target) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.peerLocked(t)
	p.watched = true
	h.startLocked(p)
}

// IsDown reports whether the peer at addr ("ip:port") is known to be down. Unknown peers are up.
func (h *Health) IsDown(addr string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.peers[addr]
	if p == nil {
		return false
	}
	h.expireLocked(p, h.clock.Now())
	return p.down
}

// TransactionFailed is passive detection: a transaction to t got a transport error, no answer, or 408/503/504.
// The peer goes down at once, whatever FailuresToDown says, and the consecutive successful probes are reset.
// reason is recorded with the event: ReasonTimeout, ReasonTransportError or StatusReason(code). With probing
// enabled the peer is also watched, so that probes bring it back; with probing disabled it is down for DownHold.
func (h *Health) TransactionFailed(t Target, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.transactionFailedLocked(t, reason)
}

func (h *Health) transactionFailedLocked(t Target, reason string) {
	p := h.peerLocked(t)
	p.oks = 0
	now := h.clock.Now()
	if h.cfg.Interval == 0 {
		p.holdUntil = now.Add(h.cfg.DownHold)
	}
	if !p.down {
		h.setLocked(p, true, reason, now)
	}
	if h.cfg.Interval > 0 && !p.watched {
		p.watched = true
		h.startLocked(p)
	}
}

// Now is the time on the Health's clock: what a caller of TransactionTimedOut stamps a request with when it
// sends it.
func (h *Health) Now() time.Time { return h.clock.Now() }

// Heard records that t answered something (a provisional response, for one), so it is alive now. Unknown peers
// stay unknown: only peers that are watched or have failed before are tracked.
func (h *Health) Heard(t Target) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := h.peers[t.Addr]; p != nil {
		p.heard = h.clock.Now()
	}
}

// TransactionTimedOut is passive detection of a transaction sent to t at sent (Now) that got no answer at all.
// If t answered anything after sent (a probe, another transaction, a provisional response) it is alive and the
// silence comes from further downstream: a stateful proxy forwards a non-INVITE request without answering it
// until its own next hop answers, so when a node dies every proxy on the path to it times out at about the same
// moment, and each would otherwise take its live next hop down (RFC 4321 §2 describes the same cascade). Such a
// timeout is counted (PeerState.ExcusedTimeouts) and changes nothing. Otherwise it is TransactionFailed(t,
// ReasonTimeout): the peer goes down at once. The result says which (Silence).
func (h *Health) TransactionTimedOut(t Target, sent time.Time) Silence {
	lagged := h.lagged(sent)
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.peers[t.Addr]
	if p != nil && p.heard.After(sent) {
		p.excused++
		h.log.Debug("no answer, but the peer answered since: not taken down", "peer", t.Name, "addr", t.Addr)
		return SilenceDownstream
	}
	if lagged {
		if p != nil {
			p.lagExcused++
		}
		h.log.Debug("no answer, but this process ran late meanwhile: not taken down", "peer", t.Name, "addr", t.Addr)
		return SilenceOwnLag
	}
	h.transactionFailedLocked(t, ReasonTimeout)
	return SilencePeer
}

// Silence is what TransactionTimedOut made of a transaction that got no answer.
type Silence int

const (
	// SilencePeer: the peer said nothing since the request was sent; it was taken down.
	SilencePeer Silence = iota
	// SilenceDownstream: the peer answered something since, so it is alive and the silence is further on (a
	// proxy waiting for its own next hop); the peer stays up.
	SilenceDownstream
	// SilenceOwnLag: this process itself ran late meanwhile (HealthConfig.LagExcuse); the peer stays up.
	SilenceOwnLag
)

// ProvisionalMissed is fast failure detection: an INVITE sent to t at sent (Now) got no provisional response within
// the forwarder's short timer, so it went to another member. It counts as a missed probe: the consecutive failures
// grow, and the peer goes down (ReasonNoProvisional) once they reach FailuresToDown, whether probes or INVITEs
// missed. A member slow once keeps its users, since an answered probe or a prompt answer resets the count; with
// probing disabled, the peer is down for DownHold from then on. As with probes, a miss while this process itself
// ran late (LagExcuse) counts neither way.
func (h *Health) ProvisionalMissed(t Target, sent time.Time) {
	lagged := h.lagged(sent)
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.peerLocked(t)
	if lagged {
		p.lagExcused++
		h.log.Debug("no provisional response, but this process ran late meanwhile: not counted", "peer", t.Name,
			"addr", t.Addr)
		return
	}
	p.provMissed++
	p.oks = 0
	p.fails++
	if !p.down && p.fails >= h.cfg.FailuresToDown {
		h.transactionFailedLocked(t, ReasonNoProvisional)
		return
	}
	if h.cfg.Interval > 0 && !p.watched {
		p.watched = true
		h.startLocked(p)
	}
}

// lagged reports whether this process ran more than LagExcuse late since t (false without a LagSource or with
// the excuse off).
func (h *Health) lagged(t time.Time) bool {
	return h.lag != nil && h.cfg.LagExcuse > 0 && h.lag.MaxLagSince(t) > h.cfg.LagExcuse
}

// TransactionSucceeded is passive detection: a transaction to t got an answer that is not a failure (any final
// response other than 408/503/504), the peer's first response to it (provisional or final) after answeredIn.
// While the peer is up a prompt answer resets its consecutive probe failures: the peer demonstrably answers. An
// answer that took longer than the probe timeout does not (it is counted, PeerState.LateAnswers): a probe answered
// that late is a failed probe, and a gray peer, alive but starved, answers every transaction late; letting those
// answers reset the count kept such a peer up long after its probes began to fail (scenarios/gray-pcscf.yaml).
// It does not bring a down peer back up when probing is enabled: probes set the down state and only probes
// (SuccessesToUp of them) clear it, so a late answer to a transaction sent before the failure cannot make a dead
// peer flap. With probing disabled nothing else could bring the peer back early, so there an answer does
// (ReasonTransactionOK). Unknown peers stay unknown.
func (h *Health) TransactionSucceeded(t Target, answeredIn time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.peers[t.Addr]
	if p == nil {
		return
	}
	now := h.clock.Now()
	p.heard = now
	h.expireLocked(p, now)
	switch {
	case !p.down && h.cfg.Interval > 0 && answeredIn > h.cfg.Timeout:
		p.late++
	case !p.down:
		p.fails = 0
	case h.cfg.Interval == 0:
		h.setLocked(p, false, ReasonTransactionOK, now)
	}
}

// Snapshot returns every known peer, sorted by Addr.
func (h *Health) Snapshot() []PeerState {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	out := make([]PeerState, 0, len(h.peers))
	for _, p := range h.peers {
		h.expireLocked(p, now)
		out = append(out, PeerState{
			Name: p.name, Addr: p.addr, Down: p.down, Since: p.since, Reason: p.reason, Watched: p.watched,
			ConsecutiveFailures: p.fails, ConsecutiveSuccesses: p.oks,
			Probes: p.probes, ProbeFailures: p.probeFails, LastProbeError: p.lastErr, ExcusedTimeouts: p.excused,
			LateAnswers: p.late, LagExcused: p.lagExcused, ProvisionalMisses: p.provMissed,
			LastProbeRTT: p.lastRTT,
		})
	}
	slices.SortFunc(out, func(a, b PeerState) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

// Candidates returns where to try a request next: targets in RFC 2782 order (Order) without the peers known to be
// down and without those already tried (tried is keyed by Addr; nil means none). Since the order is by priority,
// a priority whose targets are all down or tried is skipped and the next one comes first. Weighted selection runs
// over the remaining targets only, so a dead member's share goes to the survivors in proportion to their weights
// (Kamailio dispatcher alg 11). It runs per request; rnd as for Order.
//
// Panic routing: when every target is down (those already tried included), Candidates returns the untried ones,
// in order, as if they were up (Envoy's panic threshold, at zero healthy members). A set with a member up is never
// routed in panic, even when that member was tried already: a request whose live members all failed it is not
// sent to the dead ones (the S-CSCF's request to a user behind a dead P-CSCF would otherwise wait for it). A node cannot tell a pool that died from a pool it cannot
// hear in time: on a saturated machine the probes of live members miss their timeout, and refusing every request
// once all are marked down turned an overload into a collapse (docs/performance.md, "Overload"). A request sent
// to a dead pool fails after the forwarder's no-answer time instead of at once; one sent to a slow one is served.
// Such requests are counted (PanicRequests) and recorded, at most once a second, as a pool_panic event. It is on
// only with HealthConfig.Panic: by default the result is empty, and the caller answers 503 at once. On by default
// it broke the quasi-pool's takeover: a user's own S-CSCF (a set of one) that died was tried again until the
// no-answer time instead of failing at once, which is what starts the restoration (the shortened scscf-kill and
// site-loss scenarios' p95 interruption went from under 3 s to 4.5 s in CI).
func (h *Health) Candidates(targets []Target, rnd *rand.Rand, tried map[string]bool) []Target {
	out := make([]Target, 0, len(targets))
	h.mu.Lock()
	var now time.Time
	if h.cfg.Interval == 0 {
		now = h.clock.Now() // only hold expiry needs the time
	}
	anyUp := false // of all the targets, those tried included
	for _, t := range targets {
		down := false
		if p := h.peers[t.Addr]; p != nil {
			if h.cfg.Interval == 0 {
				h.expireLocked(p, now)
			}
			down = p.down
		}
		anyUp = anyUp || !down
		if tried[t.Addr] || down {
			continue
		}
		out = append(out, t)
	}
	if !anyUp && h.cfg.Panic {
		for _, t := range targets {
			if !tried[t.Addr] {
				out = append(out, t)
			}
		}
		if len(out) > 0 {
			h.panicLocked(out)
		}
	}
	h.mu.Unlock()
	return orderInPlace(out, rnd)
}

// panicLocked counts a request routed in panic to targets and records a pool_panic event at most once a second,
// with the requests since the last one. h.mu is held.
func (h *Health) panicLocked(targets []Target) {
	h.panics++
	h.panicN++
	now := h.clock.Now()
	if !h.panicAt.IsZero() && now.Sub(h.panicAt) < time.Second {
		return
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	slices.Sort(names)
	h.log.Warn("every member down: trying them all (panic routing)", "members", names, "requests", h.panicN)
	h.rec.Emit(obs.PoolPanic{Members: names, Requests: h.panicN})
	h.panicAt, h.panicN = now, 0
}

// PanicRequests returns how many requests Candidates routed in panic (every candidate down) so far.
func (h *Health) PanicRequests() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.panics
}

// peerLocked returns the peer for t, creating it (up) if needed. h.mu is held.
func (h *Health) peerLocked(t Target) *peer {
	p := h.peers[t.Addr]
	if p == nil {
		p = &peer{name: t.Name, addr: t.Addr}
		h.peers[t.Addr] = p
	} else if p.name == "" {
		p.name = t.Name
	}
	return p
}

// startLocked starts p's probe loop when probing is enabled, Run runs, p is watched and has no loop yet.
func (h *Health) startLocked(p *peer) {
	if h.cfg.Interval <= 0 || !h.running || !p.watched || p.probing {
		return
	}
	p.probing = true
	h.wg.Add(1)
	go h.probeLoop(h.runCtx, p, h.phase(p))
}

// phase is the delay of a peer's first probe: uniform in [0, Interval), from the seed and the peer's name (its
// address when the name is not known; addresses may differ between runs, names do not).
func (h *Health) phase(p *peer) time.Duration {
	if h.seed == 0 {
		return 0
	}
	key := p.name
	if key == "" {
		key = p.addr
	}
	return ProbePhase(h.seed, key, h.cfg.Interval)
}

// ProbePhase returns the phase of the probing of the named peer by a node with the given seed: uniform in
// [0, interval), a pure function of its arguments.
func ProbePhase(seed uint64, peer string, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	f := fnv.New64a()
	f.Write([]byte(strings.TrimSuffix(strings.ToLower(peer), ".")))
	k := f.Sum64()
	r := rand.New(rand.NewPCG(seed^k, k^0x9e3779b97f4a7c15))
	return time.Duration(r.Int64N(int64(interval)))
}

// jitter draws the next spread of p's probe period: uniform in [-Jitter, +Jitter] (HealthConfig.Jitter), from the
// seed and the peer's name as the phase is. Only p's probe loop calls it.
func (h *Health) jitter(p *peer) time.Duration {
	if h.cfg.Jitter <= 0 {
		return 0
	}
	if p.jitter == nil {
		h.mu.Lock()
		key := p.name
		if key == "" {
			key = p.addr
		}
		h.mu.Unlock()
		f := fnv.New64a()
		f.Write([]byte("jitter\x00" + strings.TrimSuffix(strings.ToLower(key), ".")))
		k := f.Sum64()
		p.jitter = rand.New(rand.NewPCG(h.seed^k, k^0x9e3779b97f4a7c15))
	}
	return time.Duration(p.jitter.Int64N(int64(2*h.cfg.Jitter)+1)) - h.cfg.Jitter
}

// expireLocked ends a passive down state whose DownHold has passed (probing disabled only).
func (h *Health) expireLocked(p *peer, now time.Time) {
	if h.cfg.Interval == 0 && p.down && !now.Before(p.holdUntil) {
		h.setLocked(p, false, ReasonHoldExpired, now)
	}
}

func (h *Health) probeLoop(ctx context.Context, p *peer, phase time.Duration) {
	defer h.wg.Done()
	defer func() {
		h.mu.Lock()
		p.probing = false
		h.mu.Unlock()
	}()
	if phase > 0 {
		timer := h.clock.NewTimer(phase)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
	for {
		h.mu.Lock()
		t := Target{Name: p.name, Addr: p.addr} // the name may have been learnt since
		h.mu.Unlock()
		start := h.clock.Now()
		pctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
		err := h.prober.Probe(pctx, t)
		rtt := h.clock.Now().Sub(start)
		cancel()
		if ctx.Err() != nil {
			return // shutting down: the result says nothing about the peer
		}
		h.probeResult(p, err, rtt, start)

		wait := h.cfg.Interval + h.jitter(p) - h.clock.Now().Sub(start)
		if wait <= 0 {
			continue
		}
		timer := h.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}

// probeResult counts a probe sent at start. A probe that timed out while this process itself ran late (lagged)
// counts neither way.
func (h *Health) probeResult(p *peer, err error, rtt time.Duration, start time.Time) {
	lagged := err != nil && probeReason(err) == ReasonProbeTimeout && h.lagged(start)
	h.mu.Lock()
	defer h.mu.Unlock()
	p.probes++
	if err == nil {
		p.lastRTT = rtt
		if len(p.rtts) < maxRTTWindow {
			p.rtts = append(p.rtts, rtt)
		}
		p.heard = h.clock.Now()
		p.lastErr = ""
		p.fails = 0
		p.oks++
		if p.down && p.oks >= h.cfg.SuccessesToUp {
			h.setLocked(p, false, ReasonProbeOK, h.clock.Now())
		}
		return
	}
	if lagged {
		p.lagExcused++
		h.log.Debug("probe timed out, but this process ran late meanwhile: not counted", "peer", p.name, "addr", p.addr)
		return
	}
	p.probeFails++
	p.lastErr = err.Error()
	p.oks = 0
	p.fails++
	h.log.Debug("probe failed", "peer", p.name, "addr", p.addr, "error", err)
	if !p.down && p.fails >= h.cfg.FailuresToDown {
		h.setLocked(p, true, probeReason(err), h.clock.Now())
	}
}

// RTTs is one peer's answered probes since the last TakeRTTs: the round trip of each, in the order they came.
type RTTs struct {
	Name, Addr string
	RTTs       []time.Duration
}

// TakeRTTs returns the round trips of the probes each peer answered since the last call, and starts new windows.
// Peers with no answered probe in the window are left out; the order is by address.
func (h *Health) TakeRTTs() []RTTs {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []RTTs
	for _, p := range h.peers {
		if len(p.rtts) == 0 {
			continue
		}
		out = append(out, RTTs{Name: p.name, Addr: p.addr, RTTs: p.rtts})
		p.rtts = nil
	}
	slices.SortFunc(out, func(a, b RTTs) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}

// probeReason maps a probe error to the event reason.
func probeReason(err error) string {
	var se *StatusError
	switch {
	case errors.Is(err, ErrProbeTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, sip.ErrTransactionTimeout):
		return ReasonProbeTimeout
	case errors.Is(err, ErrTransport), errors.Is(err, sip.ErrTransactionTransport):
		return ReasonTransportError
	case errors.As(err, &se):
		return StatusReason(se.Code)
	}
	return ReasonProbeError
}

// setLocked changes p's state, logs it once and records the event. h.mu is held, so events of one Health come out
// in the order the changes happened.
func (h *Health) setLocked(p *peer, down bool, reason string, now time.Time) {
	p.down, p.since, p.reason = down, now, reason
	if !down {
		p.fails = 0
	}
	state := stateName(down)
	lvl := slog.LevelInfo
	if down {
		lvl = slog.LevelWarn
	}
	h.log.Log(context.Background(), lvl, "peer "+state, "peer", p.name, "addr", p.addr, "state", state, "reason", reason)
	h.rec.Emit(obs.PeerState{Peer: p.name, Addr: p.addr, State: state, Reason: reason})
}

func stateName(down bool) string {
	if down {
		return "down"
	}
	return "up"
}
