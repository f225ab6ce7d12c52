package hss

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/imslab/quasipool/internal/nf/hss/api"
	"github.com/imslab/quasipool/internal/nf/hss/store"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/overload"
)

// Node is a running HSS: the Cx server, the provisioning API and the store.
type Node struct {
	cfg     Config
	log     *slog.Logger
	events  *obs.Recorder
	diamLn  net.Listener
	httpLn  net.Listener
	ready   chan struct{}
	metrics *metrics
}

// Option configures optional collaborators of a Node.
type Option func(*Node)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(n *Node) { n.log = l } }

// WithEvents sets the event recorder (one line per answered request).
func WithEvents(r *obs.Recorder) Option { return func(n *Node) { n.events = r } }

// WithListeners gives already-bound listeners (tests bind port 0) for Diameter and HTTP.
func WithListeners(diameter, httpAPI net.Listener) Option {
	return func(n *Node) { n.diamLn, n.httpLn = diameter, httpAPI }
}

// New builds an HSS node. Nothing is opened before Run.
func New(cfg Config, opts ...Option) (*Node, error) {
	cfg.applyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: slog.Default(), ready: make(chan struct{}), metrics: newMetrics()}
	for _, o := range opts {
		o(n)
	}
	return n, nil
}

// Ready is closed once the HSS answers on both listeners.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// DiameterAddr and HTTPAddr return the bound addresses (valid after Ready).
func (n *Node) DiameterAddr() string { return n.diamLn.Addr().String() }
func (n *Node) HTTPAddr() string     { return n.httpLn.Addr().String() }

// Run opens the store, imports subscribers, serves until ctx is done and closes everything.
func (n *Node) Run(ctx context.Context) error {
	db, err := store.Open(n.cfg.DataDir, store.Options{Logger: n.log, NoSync: n.cfg.UnsafeNoSync})
	if err != nil {
		return fmt.Errorf("hss: %w", err)
	}
	defer db.Close()
	if err := n.provision(ctx, db); err != nil {
		return err
	}
	if n.diamLn == nil {
		if n.diamLn, err = net.Listen("tcp", n.cfg.DiameterListen); err != nil {
			return fmt.Errorf("hss: diameter_listen: %w", err)
		}
	}
	if n.httpLn == nil {
		if n.httpLn, err = net.Listen("tcp", n.cfg.HTTPListen); err != nil {
			n.diamLn.Close()
			return fmt.Errorf("hss: http_listen: %w", err)
		}
	}
	ctl := overload.New(n.cfg.Overload, 0x155)
	defer ctl.Close()
	for _, col := range ctl.Collectors() {
		_ = n.metrics.reg.Register(col) // a second Run keeps the first one's (AlreadyRegisteredError)
	}
	tracer, err := obs.OpenTracer(n.cfg.TraceFile, "hss", n.cfg.TraceMaxBytes)
	if err != nil {
		return fmt.Errorf("hss: %w", err)
	}
	defer tracer.Close()
	if n.cfg.AllowAnyPeer {
		n.log.Warn("allow_any_peer is set: any host that reaches the Diameter port may read HA1s and take users over",
			"peers", len(n.cfg.Peers))
	}
	if wd := n.cfg.Watchdog.WithDefaults(); wd.Interval < 6*time.Second {
		n.log.Warn("watchdog.interval is below RFC 3539's 6 s minimum (tests only)", "interval", wd.Interval)
	}
	srv, err := cx.NewServer(cx.ServerConfig{
		OriginHost: n.cfg.OriginHost, OriginRealm: n.cfg.OriginRealm, ProductName: "imslab-hss",
		MaxConcurrentHandlers: n.cfg.MaxConcurrentHandlers, Peers: n.cfg.Peers, AllowAnyPeer: n.cfg.AllowAnyPeer,
		CERTimeout: n.cfg.CERTimeout, Watchdog: n.cfg.Watchdog, MaxConnections: n.cfg.MaxConnections,
	}, NewProcedures(db, n.cfg.CapabilitySets), cx.WithLogger(n.log), cx.WithObserver(n.observe),
		cx.WithRefusals(n.refused), cx.WithOverload(ctl),
		cx.WithTrace(func(dir, src, dst string, data []byte) { tracer.Record("diameter", dir, src, dst, data) }))
	if err != nil {
		return fmt.Errorf("hss: %w", err)
	}
	tokenFile := n.cfg.TokenFile()
	token, created, err := api.LoadOrCreateToken(tokenFile)
	if err != nil {
		return fmt.Errorf("hss: api_token_file: %w", err)
	}
	if created {
		n.log.Info("api token created", "file", tokenFile)
	} else if st, err := os.Stat(tokenFile); err == nil && st.Mode().Perm()&0o077 != 0 {
		n.log.Warn("api token file is readable by others", "file", tokenFile, "mode", st.Mode().Perm().String())
	}

	mux := http.NewServeMux()
	mux.Handle("/api/", api.NewHandler(db, decodeRestoration, n.log))
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	guard := api.Guard{Token: token, Hosts: n.httpHosts(), Log: n.log}
	hs := &http.Server{Handler: guard.Protect(mux), ReadHeaderTimeout: 5 * time.Second}

	errc := make(chan error, 2)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { errc <- srv.Serve(sctx, n.diamLn) }()
	go func() {
		if err := hs.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("hss: http: %w", err)
			return
		}
		errc <- nil
	}()
	close(n.ready)
	n.log.Info("hss ready", "diameter", n.DiameterAddr(), "http", n.HTTPAddr(), "data_dir", n.cfg.DataDir,
		"origin_host", n.cfg.OriginHost)
	n.events.Emit(obs.NodeReady{Diameter: n.DiameterAddr(), HTTP: n.HTTPAddr()})

	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	cancel()
	shctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	_ = hs.Shutdown(shctx)
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	n.log.Info("hss stopped")
	return first
}

