// Package overload decides when a node sheds load it cannot serve, before its queues grow (issue 13): a SIP node
// answers new requests 503 with Retry-After, the HSS answers DIAMETER_TOO_BUSY (3004).
//
// # The signal: scheduling lag
//
// A Go node does not queue requests in a place it can measure: sipgo and go-diameter start a goroutine per
// message, so when the CPU cannot keep up every message waits its turn in the Go scheduler's run queues, and what
// grows is the time between a message's arrival and its handling. The controller measures that delay directly:
// a probe goroutine, every Interval, yields its processor and records how long it waited to run again (the lag):
// a yielded goroutine goes to the back of the global run queue, where goroutines readied by the network poller
// (new messages) wait when every processor is busy. An idle or busy-but-coping node gets it back within
// microseconds; a saturated one after about the queueing delay every new message sees. The lag is smoothed (EWMA over about eight probes).
//
// # The rule: AIMD on the share of new requests admitted
//
// While the smoothed lag is above Target the share of new requests rejected grows by Step per probe (up to
// MaxShed); while it is below Target/2 it shrinks by Step. Rejection is random with that share, so the load the
// node admits settles where its lag sits near Target: goodput stays near capacity instead of collapsing. A hard
// bound on requests in progress (MaxInFlight) rejects everything beyond it whatever the lag (a node whose
// downstream stopped answering). Requests that finish work already admitted (in-dialog requests, ACK, CANCEL) and
// health probes (OPTIONS) are never shed: the caller decides what it offers to Admit.
//
// # A configured capacity: MaxRate
//
// The lag rule keeps a node near whatever its machine can do, which is not a stable number on a shared machine.
// MaxRate gives a node a configured capacity instead: a token bucket of MaxRate new requests per second (holding
// one second's worth) that AdmitAccess applies, on top of the rest, to new requests from outside the trust domain
// (phones, at the BAC: refused there before the core spends anything on them). Requests between the lab's own
// nodes (Admit) are not rate-limited: a 503 from inside the chain would reach the phone as a 500 (RFC 3261
// §16.7) and waste what the earlier hops spent.
//
// # The edge's signal: how long the core takes to answer
//
// Scheduling lag sees one process's queue. A lab on one machine is ten processes sharing its cores: when the chain
// saturates, each process gets its turn on a core and its own lag stays moderate while messages wait in socket
// buffers and for the CPU; probes time out, members are marked down and the whole lab collapses (issue 13's
// bench before this rule: 85 % of calls failed at 500 calls/s). The access node sees what the phones see:
// ObserveChain feeds it the time from forwarding a phone's new request to the P-CSCF's first answer (the 100
// Trying the P-CSCF sends at once to an INVITE, the final answer to a REGISTER), measured on requests answered
// by the first member tried (a failover's wait says nothing about load). The 100 Trying leaves out what lies
// behind the P-CSCF, so a takeover further down (the users of a dead S-CSCF or of a callee's dead P-CSCF) does
// not look like load. Every ChainWindow the median of the window's samples is compared with ChainTarget. Above it
// the BAC caps the rate of phones' new requests it admits at target/median of the rate it was admitting (smoothed
// over the last windows; between 50 and 85 % of it), and cuts again only after ChainHold, the time the core needs to show the effect; below half the
// target the cap grows by 5 % per window and is lifted once it is well above what phones offer. This is AIMD on
// the admitted rate, as TCP does on its window: the cap settles near what the core can serve, so the goodput stays
// near capacity, where a refused share driven by a lagging latency overshot to 95 % and back. Requests between
// the lab's nodes are not held to it.
package overload

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config tunes a Controller; zero fields take the defaults.
type Config struct {
	// Target is the smoothed scheduling lag above which the node sheds (default 150 ms: well under T1, 500 ms, so a node sheds before its clients retransmit, and above what a busy 2-core lab machine shows during a takeover burst).
	Target time.Duration `yaml:"target,omitempty"`
	// Interval is the probe period (default 10 ms).
	Interval time.Duration `yaml:"interval,omitempty"`
	// Step is how much the shed share moves per probe (default 0.02: from 0 to 50 % in a quarter of a second).
	Step float64 `yaml:"step,omitempty"`
	// MaxShed caps the share of new requests shed on lag alone (default 0.95).
	MaxShed float64 `yaml:"max_shed,omitempty"`
	// MaxInFlight rejects every new request beyond this many in progress (default 10000; negative: no bound).
	MaxInFlight int `yaml:"max_in_flight,omitempty"`
	// RetryAfter is what a rejected request is told to wait (default 1 s); the answer adds up to the same again,
	// at random, so that rejected clients do not come back in step.
	RetryAfter time.Duration `yaml:"retry_after,omitempty"`
	// Disabled admits everything (the lag is still measured).
	Disabled bool `yaml:"off,omitempty"`
	// MaxRate is the node's configured capacity for new requests from outside the trust domain (AdmitAccess), per
	// second: a token bucket holding one second's worth (at least one). 0: no rate limit.
	MaxRate float64 `yaml:"max_rate,omitempty"`
	// ChainTarget is the median time to the core's first answer (ObserveChain) above which AdmitAccess caps
	// phones' new requests (0 or negative: not watched, the default). 100 ms is what the benches used (a P-CSCF
	// that takes that long to say 100 Trying is queueing). It is off by default because on slower set-ups the
	// answer is that slow without overload: in the full CI run of 2026-12-01, with it on by default, the compose
	// runs (containers) and wan-latency (a 20 ms site link) crossed 100 ms during a takeover and the BAC capped
	// the phones' calls (the wan-latency spec printed its overload events). Only a node that calls ObserveChain
	// (the BAC) is affected.
	ChainTarget time.Duration `yaml:"chain_target,omitempty"`
	// ChainWindow is how often the median is taken (default 200 ms).
	ChainWindow time.Duration `yaml:"chain_window,omitempty"`
	// ChainHold is the least time between two cuts of the cap (default 1 s).
	ChainHold time.Duration `yaml:"chain_hold,omitempty"`
}

