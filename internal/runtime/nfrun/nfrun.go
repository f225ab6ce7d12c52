// Package nfrun assembles the runtime every SIP network function shares from its generated node configuration:
// logger, event recorder, DNS resolver against the lab DNS, SIP endpoint, peer health with OPTIONS probing, and
// the Cx client for the nodes that talk to the HSS.
package nfrun

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with --pprof
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/overload"
	"github.com/imslab/quasipool/internal/runtime/pool"
	"github.com/imslab/quasipool/internal/runtime/repl"
	"github.com/imslab/quasipool/internal/runtime/udpbuf"
	"github.com/imslab/quasipool/internal/topology"
)

// Stack is a SIP node's shared runtime.
type Stack struct {
	Cfg    *topology.NodeConfig
	Log    *slog.Logger
	Rec    *obs.Recorder
	Res    *pool.DNSResolver
	EP     *sipx.Endpoint
	Health *pool.Health
	Cx     *cx.Client // nil unless CxClient was called
	tracer *obs.Tracer
}

// Setup builds the runtime of a node.
func Setup(cfg *topology.NodeConfig) (*Stack, error) {
	log, err := obs.NewLogger(os.Stderr, obs.LogConfig{Format: cfg.Log.Format, Level: cfg.Log.Level}, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	rec, err := obs.OpenRecorder(cfg.EventsFile, cfg.Name)
	if err != nil {
		return nil, err
	}
	// sipgo logs through its own default logger (parse errors, transport problems): make that ours.
	sip.SetDefaultLogger(log.With("caller", "sipgo"))
	slog.SetDefault(log)
	sipx.Timers{T1: cfg.Timers.T1}.Apply()
	ep, err := sipx.NewEndpoint(cfg.FQDN, cfg.Listen, log)
	if err != nil {
		rec.Close()
		return nil, err
	}
	tracer, err := obs.OpenTracer(cfg.TraceFile, cfg.Name, cfg.TraceMaxBytes)
	if err != nil {
		rec.Close()
		return nil, err
	}
	ep.Trace(tracer)
	ep.Overload = NewOverload(cfg)
	res := pool.NewDNSResolver(cfg.DNSServer)
	if cfg.Seed == 0 { // a node started by hand: the lab and compose always give one (topology.RunSeed)
		cfg.Seed = uint64(time.Now().UnixNano()) | 1
	}
	hc := pool.HealthConfig{Interval: cfg.Probing.Interval, Timeout: cfg.Probing.Timeout,
		FailuresToDown: cfg.Probing.FailuresToDown, SuccessesToUp: cfg.Probing.SuccessesToUp,
		Panic: cfg.Probing.Panic != nil && *cfg.Probing.Panic, LagExcuse: cfg.Probing.LagExcuse,
		Jitter: cfg.Probing.Jitter}
	// self_lag events from half the probe timeout on, whether the excuse is on or not (to see a node starve).
	lagEvent := hc.Timeout / 2
	if hc.Timeout == 0 {
		lagEvent = pool.DefaultProbeTimeout / 2
	}
	health, err := pool.NewHealth(hc, pool.NewSIPProber(ep.Client, cfg.FQDN), pool.WithLogger(log), pool.WithEvents(rec),
		pool.WithSeed(cfg.Seed), pool.WithLag(pool.NewLagMonitor(0, rec, lagEvent)))
	if err != nil {
		rec.Close()
		return nil, fmt.Errorf("probing: %w", err)
	}
	return &Stack{Cfg: cfg, Log: log, Rec: rec, Res: res, EP: ep, Health: health, tracer: tracer}, nil
}

// Forward returns the forwarder timers of the node. Requests without a provisional answer (REGISTER, BYE) cross
// several proxies, each of which may itself wait for a dead peer before failing over, so a node waits longer the
// closer it is to the phones: S-CSCF and I-CSCF 1×, P-CSCF 2.5×, BAC 3.5× the topology's no-answer time. An
// INVITE is answered with 100 Trying by any live next hop, so it uses the topology's INVITE time unscaled, and
// with fast failure detection (failover.provisional_timeout) gives up on a silent pool member much sooner.
func (s *Stack) Forward() sipx.ForwarderConfig {
	base := s.Cfg.Timers.NonInviteNoAnswer
	if base <= 0 {
		base = 2 * time.Second
	}
	factor := 1.0
	switch s.Cfg.Kind {
	case topology.KindPCSCF:
		factor = 2.5
	case topology.KindBAC:
		factor = 3.5
	}
	invite := s.Cfg.Timers.InviteNoAnswer
	if invite <= 0 {
		invite = base
	}
	return sipx.ForwarderConfig{NoAnswer: time.Duration(float64(base) * factor), InviteNoAnswer: invite,
		ProvisionalTimeout: s.Cfg.Failover.ProvisionalTimeout, Seed: s.Cfg.Seed}
}

// Replication returns the member-to-member replication of the node's pool (pool-sync, active-standby, mutual), nil
// when its pool does not replicate.
func (s *Stack) Replication() *repl.Config {
	r := s.Cfg.Replication
	if r == nil {
		return nil
	}
	return &repl.Config{Node: s.Cfg.Name, Listen: r.Listen, Peers: r.Peers, PeerNames: r.PeerNames}
}

// PoolHosts returns the members of the node's own pool (pcscf1.ims.test → every target of pcscf.ims.test).
func (s *Stack) PoolHosts(ctx context.Context) []string {
	first, rest, _ := strings.Cut(s.Cfg.FQDN, ".")
	poolName := strings.TrimRight(first, "0123456789") + "." + rest
	ts, err := s.Res.LookupSRV(ctx, pool.SIPName(poolName))
	if err != nil {
		s.Log.Warn("resolve own pool", "pool", poolName, "err", err)
		return []string{s.Cfg.FQDN}
	}
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// Addrs resolves a host's SRV record to its target addresses (e.g. the BAC's, to trust it).
func (s *Stack) Addrs(ctx context.Context, host string) []string {
	ts, err := s.Res.LookupSRV(ctx, pool.SIPName(host))
	if err != nil {
		s.Log.Warn("resolve", "host", host, "err", err)
		return nil
	}
	var out []string
	for _, t := range ts {
		out = append(out, t.Addr)
	}
	return out
}

// CxClient builds the node's Cx client; the HSS address comes from the Diameter SRV record at every connection.
func (s *Stack) CxClient() (*cx.Client, error) {
	srv := s.Cfg.Peers.HSS
	if srv == "" {
		return nil, errors.New("peers.hss: must be set")
	}
	c, err := cx.NewClient(cx.ClientConfig{OriginHost: s.Cfg.FQDN, OriginRealm: s.Cfg.Domain, DestinationRealm: s.Cfg.Domain,
		WatchdogInterval: 2 * time.Second},
		cx.WithClientLogger(s.Log), cx.WithResolver(func(ctx context.Context) (string, error) {
			ts, err := s.Res.LookupSRV(ctx, srv)
			if err != nil {
				return "", err
			}
			if len(ts) == 0 {
				return "", fmt.Errorf("%s: no target", srv)
			}
			return ts[0].Addr, nil
		}))
	if err != nil {
		return nil, err
	}
	s.Cx = c
	return c, nil
}

// Runner is a network function's main loop.
type Runner interface {
	Run(ctx context.Context) error
}

// Run serves the endpoint, the probing, the Cx client and the node until ctx is done.
func (s *Stack) Run(ctx context.Context, node Runner) error {
	defer s.Rec.Close()
	defer s.tracer.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.EP.Serve(gctx) })
	select {
	case <-s.EP.Listening():
	case <-gctx.Done():
	}
	g.Go(func() error { return s.Health.Run(gctx) })
	g.Go(func() error { return node.Run(gctx) })
	g.Go(func() error { ReportOverload(gctx, s.EP.Overload, s.Rec); return nil })
	g.Go(func() error { ReportStale(gctx, s.Res, s.Rec); return nil })
	g.Go(func() error { ReportRTT(gctx, s.Health, s.Rec, RTTReportInterval); return nil })
	g.Go(func() error { ReportDrops(gctx, s.EP.Addr, s.Rec); return nil })
	if s.Cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", s.Cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		g.Go(func() error { return ServeMetrics(gctx, ln, s.EP, s.Health) })
	}
	if s.Cx != nil {
		g.Go(func() error { return s.Cx.Run(gctx) })
		select {
		case <-s.Cx.Connected():
		case <-time.After(10 * time.Second):
			s.Log.Warn("no HSS connection yet; serving anyway")
		case <-gctx.Done():
		}
	}
	s.Log.Info(s.Cfg.Name+" ready", "sip", s.EP.Addr, "host", s.Cfg.FQDN, "kind", string(s.Cfg.Kind))
	// The node's kind was once written here as a field "kind", which the envelope's kind always overwrote:
	// it never reached the file, and the node's name says it.
	s.Rec.Emit(obs.NodeReady{SIP: s.EP.Addr})
	err := g.Wait()
	s.Log.Info(s.Cfg.Name + " stopped")
	return err
}

