package dnsd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// Server is the lab's DNS server. It is safe for concurrent use: queries read an immutable zone that edits
// replace atomically.
type Server struct {
	cfg     Config
	log     *slog.Logger
	events  *obs.Recorder
	listen  string
	initial *topology.Zone // from WithZone

	pc net.PacketConn
	ln net.Listener

	mu   sync.Mutex // serialises zone edits
	zone atomic.Pointer[zone]

	ready chan struct{}
	stats counters
}

// Option configures optional collaborators of a Server.
type Option func(*Server)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithEvents sets the event recorder.
func WithEvents(r *obs.Recorder) Option { return func(s *Server) { s.events = r } }

// WithZone serves z instead of the zone of the configured topology file.
func WithZone(z topology.Zone) Option {
	return func(s *Server) { s.initial = &z }
}

// WithConns gives already-bound sockets (tests bind port 0). Both must be on the same address and port.
func WithConns(pc net.PacketConn, ln net.Listener) Option {
	return func(s *Server) { s.pc, s.ln = pc, ln }
}

// New builds a server: it loads the topology (unless WithZone) and compiles the zone. Nothing is opened before
// Run.
func New(cfg Config, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: slog.Default(), ready: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	z, listen, err := s.initialZone()
	if err != nil {
		return nil, err
	}
	if cfg.TTL > 0 {
		z.TTL = cfg.TTL
	}
	s.listen = cfg.Listen
	if s.listen == "" {
		s.listen = listen
	}
	if s.listen == "" && s.pc == nil {
		return nil, errors.New("dnsd config: listen: missing (and no topology to take it from)")
	}
	c, err := compile(z, newSerial())
	if err != nil {
		return nil, err
	}
	s.zone.Store(c)
	return s, nil
}

// initialZone returns the zone to serve and the topology's listen address ("" with WithZone).
func (s *Server) initialZone() (topology.Zone, string, error) {
	if s.initial != nil {
		return *s.initial, "", nil
	}
	t := topology.Default()
	if s.cfg.Topology != "" {
		var err error
		if t, err = topology.Load(s.cfg.Topology); err != nil {
			return topology.Zone{}, "", fmt.Errorf("dnsd: %w", err)
		}
	}
	return t.Zone(), t.DNS.Listen, nil
}

// newSerial starts SOA serials at the current Unix time, so that a restarted server never goes backwards.
func newSerial() uint32 { return uint32(time.Now().Unix()) }

// Ready is closed once the server answers on UDP and TCP.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr returns the bound address, the same for UDP and TCP (valid after Ready).
func (s *Server) Addr() string { return s.pc.LocalAddr().String() }

// Run serves until ctx is done and returns nil after a clean shutdown.
func (s *Server) Run(ctx context.Context) error {
	if s.pc == nil || s.ln == nil {
		pc, ln, err := listenBoth(s.listen)
		if err != nil {
			return fmt.Errorf("dnsd: listen: %w", err)
		}
		s.pc, s.ln = pc, ln
	}
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	udp := &dns.Server{PacketConn: s.pc, Handler: s, UDPSize: dns.DefaultMsgSize, NotifyStartedFunc: notify,
		MsgInvalidFunc: s.invalid}
	tcp := &dns.Server{Listener: s.ln, Handler: s, NotifyStartedFunc: notify, MsgInvalidFunc: s.invalid}
	errc := make(chan error, 2)
	go func() { errc <- wrapServe("udp", udp.ActivateAndServe()) }()
	go func() { errc <- wrapServe("tcp", tcp.ActivateAndServe()) }()

	running := 2
	var first error
	for n := 0; n < 2 && first == nil; {
		select {
		case <-started:
			n++
		case first = <-errc:
			running--
		}
	}
	if first == nil {
		close(s.ready)
		z := s.zone.Load()
		s.log.Info("dnsd ready", "addr", s.Addr(), "zone", z.src.Origin, "records", z.count, "ttl", z.src.TTL)
		s.events.Emit(obs.NodeReady{Addr: s.Addr(), Zone: z.src.Origin, Records: z.count})
		select {
		case <-ctx.Done():
		case first = <-errc:
			running--
		}
	}
	shctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = udp.ShutdownContext(shctx)
	_ = tcp.ShutdownContext(shctx)
	for ; running > 0; running-- {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	_ = s.pc.Close()
	_ = s.ln.Close()
	st := s.Stats()
	s.events.Emit(st.event())
	s.log.Info("dnsd stopped", "queries", st.Queries)
	return first
}

func wrapServe(network string, err error) error {
	if err != nil {
		return fmt.Errorf("dnsd: serve %s: %w", network, err)
	}
	return nil
}

// listenBoth binds UDP and TCP on the same address; with port 0 it retries until one free port takes both.
func listenBoth(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	for i := 0; ; i++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		p := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if i+1 >= tries {
			return nil, nil, err
		}
	}
}