// The chain's AIMD on the admitted rate of phones' new requests.
const (
	minChainSamples = 3    // the fewest answers a window needs to move the cap (fewer: it stays)
	chainCut        = 0.85 // a cut sets the cap to at most this share of the admitted rate (at least half of it)
	chainGrow       = 0.05 // a fast window grows the cap by this share of itself (at least 1 request/s)
	chainFloor      = 5.0  // the cap never goes below this many requests per second
	chainBurst      = 0.1  // the cap's bucket holds this many seconds' worth (at least one request)
)

// maxChainSamples bounds a window's samples (the rest of the window is not kept).
const maxChainSamples = 4096

func (c Config) withDefaults() Config {
	if c.Target <= 0 {
		c.Target = 150 * time.Millisecond
	}
	if c.Interval <= 0 {
		c.Interval = 10 * time.Millisecond
	}
	if c.Step <= 0 {
		c.Step = 0.02
	}
	if c.MaxShed <= 0 || c.MaxShed > 1 {
		c.MaxShed = 0.95
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 10000
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = time.Second
	}
	if c.ChainTarget == 0 {
		c.ChainTarget = -1 // off unless configured: see ChainTarget
	}
	if c.ChainWindow <= 0 {
		c.ChainWindow = 200 * time.Millisecond
	}
	if c.ChainHold <= 0 {
		c.ChainHold = time.Second
	}
	return c
}

// Controller admits or sheds new requests. Its methods are safe for concurrent use; a nil *Controller admits
// everything.
type Controller struct {
	cfg Config

	inFlight atomic.Int64
	shedBits atomic.Uint64 // float64 bits of the shed share
	lagNs    atomic.Int64  // smoothed lag

	admitted     atomic.Uint64
	shed         atomic.Uint64
	shedInFlight atomic.Uint64 // of shed: beyond MaxInFlight
	shedRate     atomic.Uint64 // of shed: beyond MaxRate
	shedLag      atomic.Uint64 // of shed: on lag
	shedChain    atomic.Uint64 // of shed: beyond the chain's cap (AdmitAccess)
	inShed       atomic.Bool   // the last probe was over Target

	chainLimit atomic.Uint64 // float64 bits of the cap on phones' new requests per second (0: none)
	chainNs    atomic.Int64  // the median of the last window with samples

	mu         sync.Mutex
	rng        *rand.Rand
	rateBucket bucket // the MaxRate token bucket (under mu)
	// the chain's window (under mu): answer times, phones' new requests admitted, the smoothed admitted rate,
	// when the next cut may come, and the cap's token bucket
	chain        []time.Duration
	chainSince   time.Time
	chainAdmit   int
	chainRate    float64
	chainRateSet bool
	chainHold    time.Time
	capBucket    bucket

	stop chan struct{}
	done chan struct{}
}

// New starts a controller and its probe; Close stops the probe. seed seeds the random shedding (0: 1).
func New(cfg Config, seed uint64) *Controller {
	if seed == 0 {
		seed = 1
	}
	c := &Controller{cfg: cfg.withDefaults(), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		stop: make(chan struct{}), done: make(chan struct{})}
	c.rateBucket.tokens = c.burst()
	go c.probe()
	return c
}

