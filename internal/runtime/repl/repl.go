// Package repl is the member-to-member state replication of the pool-sync, active-standby and mutual protection
// schemes (docs/schemes.md): every change of a member's registration state is pushed at once, as one JSON line over a
// TCP connection, to each of its replication peers, which apply it to their own state. A member that starts
// (or restarts empty) says hello to its peers, and each answers with a full copy of its state. There is no
// HSS involvement, no acknowledgement and no retry: a change a peer misses while it is down reaches it with the
// next full copy, when it comes back and says hello.
//
// Every message sent is an event "repl_send" {"peer", "bytes", "op"} in the node's events file: the report counts
// them as the signalling cost of replication.
//
// Only the configured peers are believed (anything else on the lab network is an attacker: a put installs a
// registration). An incoming connection is accepted only from the IP address of a configured peer (the port is
// not compared: the dialler's source port is ephemeral), and every message on it must name a configured peer in
// From, and that peer's configured IP must be the connection's; the first message fixes the peer a connection
// speaks for. Anything else — an unknown sender, a sender at the wrong address, a second name on one connection,
// a line that is not a message, a line longer than MaxMessage, one connection more than MaxConns — is dropped,
// counted (Refused), logged and recorded once as an event "repl_refused" {"remote", "from", "reason"}, and the
// connection closed. In the local lab every node is on 127.0.0.1, so the address check cannot tell the processes
// apart there: what holds is the name check alone, which any local process that knows a peer's name can pass.
// The names are not secrets; this is a filter against strays and the wrong host, not authentication.
//
// Limits: a line (one message) is at most MaxMessage bytes; at most MaxConns incoming connections are served at
// once; an incoming connection silent for IdleTimeout (5 s before its first message) is closed, and a sender
// closes its own connection after half that idle time and dials again for the next change, so it never writes
// into one the peer has closed; every write to a peer has a WriteTimeout; a peer gets at most one full copy per
// HelloInterval however often it says hello (the hellos inside an interval are answered by one copy at its end).
package repl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Operations of a message.
const (
	OpPut    = "put"    // Key now has Data
	OpDelete = "delete" // Key is gone
	OpHello  = "hello"  // the sender (re)started: send it a full copy of your state; Key is its address

	opReconnect = "reconnect" // internal, never sent: drop the connection to the peer and dial it again
)