// DefaultMemoryLimitMiB is the nodes' default soft memory limit (--memory-limit-mib), sized from a measurement
// (scripts/gc-heap.sh, docs/results/bench/gc-2026-12-01): one proxy hop of the lab (imslab bench relay, events
// and trace on) holds about 0.6 MB of live heap per call/s it relays, the transactions of the last 32 s (52, 114
// and 184 MB at 100, 200 and 300 calls/s), and the collector's goal is twice the live heap (GOGC 100). Under the
// former 128 MiB default that relay collected 91 times in 69 s at 200 calls/s (18 % of its CPU) and spent 35 % of
// its CPU collecting at 300 calls/s; with 1 GiB, 4-5 %. 1 GiB lets a node relay about 850 calls/s before the
// limit binds (the BAC carries both legs of a call: ~425 calls/s), above what the lab reaches on the 2-core
// machine. The limit is a ceiling, not a reservation: below it GOGC governs the heap, as without a limit.
// docs/performance.md, "Memory limit".
const DefaultMemoryLimitMiB = 1024

// Main is the whole main function of a SIP network function: `<kind> --config <node.yaml>`, run until SIGINT or
// SIGTERM. build wires the node on the stack. It returns the process exit code.
func Main(kind topology.Kind, args []string, build func(ctx context.Context, s *Stack) (Runner, error)) int {
	fs := flag.NewFlagSet(string(kind), flag.ContinueOnError)
	path := fs.String("config", "", "node configuration file generated from the topology (required)")
	memLimit := fs.Int64("memory-limit-mib", DefaultMemoryLimitMiB, "soft memory limit of the Go runtime in MiB (GOMEMLIMIT overrides)")
	pprofAddr := fs.String("pprof", "", "serve Go's net/http/pprof on this address (e.g. 127.0.0.1:6060) for profiling")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" {
		fmt.Fprintf(os.Stderr, "%s: --config is required\n", kind)
		return 2
	}
	cfg, err := topology.LoadNodeConfig(*path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", kind, err)
		return 2
	}
	if cfg.Kind != kind {
		fmt.Fprintf(os.Stderr, "%s: %s: kind is %q, not %q\n", kind, *path, cfg.Kind, kind)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOMEMLIMIT") == "" {
		// Ten-odd nodes share one machine; the soft limit bounds what one node under overload may take. It is
		// sized from a measurement (DefaultMemoryLimitMiB), not to hold a node's heap down: most of a proxy's
		// heap is sipgo transactions that live out their RFC 3261 timers (32 s over UDP), so its live heap
		// grows with its call rate, and a limit below twice that makes the collector run without pause.
		// GOMEMLIMIT overrides it.
		debug.SetMemoryLimit(*memLimit << 20)
	}
	if *pprofAddr != "" {
		go func() { _ = http.ListenAndServe(*pprofAddr, nil) }()
	}
	stopProfile, err := obs.StartCPUProfileFromEnv(cfg.Name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Name, err)
		return 1
	}
	defer stopProfile()
	s, err := Setup(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Name, err)
		return 1
	}
	node, err := build(ctx, s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Name, err)
		return 1
	}
	if err := s.Run(ctx, node); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Name, err)
		return 1
	}
	return 0
}

