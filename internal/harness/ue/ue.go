// Package ue simulates many IMS phones (SIP user agents over UDP) in one process: they register with SIP
// Digest through the outbound proxy (the BAC), refresh their registrations, answer calls, and place calls at a
// configured rate. All phones share one sipgo stack and one UDP socket; a phone is told apart by the user part
// of its Contact (<sip:user0001@127.0.0.1:5100>), which the BAC puts back in the Request-URI of the requests it
// delivers. Every registration and call is written as one JSON line (Record) for the KPIs of SPEC §6.
package ue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/udpbuf"
)

// UE is a running set of phones.
type UE struct {
	cfg     Config
	log     *slog.Logger
	events  *obs.Recorder
	records *recordWriter
	conn    net.PacketConn
	seed    int64

	phones  []*Phone
	probers []*Phone // reachability probers (Config.Reachability), after the phones' range
	byUser  map[string]*Phone

	reachMu   sync.Mutex
	reachSeen map[string]bool // users probed already

	rngMu sync.Mutex
	rng   *rand.Rand

	callRate atomic.Uint64 // float64 bits: the rate generateCalls places calls at now (Config.CallRate, SetCallRate)

	ready chan struct{}
	done  chan struct{}

	// Set by Run before ready; read-only afterwards.
	ua      *sipgo.UserAgent
	cli     *sipgo.Client
	laddr   sip.Addr // the socket, for req.Laddr
	advIP   string   // Contact and Via
	advPort int
	proxy   string // ip:port every request goes to
	runCtx  context.Context
	running atomic.Bool

	dmu     sync.Mutex
	dialogs map[string]*dialog // call-id "|" local tag

	// Background work (refresh timers, generated calls): not started once stopping is set.
	bgMu     sync.Mutex
	stopping bool
	bg       sync.WaitGroup
	// lastWord ends StopGrace after Run starts stopping: what the calls in progress still send or wait for then
	// (a BYE, a CANCEL, the final answer after a CANCEL) is given up, so that an overloaded network, answering
	// none of it, does not hold the phones' stop for a transaction timeout (32 s) on top of the de-registrations.
	lastWord    context.Context
	endLastWord context.CancelFunc

	stats stats
	gen   generator // the call generator's run time (Config.CallRate)
	clock cpuClock  // set when Run starts: the process's CPU share
	// end is the summary's time base once Run has returned (the CPU share and rates stop there).
	endMu  sync.Mutex
	endCPU time.Duration
	endAt  time.Duration
}

type stats struct {
	regOK, regFailed         atomic.Int64 // registration procedures
	callsOK, callsFailed     atomic.Int64 // outgoing (mo)
	mtOK, mtFailed           atomic.Int64 // incoming (mt)
	callsSkipped             atomic.Int64 // a generated call found no free registered caller or callee
	initialOK, initialFailed atomic.Int64 // phones after the initial round
	deregistered             atomic.Int64
	probesOK, probesFailed   atomic.Int64 // reachability probe calls (either direction)
	callsHeld                atomic.Int64 // calls not sent: the phone was backing off (503 Retry-After)
	retryAfters              atomic.Int64 // 503 answers with Retry-After the phones honoured
	callsOffered             atomic.Int64 // arrivals of the call generator that came due (Config.CallRate)
	callsPlaced              atomic.Int64 // … that were placed (the rest are skipped)
}

// Summary counts what happened so far.
type Summary struct {
	Phones         int   `json:"phones"`
	Registered     int   `json:"registered"`      // phones registered now
	InitialOK      int64 `json:"initial_ok"`      // phones registered in the initial round
	InitialFailed  int64 `json:"initial_failed"`  // phones whose initial registration failed
	RegisterOK     int64 `json:"register_ok"`     // registration procedures that succeeded
	RegisterFailed int64 `json:"register_failed"` // … and that failed
	CallsOK        int64 `json:"calls_ok"`        // outgoing calls answered
	CallsFailed    int64 `json:"calls_failed"`    // outgoing calls that failed
	CallsSkipped   int64 `json:"calls_skipped"`   // generated calls with no free registered caller/callee
	CallsHeld      int64 `json:"calls_held"`      // calls not sent because of a Retry-After (counted failed)
	RetryAfters    int64 `json:"retry_afters"`    // 503 answers with Retry-After honoured
	MTOK           int64 `json:"mt_ok"`           // incoming calls answered
	MTFailed       int64 `json:"mt_failed"`       // incoming calls not answered (cancelled, unknown user, no ACK)
	Deregistered   int64 `json:"deregistered"`
	ProbesOK       int64 `json:"probes_ok"`     // reachability probe calls answered
	ProbesFailed   int64 `json:"probes_failed"` // … and that failed

	// The call generator (Config.CallRate) and the process's own cost, so a run can tell a load generator that
	// could not keep up from a lab that could not.
	CallRateAsked    float64 `json:"call_rate_asked"`   // Config.CallRate, calls per second
	CallsOffered     int64   `json:"calls_offered"`     // arrivals of the Poisson schedule that came due
	CallsPlaced      int64   `json:"calls_placed"`      // … that were placed (offered − skipped by the generator)
	GeneratorSeconds float64 `json:"generator_seconds"` // how long the generator ran
	CallRatePlaced   float64 `json:"call_rate_placed"`  // calls placed / generator seconds
	CPUSeconds       float64 `json:"cpu_seconds"`       // user + system CPU of the whole process since Run began
	WallSeconds      float64 `json:"wall_seconds"`      // wall time since Run began
	CPUShare         float64 `json:"cpu_share"`         // CPUSeconds / WallSeconds (1 = one core busy)
}