func (s *Server) invalid(m []byte, err error) {
	s.stats.malformed.Add(1)
	s.log.Debug("malformed query", "err", err, "len", len(m))
}

// Zone returns the zone being served.
func (s *Server) Zone() topology.Zone {
	z := s.zone.Load().src
	return withRecords(z, z.Records)
}

// SetZone replaces the whole zone.
func (s *Server) SetZone(z topology.Zone) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.swap(withRecords(z, z.Records), "set_zone", nil)
}

// AddRecord adds one record (at the end of its RRset).
func (s *Server) AddRecord(r topology.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	z := s.zone.Load().src
	return s.swap(withRecords(z, append(z.Records, r)), "add_record", &r)
}

// RemoveRecord removes every record that matches r: same name and type, and equal in every non-zero field of
// r (so {Name: "_sip._udp.pcscf.ims.test", Type: SRV, Target: "pcscf1.ims.test"} takes pcscf1 out of the pool
// record). It returns how many were removed.
func (s *Server) RemoveRecord(r topology.Record) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	z := s.zone.Load().src
	keep := make([]topology.Record, 0, len(z.Records))
	for _, x := range z.Records {
		if !matches(r, x) {
			keep = append(keep, x)
		}
	}
	removed := len(z.Records) - len(keep)
	if removed == 0 {
		return 0, nil
	}
	return removed, s.swap(withRecords(z, keep), "remove_record", &r)
}

// swap compiles z with the next serial and makes it current. The caller holds s.mu.
func (s *Server) swap(z topology.Zone, op string, r *topology.Record) error {
	old := s.zone.Load()
	serial := old.serial + 1
	if now := newSerial(); now > serial {
		serial = now
	}
	c, err := compile(z, serial)
	if err != nil {
		return err
	}
	s.zone.Store(c)
	ev := obs.DNSChange{Op: op, Serial: serial, Records: c.count}
	var record any // the log's record=<nil> for a change without one, as before
	if r != nil {
		ev.Record = r.String()
		record = ev.Record
	}
	s.events.Emit(ev)
	s.log.Info("zone changed", "op", op, "record", record, "serial", serial, "records", c.count)
	return nil
}

// Stats counts the queries answered since the server was built.
type Stats struct {
	Queries, NoError, NXDomain, Refused, Other, Malformed, Panics uint64
}

func (st Stats) event() obs.DNSStats {
	return obs.DNSStats{Queries: st.Queries, NoError: st.NoError, NXDomain: st.NXDomain,
		Refused: st.Refused, Other: st.Other, Malformed: st.Malformed}
}

type counters struct {
	queries, noerror, nxdomain, refused, other, malformed, panics atomic.Uint64
}

// Stats returns the query counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	return Stats{Queries: c.queries.Load(), NoError: c.noerror.Load(), NXDomain: c.nxdomain.Load(),
		Refused: c.refused.Load(), Other: c.other.Load(), Malformed: c.malformed.Load(), Panics: c.panics.Load()}
}