// Peers returns the SIP source addresses of the lab's nodes by role, from the node configuration's trust section
// (generated from the topology; never looked up in DNS).
func (s *Stack) Peers() sipx.Peers {
	t := s.Cfg.Trust
	if t == nil {
		return sipx.Peers{}
	}
	return sipx.Peers{BAC: t.BAC, PCSCF: t.PCSCF, ICSCF: t.ICSCF, SCSCF: t.SCSCF}
}

// NewOverload builds the node's overload controller from its configuration (seeded from the node's name, so a
// run's shedding decisions do not depend on the clock).
func NewOverload(cfg *topology.NodeConfig) *overload.Controller {
	o := cfg.Overload
	h := fnv.New64a()
	_, _ = h.Write([]byte(cfg.Name))
	return overload.New(overload.Config{Disabled: o.Off, Target: o.Target, MaxInFlight: o.MaxInFlight,
		RetryAfter: o.RetryAfter, MaxRate: o.MaxRate, ChainTarget: o.ChainTarget, ChainHold: o.ChainHold}, h.Sum64())
}

// ServeMetrics serves the node's Prometheus metrics at /metrics on ln (the overload controller's counters, the
// requests its pools routed in panic, the responses its SIP endpoint dropped for matching no transaction, the Go
// runtime's and the process's) until ctx ends.
func ServeMetrics(ctx context.Context, ln net.Listener, ep *sipx.Endpoint, h *pool.Health) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(ep.Overload.Collectors()...)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sip", Name: "stray_responses_total",
		Help: "Responses that matched no client transaction, dropped (RFC 6026 §7.2): retransmissions after the " +
			"transaction ended, answers to requests given up on."},
		func() float64 { return float64(ep.StrayResponses()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "pool", Name: "panic_requests_total",
		Help: "Requests sent to a pool whose every member was marked down, as if they were up (panic routing)."},
		func() float64 { return float64(h.PanicRequests()) }))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// ReportOverload writes an "overload" event every second in which the node shed requests (how many, how many it