// Option configures optional collaborators of a UE.
type Option func(*UE)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(u *UE) { u.log = l } }

// WithEvents sets the event recorder (node_ready, node_stopped). It overrides Config.EventsFile.
func WithEvents(r *obs.Recorder) Option { return func(u *UE) { u.events = r } }

// WithPacketConn gives an already-bound UDP socket (tests bind port 0). Run closes it.
func WithPacketConn(c net.PacketConn) Option { return func(u *UE) { u.conn = c } }

// New builds the phones. Nothing is opened before Run.
// StopGrace is how long the calls in progress have, once Run starts stopping, to hang up (BYE or CANCEL and its
// answer); then they are given up, and the de-registrations (at most 10 s more) follow. The scenario runner waits
// 30 s for the phones to stop.
const StopGrace = 10 * time.Second

var stopGrace = StopGrace // specs shorten it

func New(cfg Config, opts ...Option) (*UE, error) {
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u := &UE{cfg: cfg, log: slog.Default(), ready: make(chan struct{}), done: make(chan struct{}),
		dialogs: map[string]*dialog{}, byUser: map[string]*Phone{}, reachSeen: map[string]bool{}}
	u.lastWord, u.endLastWord = context.WithCancel(context.Background())
	u.callRate.Store(math.Float64bits(cfg.CallRate))
	for _, o := range opts {
		o(u)
	}
	u.seed = cfg.Seed
	for u.seed == 0 {
		u.seed = rand.Int64()
	}
	u.rng = rand.New(rand.NewPCG(uint64(u.seed), uint64(u.seed)>>32|1))
	for i := range cfg.Users.Count {
		n := cfg.Users.From + i
		p := &Phone{ue: u, n: n, user: cfg.Users.User(n), password: cfg.Users.Password(n)}
		p.impi = p.user + "@" + cfg.Domain
		p.impu = "sip:" + p.impi
		u.phones = append(u.phones, p)
		u.byUser[p.user] = p
	}
	// Which phones place calls is part of the seeded run.
	callers := int(float64(len(u.phones))**cfg.Mix + 0.5)
	if callers == 0 && *cfg.Mix > 0 {
		callers = 1
	}
	for _, i := range u.rng.Perm(len(u.phones))[:callers] {
		u.phones[i].caller = true
	}
	for _, p := range u.phones {
		p.role = RoleMTOnly
		if p.caller {
			p.role = RoleCaller
		}
	}
	if m := cfg.Model; m != nil {
		// The model's roles come from their own stream of the seed, so adding the model changes no other draw.
		for i, r := range AssignRoles(len(u.phones), m.IdleShare, m.MTOnlyShare, phoneRand(u.seed, 0, 2)) {
			u.phones[i].role = r
		}
	}
	if cfg.Reachability.Interval > 0 {
		for i := range cfg.Reachability.Probers {
			n := cfg.Users.From + cfg.Users.Count + i
			p := &Phone{ue: u, n: n, user: cfg.Users.User(n), password: cfg.Users.Password(n), prober: true,
				role: RoleCaller}
			p.impi = p.user + "@" + cfg.Domain
			p.impu = "sip:" + p.impi
			u.probers = append(u.probers, p)
			u.byUser[p.user] = p
		}
	}
	return u, nil
}

// SetCallRate changes the rate of the random calls (Config.CallRate) while the phones run: a load step. It has an
// effect only when the phones were started with a CallRate above 0 (they then place calls); 0 pauses the calls.
// A negative or non-finite rate is ignored.
func (u *UE) SetCallRate(r float64) {
	if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return
	}
	u.callRate.Store(math.Float64bits(r))
}

