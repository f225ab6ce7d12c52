// Package repl is the member-to-member state replication of the pool-sync and active-standby protection schemes
// (docs/schemes.md): every change of a member's registration state is pushed at once, as one JSON line over a
// TCP connection, to each of its replication peers, which apply it to their own state. A member that starts
// (or restarts empty) says hello to its peers, and each answers with a full copy of its state. There is no
// HSS involvement, no acknowledgement and no retry: a change a peer misses while it is down reaches it with the
// next full copy, when it comes back and says hello.
//
// Every message sent is an event "repl_send" {"peer", "bytes", "op"} in the node's events file: the report counts
// them as the signalling cost of replication.
package repl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/imslab/quasipool/internal/obs"
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

// Config says where a member listens and whom it copies its changes to.
type Config struct {
	Node   string   // the member's name, in messages and events
	Listen string   // ip:port, TCP
	Peers  []string // ip:port (TCP) of the peers
}

// Validate names the bad field.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("repl: listen: must be set")
	case len(c.Peers) == 0:
		return errors.New("repl: peers: none")
	}
	return nil
}

// State is what a network function gives the replicator: Apply a peer's change, and Snapshot its own state (as
// put messages) for a peer that says hello.
type State interface {
	Apply(m Message)
	Snapshot() []Message
}

// Replicator pushes a member's changes to its peers and applies theirs.
type Replicator struct {
	cfg   Config
	state State
	rec   *obs.Recorder
	log   *slog.Logger
	ln    net.Listener
	peers map[string]*peerConn // by address; fixed after New
}

type peerConn struct {
	addr  string
	queue chan Message
	conn  net.Conn // owned by the peer's sender goroutine
}

// queueLen bounds the messages waiting for one peer; beyond it changes are dropped (and counted in the log).
const queueLen = 1 << 14

// New builds a replicator; Run listens and says hello.
func New(cfg Config, state State, rec *obs.Recorder, log *slog.Logger) (*Replicator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Replicator{cfg: cfg, state: state, rec: rec, log: log, peers: map[string]*peerConn{}}
	for _, p := range cfg.Peers {
		r.peers[p] = &peerConn{addr: p, queue: make(chan Message, queueLen)}
	}
	return r, nil
}

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
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("repl: accept: %w", err)
		}
		wg.Go(func() { r.serve(ctx, c) })
	}
}

func (r *Replicator) serve(ctx context.Context, c net.Conn) {
	defer c.Close()
	go func() { <-ctx.Done(); _ = c.Close() }()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var m Message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			r.log.Warn("repl: bad message", "peer", c.RemoteAddr().String(), "err", err)
			continue
		}
		r.rec.Emit("repl_recv", map[string]any{"peer": m.From, "op": m.Op, "bytes": len(sc.Bytes()) + 1})
		if m.Op == OpHello {
			// The peer started (empty): a full copy of our state to it (Key is its replication address), on a
			// new connection (the old one went to the process that died).
			r.enqueue(m.Key, Message{Op: opReconnect})
			r.fullCopy(m.Key)
			continue
		}
		r.state.Apply(m)
	}
}

// fullCopy sends the whole state to one peer (it may already have some of it: puts are idempotent).
func (r *Replicator) fullCopy(addr string) {
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

// sender writes one peer's messages in order until ctx is done.
func (r *Replicator) sender(ctx context.Context, p *peerConn) {
	defer func() {
		if p.conn != nil {
			_ = p.conn.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-p.queue:
			if m.Op == opReconnect {
				if p.conn != nil {
					_ = p.conn.Close()
					p.conn = nil
				}
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
		_ = p.conn.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := p.conn.Write(b); err != nil {
			_ = p.conn.Close()
			p.conn = nil // a stale connection (the peer restarted): dial again once
			continue
		}
		r.rec.Emit("repl_send", map[string]any{"peer": addr, "bytes": len(b), "op": m.Op, "key": m.Key})
		return
	}
}