// Close stops the probe.
func (c *Controller) Close() {
	if c == nil {
		return
	}
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *Controller) probe() {
	defer close(c.done)
	t := time.NewTimer(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			// A goroutine woken by a timer runs next on its P, ahead of everything queued, so the wake-up time
			// says little. Yielding puts the probe at the back of the global run queue, where goroutines readied
			// by the network poller (new messages) wait when every P is busy: the time the yield takes is their
			// wait.
			start := time.Now()
			runtime.Gosched()
			c.Observe(time.Since(start))
			c.EvalChain(time.Now())
			t.Reset(c.cfg.Interval)
		}
	}
}

// Observe feeds one lag sample (the probe calls it; tests call it directly) and moves the shed share.
func (c *Controller) Observe(lag time.Duration) {
	lag = max(lag, 0)
	old := c.lagNs.Load()
	smoothed := old + (int64(lag)-old)/8
	c.lagNs.Store(smoothed)
	share := c.ShedShare()
	switch {
	case time.Duration(smoothed) > c.cfg.Target:
		share = min(share+c.cfg.Step, c.cfg.MaxShed)
		c.inShed.Store(true)
	case time.Duration(smoothed) < c.cfg.Target/2:
		share = max(share-c.cfg.Step, 0)
		if share == 0 {
			c.inShed.Store(false)
		}
	}
	c.shedBits.Store(floatBits(share))
}

// ObserveChain feeds one answer time of the core behind this node: from forwarding a phone's new request to the
// first answer. The access node calls it; the probe evaluates the samples every ChainWindow.
func (c *Controller) ObserveChain(d time.Duration) {
	if c == nil || c.cfg.ChainTarget < 0 {
		return
	}
	c.mu.Lock()
	if len(c.chain) < maxChainSamples {
		c.chain = append(c.chain, max(d, 0))
	}
	c.mu.Unlock()
}

// EvalChain ends the chain's window when it is ChainWindow old at now and moves the cap by its median (the probe
// calls it; tests call it with their own clock).
func (c *Controller) EvalChain(now time.Time) {
	if c == nil || c.cfg.ChainTarget < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.chainSince.IsZero() {
		c.chainSince = now
	}
	dt := now.Sub(c.chainSince)
	if dt < c.cfg.ChainWindow {
		return
	}
	w := c.chain
	rate := float64(c.chainAdmit) / dt.Seconds()
	c.chain, c.chainSince, c.chainAdmit = nil, now, 0
	if c.chainRateSet {
		c.chainRate = (c.chainRate + rate) / 2
	} else {
		c.chainRate, c.chainRateSet = rate, true
	}
	limit := bitsFloat(c.chainLimit.Load())
	if len(w) < minChainSamples {
		return // too few answers to tell (an idle edge, or a core that answers nothing): the cap stays
	}
	slices.Sort(w)
	med := w[len(w)/2]
	c.chainNs.Store(int64(med))
	slow, fast := med > c.cfg.ChainTarget, med < c.cfg.ChainTarget/2
	switch {
	case slow && !now.Before(c.chainHold):
		base := c.chainRate
		if limit > 0 {
			base = min(base, limit)
		}
		// The slower the core, the deeper the cut: target/median of the rate, between half and chainCut.
		cut := min(max(float64(c.cfg.ChainTarget)/float64(med), 0.5), chainCut)
		limit = max(base*cut, chainFloor)
		c.chainHold = now.Add(c.cfg.ChainHold)
		if c.capBucket.refilled.IsZero() || c.capBucket.tokens > limit*chainBurst {
			c.capBucket = bucket{tokens: max(limit*chainBurst, 1), refilled: now}
		}
	case fast && limit > 0:
		limit += max(limit*chainGrow, 1)
		if limit > 2*c.chainRate+10 {
			limit = 0 // well above what the phones offer: nothing is held back any more
		}
	}
	c.chainLimit.Store(floatBits(limit))
}

// ChainLimit is the cap on phones' new requests per second the chain's answer time put in place (0: none).
func (c *Controller) ChainLimit() float64 {
	if c == nil {
		return 0
	}
	return bitsFloat(c.chainLimit.Load())
}

// bucket is a token bucket (its owner holds the lock).
type bucket struct {
	tokens   float64
	refilled time.Time
}

// take refills the bucket at rate per second up to burst and takes a token; false when it is empty.
func (k *bucket) take(rate, burst float64, now time.Time) bool {
	if !k.refilled.IsZero() && now.After(k.refilled) {
		k.tokens = min(k.tokens+now.Sub(k.refilled).Seconds()*rate, burst)
	}
	if k.refilled.IsZero() || now.After(k.refilled) {
		k.refilled = now
	}
	if k.tokens < 1 {
		return false
	}
	k.tokens--
	return true
}

// Admit decides on one new request. When it returns true the caller must call Done once the request is finished;
// when false it must answer with a rejection that carries retryAfter.
func (c *Controller) Admit() (ok bool, retryAfter time.Duration) {
	return c.admit(false, time.Time{})
}