// CallRate is the rate of the random calls now (Config.CallRate, or the last SetCallRate).
func (u *UE) CallRate() float64 { return math.Float64frombits(u.callRate.Load()) }

// Seed returns the seed of the run's random choices (the configured one, or the one picked by New).
func (u *UE) Seed() int64 { return u.seed }

// Ready is closed once the phones are listening and, unless Config.Manual, every phone has registered or
// failed to.
func (u *UE) Ready() <-chan struct{} { return u.ready }

// Done is closed when Run has returned.
func (u *UE) Done() <-chan struct{} { return u.done }

// Addr returns the UDP address the phones use (valid after Ready).
func (u *UE) Addr() string { return u.laddr.String() }

// Proxy returns the outbound proxy's address (valid after Ready).
func (u *UE) Proxy() string { return u.proxy }

// Phones returns every phone, in number order.
func (u *UE) Phones() []*Phone { return u.phones }

// Phone returns the phone with the given user name ("user0001") or public identity
// ("sip:user0001@ims.test"), or nil.
func (u *UE) Phone(user string) *Phone {
	if p := u.byUser[user]; p != nil {
		return p
	}
	var uri sip.Uri
	if err := sip.ParseUri(user, &uri); err == nil {
		return u.byUser[uri.User]
	}
	return nil
}

// Summary returns the counters so far.
func (u *UE) Summary() Summary {
	s := Summary{
		Phones: len(u.phones), InitialOK: u.stats.initialOK.Load(), InitialFailed: u.stats.initialFailed.Load(),
		RegisterOK: u.stats.regOK.Load(), RegisterFailed: u.stats.regFailed.Load(),
		CallsOK: u.stats.callsOK.Load(), CallsFailed: u.stats.callsFailed.Load(),
		CallsSkipped: u.stats.callsSkipped.Load(), CallsHeld: u.stats.callsHeld.Load(), RetryAfters: u.stats.retryAfters.Load(), MTOK: u.stats.mtOK.Load(), MTFailed: u.stats.mtFailed.Load(),
		Deregistered: u.stats.deregistered.Load(), ProbesOK: u.stats.probesOK.Load(),
		ProbesFailed: u.stats.probesFailed.Load(),
	}
	for _, p := range u.phones {
		if p.Registered() {
			s.Registered++
		}
	}
	s.CallRateAsked = u.cfg.CallRate
	s.CallsOffered, s.CallsPlaced = u.stats.callsOffered.Load(), u.stats.callsPlaced.Load()
	if g := u.gen.elapsed(); g > 0 {
		s.GeneratorSeconds = g.Seconds()
		s.CallRatePlaced = float64(s.CallsPlaced) / g.Seconds()
	}
	u.endMu.Lock()
	cpu, wall := u.clock.since()
	if u.endAt > 0 {
		cpu, wall = u.endCPU, u.endAt
	}
	u.endMu.Unlock()
	s.CPUSeconds, s.WallSeconds = cpu.Seconds(), wall.Seconds()
	if wall > 0 {
		s.CPUShare = cpu.Seconds() / wall.Seconds()
	}
	return s
}