func (n *Node) provision(ctx context.Context, db *store.DB) error {
	var subs []store.Subscriber
	if n.cfg.LabSubscribers {
		count := n.cfg.LabSubscriberCount
		if count == 0 {
			count = store.DefaultLabSubscriberCount
		}
		subs = append(subs, store.LabSubscribers(count)...)
	}
	if n.cfg.SubscribersFile != "" {
		f, err := store.LoadFile(n.cfg.SubscribersFile)
		if err != nil {
			return fmt.Errorf("hss: subscribers_file: %w", err)
		}
		fs, err := f.Subscribers()
		if err != nil {
			return fmt.Errorf("hss: subscribers_file %s: %w", n.cfg.SubscribersFile, err)
		}
		subs = append(subs, fs...)
	}
	if len(subs) == 0 {
		return nil
	}
	start := time.Now()
	added, updated, err := db.Import(ctx, subs)
	if err != nil {
		return fmt.Errorf("hss: import subscribers: %w", err)
	}
	n.log.Info("subscribers imported", "added", added, "updated", updated, "offered", len(subs),
		"took_ms", time.Since(start).Milliseconds())
	return nil
}

func (n *Node) observe(x cx.Exchange) {
	n.metrics.observe(x)
	ev := obs.CxAnswer{Cmd: x.Command, Result: x.Result.Code, Experimental: x.Result.Experimental,
		LatencyUs: x.Duration.Microseconds(), Peer: x.Peer, SessionID: x.SessionID, IMPI: x.UserName,
		IMPU: x.PublicIdentity, ServerName: x.ServerName, Error: x.Error}
	if x.AuthType != nil {
		uat := int(*x.AuthType)
		ev.UAT = &uat
	}
	if x.AssignmentType != nil {
		sat := int(*x.AssignmentType)
		ev.SAT = &sat
	}
	n.events.Emit(ev)
	n.log.Debug("cx answered", "cmd", x.Command, "peer", x.Peer, "session_id", x.SessionID, "impi", x.UserName,
		"impu", x.PublicIdentity, "result_code", x.Result.Label(), "latency", x.Duration)
}

// httpHosts are the Host header values the HTTP listener answers to: its bound address, the HSS's FQDN and
// loopback names.
func (n *Node) httpHosts() []string {
	hosts := []string{n.cfg.OriginHost, "localhost", "127.0.0.1", "::1"}
	for _, addr := range []string{n.httpLn.Addr().String(), n.cfg.HTTPListen} {
		h, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(h); err != nil || h == "" || (ip != nil && ip.IsUnspecified()) {
			continue // a wildcard listener has no name of its own
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// refused records a refused Cx connection or request (event cx_refused, counter hss_cx_refused_total).
func (n *Node) refused(r cx.Refusal) {
	n.metrics.refused.WithLabelValues(r.Reason).Inc()
	n.events.Emit(obs.CxRefused{Peer: r.Peer, Remote: r.Remote, Reason: r.Reason, Cmd: r.Command,
		Result: r.Result.Code, Error: r.Detail})
}

func decodeRestoration(raw []byte) (any, error) { return cx.DecodeRestorationRaw(raw) }