// AdmitAccess is Admit for a new request from outside the trust domain (a phone): it is also subject to MaxRate.
func (c *Controller) AdmitAccess() (ok bool, retryAfter time.Duration) {
	return c.AdmitAccessAt(time.Now())
}

// AdmitAccessAt is AdmitAccess at a given instant (the token bucket's clock; tests drive it).
func (c *Controller) AdmitAccessAt(now time.Time) (ok bool, retryAfter time.Duration) {
	return c.admit(true, now)
}

func (c *Controller) admit(access bool, now time.Time) (ok bool, retryAfter time.Duration) {
	if c == nil {
		return true, 0
	}
	n := c.inFlight.Add(1)
	if c.cfg.Disabled {
		c.admitted.Add(1)
		return true, 0
	}
	var reason *atomic.Uint64
	if c.cfg.MaxInFlight > 0 && n > int64(c.cfg.MaxInFlight) {
		reason = &c.shedInFlight
	}
	if reason == nil {
		if share := c.ShedShare(); share > 0 {
			c.mu.Lock()
			if c.rng.Float64() < share {
				reason = &c.shedLag
			}
			c.mu.Unlock()
		}
	}
	if reason == nil && access && c.cfg.ChainTarget >= 0 {
		c.mu.Lock()
		if limit := c.ChainLimit(); limit > 0 && !c.capBucket.take(limit, max(limit*chainBurst, 1), now) {
			reason = &c.shedChain
		} else {
			c.chainAdmit++ // counted before MaxRate may still refuse it: the rate the core is offered by the edge
		}
		c.mu.Unlock()
	}
	if reason == nil && access && c.cfg.MaxRate > 0 && !c.take(now) {
		reason = &c.shedRate
	}
	if reason != nil {
		c.inFlight.Add(-1)
		reason.Add(1)
		c.shed.Add(1)
		c.mu.Lock()
		jitter := time.Duration(c.rng.Int64N(int64(c.cfg.RetryAfter) + 1))
		c.mu.Unlock()
		return false, c.cfg.RetryAfter + jitter
	}
	c.admitted.Add(1)
	return true, 0
}

// burst is what the MaxRate bucket holds: one second's worth, at least one request.
func (c *Controller) burst() float64 { return max(c.cfg.MaxRate, 1) }

// take takes a token from the MaxRate bucket, refilled up to now; false when it is empty.
func (c *Controller) take(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rateBucket.take(c.cfg.MaxRate, c.burst(), now)
}

// Done ends a request Admit admitted.
func (c *Controller) Done() {
	if c != nil {
		c.inFlight.Add(-1)
	}
}

// ShedShare is the share of new requests shed now on lag (0..MaxShed).
func (c *Controller) ShedShare() float64 {
	if c == nil {
		return 0
	}
	return bitsFloat(c.shedBits.Load())
}

// Stats is a snapshot of the controller.
type Stats struct {
	Admitted uint64 // new requests admitted so far
	Shed     uint64 // new requests rejected so far (for any reason)
	// ShedInFlight, ShedRate and ShedLag are the parts of Shed rejected beyond MaxInFlight, beyond MaxRate and
	// on lag (each counted apart, so a snapshot taken while requests are shed may not add up exactly); ShedChain
	// the part shed on the chain's answer time.
	ShedInFlight uint64
	ShedRate     uint64
	ShedLag      uint64
	ShedChain    uint64        // phones' new requests shed beyond the chain's cap
	InFlight     int64         // admitted and not done
	Lag          time.Duration // smoothed scheduling lag
	ShedShare    float64       // share of new requests shed now
	Chain        time.Duration // median of the core's answer times in the last window with samples (ObserveChain)
	ChainLimit   float64       // cap on phones' new requests per second (0: none)
}

// Stats returns the counters and the current state.
func (c *Controller) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	return Stats{Admitted: c.admitted.Load(), Shed: c.shed.Load(), ShedInFlight: c.shedInFlight.Load(),
		ShedRate: c.shedRate.Load(), ShedLag: c.shedLag.Load(), ShedChain: c.shedChain.Load(), InFlight: c.inFlight.Load(),
		Lag: time.Duration(c.lagNs.Load()), ShedShare: c.ShedShare(), Chain: time.Duration(c.chainNs.Load()),
		ChainLimit: c.ChainLimit()}
}

// RetryAfterSeconds renders a Retry-After delay as whole seconds, at least 1 (RFC 3261 §20.33, RFC 6733 has no
// such AVP: Diameter clients back off by their own rule).
func RetryAfterSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

func floatBits(f float64) uint64 { return math.Float64bits(f) }
func bitsFloat(b uint64) float64 { return math.Float64frombits(b) }