// Run binds the socket, finds the outbound proxy, registers the phones (spread at RegisterRate), places calls
// at CallRate, and serves until ctx is done. Then it ends the calls in progress, de-registers if configured,
// and returns nil after a clean shutdown. Run is called once per UE.
func (u *UE) Run(ctx context.Context) (err error) {
	defer close(u.done)
	u.endMu.Lock()
	u.clock = startCPUClock()
	u.endMu.Unlock()
	defer func() {
		u.endMu.Lock()
		u.endCPU, u.endAt = u.clock.since()
		u.endMu.Unlock()
	}()
	if u.cfg.Timers.T1 > 0 {
		// Process-wide: every sipgo stack of this process gets these timers.
		sip.SetTimers(u.cfg.Timers.T1, 8*u.cfg.Timers.T1, 10*u.cfg.Timers.T1)
	}
	if u.records, err = openRecords(u.cfg.RecordsFile); err != nil {
		return err
	}
	defer u.records.close()
	if u.events == nil {
		if u.events, err = obs.OpenRecorder(u.cfg.EventsFile, "ue"); err != nil {
			return fmt.Errorf("ue: %w", err)
		}
		defer u.events.Close()
	}
	if u.conn == nil {
		if u.conn, err = net.ListenPacket("udp", u.cfg.Listen); err != nil {
			return fmt.Errorf("ue: listen: %w", err)
		}
	}
	defer u.conn.Close()
	// Thousands of phones answer in bursts; a bigger receive buffer keeps the kernel from dropping them
	// (internal/runtime/udpbuf: beyond net.core.rmem_max where the process may).
	if want := udpbuf.Wanted(); want > 0 {
		if got, forced, err := udpbuf.Size(u.conn, want); err == nil && !forced && got < want {
			u.log.Warn("ue: UDP receive buffer capped by net.core.rmem_max (run as root, or raise it): bursts may be dropped",
				"asked", want, "got", got)
		}
	}
	if err := u.setupStack(); err != nil {
		return err
	}
	srv, err := sipgo.NewServer(u.ua, sipgo.WithServerLogger(u.log))
	if err != nil {
		return fmt.Errorf("ue: sip server: %w", err)
	}
	u.handle(srv)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.ServeUDP(u.conn) }()
	if err := u.waitListening(serveErr); err != nil {
		_ = u.ua.Close()
		return err
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	u.runCtx = runCtx
	u.log.Info("ue starting", "addr", u.Addr(), "phones", len(u.phones), "seed", u.seed)
	if u.proxy, err = u.findProxy(runCtx); err != nil {
		u.shutdown(serveErr)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	u.running.Store(true)
	if ua, ok := u.conn.LocalAddr().(*net.UDPAddr); ok {
		u.goBackground(func() {
			udpbuf.Watch(runCtx, ua.Port, time.Second, func(delta, total uint64) {
				u.events.Emit(obs.UDPDrops{Drops: delta, DropsTotal: total})
			})
		})
	}
	if !u.cfg.Manual {
		u.registerAll(runCtx)
	}
	s := u.Summary()
	u.log.Info("ue ready", "addr", u.Addr(), "proxy", u.proxy, "registered", s.InitialOK, "failed", s.InitialFailed)
	u.events.Emit(obs.NodeReady{Addr: u.Addr(), Proxy: u.proxy, Phones: len(u.phones),
		Registered: s.InitialOK, Failed: s.InitialFailed, Seed: u.seed})
	close(u.ready)
	if !u.cfg.Manual && u.cfg.CallRate > 0 {
		u.goBackground(func() { u.generateCalls(runCtx) })
	}
	if !u.cfg.Manual && u.cfg.ProbeInterval > 0 {
		u.goBackground(func() { u.probeCalls(runCtx) })
	}
	if !u.cfg.Manual && u.cfg.Model != nil {
		u.runModel(runCtx)
	}

	var sockErr error
	select {
	case <-ctx.Done():
	case sockErr = <-serveErr:
		serveErr <- sockErr // for shutdown
		sockErr = fmt.Errorf("ue: socket %s closed: %w", u.Addr(), sockErr)
		u.log.Error("ue: stopping", "err", sockErr)
	}
	stop()
	grace := time.AfterFunc(stopGrace, u.endLastWord)
	defer func() { grace.Stop(); u.endLastWord() }()
	// Calls in progress see runCtx done and hang up (BYE or CANCEL) on their own; wait for them, and stop the
	// refresh timers from starting new work.
	u.bgMu.Lock()
	u.stopping = true
	u.bgMu.Unlock()
	for _, p := range u.phones {
		p.stopRefresh()
	}
	for _, p := range u.probers {
		p.stopRefresh()
	}
	u.bg.Wait()
	u.closeMTDialogs()
	if u.cfg.Deregister {
		u.deregisterAll()
	}
	u.running.Store(false)
	u.shutdown(serveErr)
	s = u.Summary()
	u.log.Info("ue stopped", "registered", s.Registered, "initial_ok", s.InitialOK, "initial_failed", s.InitialFailed,
		"calls_ok", s.CallsOK, "calls_failed", s.CallsFailed, "mt_ok", s.MTOK, "mt_failed", s.MTFailed)
	if b, err := json.Marshal(s); err == nil { // a summary that does not encode was never recorded
		u.events.Emit(obs.NodeStopped{Summary: b})
	}
	return sockErr
}

func (u *UE) setupStack() error {
	la := u.conn.LocalAddr().(*net.UDPAddr)
	u.laddr = sip.Addr{IP: la.IP, Port: la.Port, Hostname: la.IP.String()}
	u.advIP, u.advPort = la.IP.String(), la.Port
	if u.cfg.Advertise != "" {
		host, port, _ := net.SplitHostPort(u.cfg.Advertise)
		u.advIP = host
		u.advPort, _ = strconv.Atoi(port)
	}
	var err error
	u.ua, err = sipgo.NewUA(
		sipgo.WithUserAgent(userAgent),
		sipgo.WithUserAgentHostname(u.cfg.Domain),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(u.log)),
		sipgo.WithUserAgentTransactionLayerOptions(
			sip.WithTransactionLayerLogger(u.log),
			sip.WithTransactionLayerUnhandledResponseHandler(func(r *sip.Response) {
				u.log.Debug("ue: response matches no transaction", "status", r.StatusCode, "call_id", callID(r))
			}),
		),
	)
	if err != nil {
		return fmt.Errorf("ue: sip user agent: %w", err)
	}
	hp := net.JoinHostPort(u.advIP, strconv.Itoa(u.advPort))
	u.cli, err = sipgo.NewClient(u.ua, sipgo.WithClientAddr(hp), sipgo.WithClientConnectionAddr(u.laddr.String()),
		sipgo.WithClientLogger(u.log))
	if err != nil {
		_ = u.ua.Close()
		return fmt.Errorf("ue: sip client: %w", err)
	}
	return nil
}