// Message is one line on the wire.
type Message struct {
	Op   string          `json:"op"`
	From string          `json:"from"` // the sender's node name
	Key  string          `json:"key,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Defaults of the limits in Config.
const (
	DefaultMaxMessage    = 64 << 10
	DefaultIdleTimeout   = 2 * time.Minute
	DefaultWriteTimeout  = time.Second
	DefaultHelloInterval = time.Second
)

// Config says where a member listens, whom it copies its changes to and whom it believes.
type Config struct {
	Node      string   // the member's name, in messages and events
	Listen    string   // ip:port, TCP
	Peers     []string // ip:port (TCP) of the peers
	PeerNames []string // node names of the peers, PeerNames[i] at Peers[i]: a message's From must be one

	// Limits; zero is the default.
	MaxMessage    int           // bytes in one line (DefaultMaxMessage)
	MaxConns      int           // incoming connections served at once (2 per peer)
	IdleTimeout   time.Duration // an incoming connection silent this long is closed (DefaultIdleTimeout)
	WriteTimeout  time.Duration // one write to a peer (DefaultWriteTimeout)
	HelloInterval time.Duration // at most one full copy per peer per interval (DefaultHelloInterval)
}

// Validate names the bad field.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("repl: listen: must be set")
	case len(c.Peers) == 0:
		return errors.New("repl: peers: none")
	case len(c.PeerNames) != len(c.Peers):
		return fmt.Errorf("repl: peer_names: %d names for %d peers", len(c.PeerNames), len(c.Peers))
	case c.Node == "":
		return errors.New("repl: node: must be set")
	case c.MaxMessage < 0, c.MaxConns < 0, c.IdleTimeout < 0, c.WriteTimeout < 0, c.HelloInterval < 0:
		return errors.New("repl: limits: must not be negative")
	}
	names := map[string]bool{}
	for i, a := range c.Peers {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("repl: peers[%d]: %q: want ip:port", i, a)
		}
		n := c.PeerNames[i]
		switch {
		case n == "":
			return fmt.Errorf("repl: peer_names[%d]: empty", i)
		case names[n]:
			return fmt.Errorf("repl: peer_names[%d]: %q listed twice", i, n)
		}
		names[n] = true
	}
	return nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// State is what a network function gives the replicator: Apply a peer's change, and Snapshot its own state (as
// put messages) for a peer that says hello.
type State interface {
	Apply(m Message)
	Snapshot() []Message
}

// Replicator pushes a member's changes to its peers and applies theirs.
type Replicator struct {
	cfg    Config
	state  State
	rec    *obs.Recorder
	log    *slog.Logger
	ln     net.Listener
	peers  map[string]*peerConn // by address; fixed after New
	byName map[string]*peerConn // by node name; fixed after New

	refused atomic.Int64
	// refusal events are throttled (a flood of connections must not fill the events file)
	evMu         sync.Mutex
	evWindow     time.Time
	evCount      int
	evSuppressed int
}

type peerConn struct {
	addr  string
	name  string
	queue chan Message
	conn  net.Conn // owned by the peer's sender goroutine

	ipsOnce sync.Once
	ips     []netip.Addr // the addresses connections from this peer come from (the host of addr)

	copyMu      sync.Mutex
	lastCopy    time.Time
	copyPending bool
}

// queueLen bounds the messages waiting for one peer; beyond it changes are dropped (and counted in the log).
const queueLen = 1 << 14

// identifyTimeout is how long an incoming connection may stay silent before its first message (which says
// which peer it is), when IdleTimeout is longer: a slot is not held for long by someone who says nothing.
const identifyTimeout = 5 * time.Second

// refusalEvents is the number of repl_refused events recorded per second at most; the others are counted in the
// next one's "suppressed".
const refusalEvents = 20

// New builds a replicator; Run listens and says hello.
func New(cfg Config, state State, rec *obs.Recorder, log *slog.Logger) (*Replicator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	cfg.MaxMessage = orDefault(cfg.MaxMessage, DefaultMaxMessage)
	cfg.MaxConns = orDefault(cfg.MaxConns, 2*len(cfg.Peers))
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.HelloInterval = orDefault(cfg.HelloInterval, DefaultHelloInterval)
	r := &Replicator{cfg: cfg, state: state, rec: rec, log: log, peers: map[string]*peerConn{},
		byName: map[string]*peerConn{}}
	for i, a := range cfg.Peers {
		p := &peerConn{addr: a, name: cfg.PeerNames[i], queue: make(chan Message, queueLen)}
		r.peers[a] = p
		r.byName[p.name] = p
	}
	return r, nil
}

// Refused returns how many connections the replicator has refused or closed for a message it does not believe.
func (r *Replicator) Refused() int64 { return r.refused.Load() }

// Open is New and Listen for a member whose pool replicates: nil cfg (no replication) gives nil and no error.
func Open(cfg *Config, state State, rec *obs.Recorder, log *slog.Logger) (*Replicator, error) {
	if cfg == nil {
		return nil, nil
	}
	r, err := New(*cfg, state, rec, log)
	if err != nil {
		return nil, err
	}
	if err := r.Listen(); err != nil {
		return nil, err
	}
	return r, nil
}

// Start runs the replicator in the background until ctx is done; the returned function waits until it has
// stopped. On a nil replicator both do nothing.
func (r *Replicator) Start(ctx context.Context) (wait func()) {
	if r == nil {
		return func() {}
	}
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	return func() { <-errc }
}

// Listen binds the TCP listener (Run calls it when it has not been called).
func (r *Replicator) Listen() error {
	if r.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", r.cfg.Listen)
	if err != nil {
		return fmt.Errorf("repl: listen: %w", err)
	}
	r.ln = ln
	return nil
}

// Run accepts the peers' connections and says hello to every peer, until ctx is done.
func (r *Replicator) Run(ctx context.Context) error {
	if err := r.Listen(); err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		_ = r.ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, p := range r.peers {
		wg.Go(func() { r.sender(ctx, p) })
		r.enqueue(p.addr, Message{Op: OpHello, Key: r.cfg.Listen})
	}
	slots := make(chan struct{}, r.cfg.MaxConns)
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("repl: accept: %w", err)
		}
		ip := remoteIP(c)
		if !r.fromPeerIP(ctx, ip) {
			r.refuse(c, "", "not a peer's address")
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			r.refuse(c, "", "too many connections")
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			r.serve(ctx, c, ip)
		})
	}
}

func remoteIP(c net.Conn) netip.Addr {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// peerIPs returns the addresses of a peer: its host when that is an IP, else what it resolves to (once).
func (r *Replicator) peerIPs(ctx context.Context, p *peerConn) []netip.Addr {
	p.ipsOnce.Do(func() {
		host, _, _ := net.SplitHostPort(p.addr)
		if ip, err := netip.ParseAddr(host); err == nil {
			p.ips = []netip.Addr{ip.Unmap()}
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			r.log.Warn("repl: peer address unresolved, its connections are refused", "peer", p.addr, "err", err)
		}
		for _, ip := range ips {
			p.ips = append(p.ips, ip.Unmap())
		}
	})
	return p.ips
}

func (r *Replicator) fromPeerIP(ctx context.Context, ip netip.Addr) bool {
	for _, p := range r.peers {
		if r.peerAt(ctx, p, ip) {
			return true
		}
	}
	return false
}

func (r *Replicator) peerAt(ctx context.Context, p *peerConn, ip netip.Addr) bool {
	for _, a := range r.peerIPs(ctx, p) {
		if a == ip {
			return true
		}
	}
	return false
}

// refuse closes a connection it does not believe, counts it, logs it and records it as an event (throttled).
func (r *Replicator) refuse(c net.Conn, from, reason string) {
	defer c.Close()
	r.refused.Add(1)
	remote := c.RemoteAddr().String()
	r.evMu.Lock()
	now := time.Now()
	if now.Sub(r.evWindow) >= time.Second {
		r.evWindow, r.evCount = now, 0
	}
	emit := r.evCount < refusalEvents
	suppressed := 0
	if emit {
		r.evCount++
		suppressed, r.evSuppressed = r.evSuppressed, 0
	} else {
		r.evSuppressed++
	}
	r.evMu.Unlock()
	if !emit {
		return
	}
	attrs := []any{"peer", remote, "reason", reason}
	if from != "" {
		attrs = append(attrs, "from", from)
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	r.log.Warn("repl: connection refused", attrs...)
	r.rec.Emit(obs.ReplRefused{Remote: remote, Reason: reason, From: from, Suppressed: suppressed})
}

// serve reads one incoming connection from ip (already known to be a peer's address) until it ends, is idle
// too long, or says something the replicator does not believe.
func (r *Replicator) serve(ctx context.Context, c net.Conn, ip netip.Addr) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, min(4096, r.cfg.MaxMessage+1)), r.cfg.MaxMessage+1) // +1: the newline
	var speaker *peerConn                                                         // the peer this connection speaks for, fixed by its first message
	for {
		wait := r.cfg.IdleTimeout
		if speaker == nil {
			wait = min(wait, identifyTimeout) // a peer's sender writes at once when it dials
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		if !sc.Scan() {
			break
		}
		line := sc.Bytes()
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			r.refuse(c, "", "not a message")
			return
		}
		p := r.byName[m.From]
		switch {
		case p == nil:
			r.refuse(c, m.From, "not a peer")
			return
		case speaker != nil && p != speaker:
			r.refuse(c, m.From, "a second peer on one connection")
			return
		case speaker == nil && !r.peerAt(ctx, p, ip):
			r.refuse(c, m.From, "not at the peer's address")
			return
		}
		speaker = p
		r.rec.Emit(obs.ReplRecv{Peer: m.From, Op: m.Op, Bytes: len(line) + 1})
		switch m.Op {
		case OpHello:
			// The peer started (empty): a full copy of our state to it, at its configured address (Key is the
			// address it listens on, which may be a wildcard), on a new connection (the old one went to the
			// process that died).
			r.requestCopy(ctx, p)
		case OpPut, OpDelete:
			r.state.Apply(m)
		default:
			r.log.Debug("repl: unknown op ignored", "peer", m.From, "op", m.Op)
		}
	}
	err := sc.Err()
	var ne net.Error
	switch {
	case errors.Is(err, bufio.ErrTooLong):
		from := ""
		if speaker != nil {
			from = speaker.name
		}
		r.refuse(c, from, "message too long")
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		r.log.Debug("repl: idle connection closed", "peer", c.RemoteAddr().String())
	}
}

// requestCopy answers a hello: a full copy now, or — when the peer had one less than HelloInterval ago — one
// at the end of the interval, whatever the number of hellos in between.
func (r *Replicator) requestCopy(ctx context.Context, p *peerConn) {
	p.copyMu.Lock()
	if p.copyPending {
		p.copyMu.Unlock()
		return
	}
	wait := r.cfg.HelloInterval - time.Since(p.lastCopy)
	if wait <= 0 {
		p.lastCopy = time.Now()
		p.copyMu.Unlock()
		r.fullCopy(p.addr)
		return
	}
	p.copyPending = true
	p.copyMu.Unlock()
	time.AfterFunc(wait, func() {
		p.copyMu.Lock()
		p.copyPending = false
		p.lastCopy = time.Now()
		p.copyMu.Unlock()
		if ctx.Err() == nil {
			r.fullCopy(p.addr)
		}
	})
}

// fullCopy sends the whole state to one peer on a new connection (it may already have some of it: puts are
// idempotent).
func (r *Replicator) fullCopy(addr string) {
	r.enqueue(addr, Message{Op: opReconnect})
	for _, m := range r.state.Snapshot() {
		r.enqueue(addr, m)
	}
}

// Put pushes a change to every peer.
func (r *Replicator) Put(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		r.log.Warn("repl: encode", "key", key, "err", err)
		return
	}
	r.broadcast(Message{Op: OpPut, Key: key, Data: b})
}

// Delete pushes a removal to every peer.
func (r *Replicator) Delete(key string) { r.broadcast(Message{Op: OpDelete, Key: key}) }

func (r *Replicator) broadcast(m Message) {
	for _, p := range r.cfg.Peers {
		r.enqueue(p, m)
	}
}

// enqueue hands a message to a peer's sender; it never blocks a network function.
func (r *Replicator) enqueue(addr string, m Message) {
	p := r.peers[addr]
	if p == nil {
		return
	}
	select {
	case p.queue <- m:
	default:
		r.log.Warn("repl: queue full, change dropped", "peer", addr, "key", m.Key)
	}
}

// sender writes one peer's messages in order until ctx is done. It closes its connection after half the idle
// timeout without a message, before the peer would (a write into a connection the peer has closed can succeed
// locally and still be lost).
func (r *Replicator) sender(ctx context.Context, p *peerConn) {
	idle := time.NewTimer(r.cfg.IdleTimeout / 2)
	defer idle.Stop()
	closeConn := func() {
		if p.conn != nil {
			_ = p.conn.Close()
			p.conn = nil
		}
	}
	defer closeConn()
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle.C:
			closeConn()
		case m := <-p.queue:
			idle.Reset(r.cfg.IdleTimeout / 2)
			if m.Op == opReconnect {
				closeConn()
				continue
			}
			r.send(p, m)
		}
	}
}

// send writes one message to one peer on its connection, dialling it when there is none; a peer that cannot be
// reached misses the message (it gets a full copy when it says hello).
func (r *Replicator) send(p *peerConn, m Message) {
	addr := p.addr
	m.From = r.cfg.Node
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	if len(b) > r.cfg.MaxMessage {
		r.log.Warn("repl: message too long for the peers, not sent", "peer", addr, "key", m.Key, "bytes", len(b))
		return
	}
	b = append(b, '\n')
	for attempt := 0; attempt < 2; attempt++ {
		if p.conn == nil {
			c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
			if err != nil {
				r.log.Debug("repl: peer unreachable", "peer", addr, "err", err)
				return
			}
			p.conn = c
		}
		_ = p.conn.SetWriteDeadline(time.Now().Add(r.cfg.WriteTimeout))
		if _, err := p.conn.Write(b); err != nil {
			_ = p.conn.Close()
			p.conn = nil // a stale connection (the peer restarted): dial again once
			continue
		}
		r.rec.Emit(obs.ReplSend{Peer: addr, Bytes: len(b), Op: m.Op, Key: m.Key})
		return
	}
}