// admitted, its smoothed lag and shed share), and one when shedding stops; it stops the controller's probe when
// ctx ends.
func ReportOverload(ctx context.Context, c *overload.Controller, rec *obs.Recorder) {
	defer c.Close()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last overload.Stats
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := c.Stats()
		if st.Shed != last.Shed || (last.ShedShare > 0) != (st.ShedShare > 0) || (last.ChainLimit > 0) != (st.ChainLimit > 0) {
			rec.Emit(obs.Overload{Shed: st.Shed - last.Shed, Admitted: st.Admitted - last.Admitted,
				ShedTotal: st.Shed, InFlight: st.InFlight, LagMs: float64(st.Lag.Microseconds()) / 1000,
				ShedShare: st.ShedShare, ShedChain: st.ShedChain - last.ShedChain,
				ChainMs: float64(st.Chain.Microseconds()) / 1000, ChainLimit: st.ChainLimit})
		}
		last = st
	}
}

// ReportStale writes a "dns_stale" event every second in which the node's resolver served expired answers because
// the DNS server did not answer (serve-stale, pool.DNSResolver): how many in that second, the total, and how many
// queries it sent. A node writes none while the DNS answers; a test or a reader of the events sees from them that
// the node went on with the last answers it had (issue 11's dns-outage).
func ReportStale(ctx context.Context, r *pool.DNSResolver, rec *obs.Recorder) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := r.StaleServed(); n != last {
			rec.Emit(obs.DNSStale{Served: n - last, ServedTotal: n, QueriesTotal: r.Queries()})
			last = n
		}
	}
}

// ReportDrops writes a "udp_drops" event every second in which the kernel dropped datagrams arriving at the
// node's SIP socket because its receive buffer was full: how many in that second and since the node started.
// Each drop is a SIP message lost on the host itself, recovered (if at all) by a retransmission 0.5 s or more
// later; the report counts them per node and warns (docs/report.md, "Datagrams the host dropped").
func ReportDrops(ctx context.Context, addr string, rec *obs.Recorder) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return
	}
	udpbuf.Watch(ctx, p, time.Second, func(delta, total uint64) {
		rec.Emit(obs.UDPDrops{Drops: delta, DropsTotal: total})
	})
}

// RTTReportInterval is how often a node writes the round trips of its OPTIONS probes (peer_rtt events).
const RTTReportInterval = 5 * time.Second

// ReportRTT writes, every interval, a "peer_rtt" event per peer that answered probes in it: how many
// (n) and their round trip (OPTIONS sent → final response received) as min, median and max in milliseconds. With
// 1 s probing that is five samples per peer per event, enough to see a link's configured delay (the wan-latency
// spec checks it within 20 %) or a starved member answering late; the last window is written when ctx ends.
func ReportRTT(ctx context.Context, h *pool.Health, rec *obs.Recorder, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var done bool
		select {
		case <-ctx.Done():
			done = true
		case <-t.C:
		}
		for _, p := range h.TakeRTTs() {
			ms := make([]float64, len(p.RTTs))
			for i, d := range p.RTTs {
				ms[i] = float64(d.Microseconds()) / 1000
			}
			slices.Sort(ms)
			rec.Emit(obs.PeerRTT{Peer: p.Name, Addr: p.Addr, N: len(ms),
				MinMs: ms[0], P50Ms: (ms[(len(ms)-1)/2] + ms[len(ms)/2]) / 2, MaxMs: ms[len(ms)-1]})
		}
		if done {
			return
		}
	}
}