// waitListening returns once sipgo has the socket in its connection pool: a request sent before that would
// make sipgo open a second socket on the same address and fail.
func (u *UE) waitListening(serveErr chan error) error {
	tp := u.ua.TransportLayer()
	for {
		if c, err := tp.GetConnection("udp", u.laddr.String()); err == nil {
			_, _ = c.TryClose() // GetConnection took a reference
			return nil
		}
		select {
		case err := <-serveErr:
			return fmt.Errorf("ue: serve %s: %w", u.laddr.String(), err)
		case <-time.After(time.Millisecond):
		}
	}
}

// shutdown closes the socket first, then the user agent. In that order the transactions still answering (a flood
// of retransmitted requests on a loaded machine: hundreds of goroutines queued for the socket) fail at once and
// no new ones start, so closing the transaction layer, which takes its store's lock once per transaction, is not
// queued behind them (a run under -race waited minutes there).
func (u *UE) shutdown(serveErr chan error) {
	_ = u.conn.Close()
	_ = u.ua.Close()
	if err := <-serveErr; err != nil && !errors.Is(err, net.ErrClosed) {
		u.log.Warn("ue: serve", "err", err)
	}
}

// findProxy returns Config.Proxy, or asks the lab DNS until it answers or ctx is done.
func (u *UE) findProxy(ctx context.Context) (string, error) {
	if u.cfg.Proxy != "" {
		return u.cfg.Proxy, nil
	}
	for attempt := 0; ; attempt++ {
		addr, err := lookupProxy(ctx, u.cfg.DNSServer, u.cfg.proxyHost(), u.intn)
		if err == nil {
			u.log.Info("ue: outbound proxy found", "peer", addr, "host", u.cfg.proxyHost())
			return addr, nil
		}
		if attempt%10 == 0 {
			u.log.Warn("ue: cannot find the outbound proxy, retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("ue: outbound proxy: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// goBackground runs f unless the UE is stopping; Run waits for it before it de-registers and closes.
func (u *UE) goBackground(f func()) bool {
	u.bgMu.Lock()
	defer u.bgMu.Unlock()
	if u.stopping {
		return false
	}
	u.bg.Go(f)
	return true
}

func (u *UE) intn(n int) int {
	u.rngMu.Lock()
	defer u.rngMu.Unlock()
	return u.rng.IntN(n)
}

func (u *UE) float() float64 {
	u.rngMu.Lock()
	defer u.rngMu.Unlock()
	return u.rng.Float64()
}

// jitter returns d scaled by a random factor in [1-f, 1+f].
func (u *UE) jitter(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * (1 - f + 2*f*u.float()))
}

// bind makes an outgoing request leave from the shared socket towards the outbound proxy.
func (u *UE) bind(req *sip.Request) {
	u.laddr.Copy(&req.Laddr)
	req.SetTransport("UDP")
	req.SetDestination(u.proxy)
}

// via builds the phones' Via header with a new branch.
func (u *UE) via() *sip.ViaHeader {
	v := &sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: "UDP", Host: u.advIP, Port: u.advPort,
		Params: sip.NewParams()}
	v.Params.Add("branch", sip.GenerateBranchN(16))
	v.Params.Add("rport", "")
	return v
}

// do runs a non-INVITE client transaction to the outbound proxy and returns the final response.
func (u *UE) do(ctx context.Context, req *sip.Request) (*sip.Response, error) {
	u.bind(req)
	tx, err := u.cli.TransactionRequest(ctx, req, sipgo.ClientRequestBuild)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTransport, err)
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				continue
			}
			return res, nil
		case <-tx.Done():
			return nil, txError(tx.Err())
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", errAborted, ctx.Err())
		}
	}
}

func callID(m sip.Message) string {
	if h := m.CallID(); h != nil {
		return h.Value()
	}
	return ""
}
