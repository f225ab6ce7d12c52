// Package sipxtest is the in-process test harness of the SIP network functions: fake peers on loopback ports in
// the test's own process (a phone, a BAC, a P-CSCF, an S-CSCF, an attacker: what a peer is depends only on the
// address it sends from and on how the node under test is configured), request builders, and an event sink.
// It uses Ginkgo and Gomega: call it from specs.
package sipxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2" //nolint:revive // test harness
	. "github.com/onsi/gomega"    //nolint:revive // test harness

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// Log is a logger that writes to the Ginkgo writer.
func Log() *slog.Logger {
	return slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Bind binds a SIP endpoint for host on 127.0.0.1 (a free port) without serving it yet: register the handlers
// (build the node) first, then Serve. Handlers registered on an endpoint that already serves race with its
// reader goroutine (the race detector sees no happens-before edge through UDP).
func Bind(host string) *sipx.Endpoint {
	ep, err := sipx.NewEndpoint(host, "127.0.0.1:0", Log())
	Expect(err).NotTo(HaveOccurred())
	return ep
}

// Serve serves an endpoint until the spec ends and returns once it can send and receive.
func Serve(ep *sipx.Endpoint) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ep.Serve(ctx) }()
	DeferCleanup(func() { cancel(); <-done })
	Eventually(ep.Listening()).Should(BeClosed())
}

// Endpoint binds and serves an endpoint at once (for endpoints whose handlers need no registration).
func Endpoint(host string) *sipx.Endpoint {
	ep := Bind(host)
	Serve(ep)
	return ep
}

// Answer decides how a peer answers a request: the status code, extra headers, and whether to answer at all
// (code 0: no answer).
type Answer func(req *sip.Request) (code int, hdrs []sip.Header)

// Peer is a fake SIP node on 127.0.0.1: it records every request it receives and answers them with its Answer
// (default: 200 OK, with a To tag and a Contact for INVITE). It can send requests from its own address.
type Peer struct {
	Name string
	EP   *sipx.Endpoint

	mu     sync.Mutex
	got    []*sip.Request
	answer Answer
}

// StartPeer starts a peer named host (its Contact host and Via).
func StartPeer(host string) *Peer {
	p := &Peer{Name: host, EP: Bind(host)}
	h := func(req *sip.Request, tx sip.ServerTransaction) {
		p.mu.Lock()
		p.got = append(p.got, req)
		a := p.answer
		p.mu.Unlock()
		code, hdrs := 200, []sip.Header(nil)
		if a != nil {
			code, hdrs = a(req)
		}
		if code == 0 {
			return
		}
		res := sip.NewResponseFromRequest(req, code, "scripted", nil)
		if req.IsInvite() && code >= 200 && code < 300 {
			if to := res.To(); to != nil {
				if _, ok := to.Params.Get("tag"); !ok {
					to.Params.Add("tag", "peer-"+sip.GenerateBranchN(6))
				}
			}
			res.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "peer", Host: "127.0.0.1", Port: p.EP.Port()}})
		}
		for _, x := range hdrs {
			res.AppendHeader(x)
		}
		_ = tx.Respond(res)
	}
	for _, m := range []sip.RequestMethod{sip.INVITE, sip.BYE, sip.MESSAGE, sip.REGISTER, sip.OPTIONS, sip.UPDATE, sip.INFO} {
		p.EP.Server.OnRequest(m, h)
	}
	p.EP.Server.OnAck(func(req *sip.Request, _ sip.ServerTransaction) {
		p.mu.Lock()
		p.got = append(p.got, req)
		p.mu.Unlock()
	})
	Serve(p.EP)
	return p
}

// Addr is where the peer listens and sends from (ip:port).
func (p *Peer) Addr() string { return p.EP.Addr }

// OnRequest sets how the peer answers.
func (p *Peer) OnRequest(a Answer) {
	p.mu.Lock()
	p.answer = a
	p.mu.Unlock()
}

// Received returns the requests received so far with that method ("" = all).
func (p *Peer) Received(method sip.RequestMethod) []*sip.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*sip.Request
	for _, r := range p.got {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// Count returns the number of requests received with that method ("" = all).
func (p *Peer) Count(method sip.RequestMethod) int { return len(p.Received(method)) }

// Last returns the last request received with that method, nil when none.
func (p *Peer) Last(method sip.RequestMethod) *sip.Request {
	r := p.Received(method)
	if len(r) == 0 {
		return nil
	}
	return r[len(r)-1]
}

// Send sends req from the peer's address to dst as a client transaction and returns the final response (nil
// and an error when none came within the context).
func (p *Peer) Send(ctx context.Context, req *sip.Request, dst string) (*sip.Response, error) {
	out := req.Clone()
	out.PrependHeader(p.EP.Via())
	p.EP.Bind(out)
	out.SetDestination(dst)
	tx, err := p.EP.Client.TransactionRequest(ctx, out, func(*sipgo.Client, *sip.Request) error { return nil })
	if err != nil {
		return nil, err
	}
	defer tx.Terminate()
	for {
		select {
		case res := <-tx.Responses():
			if res == nil {
				continue
			}
			if res.IsProvisional() {
				continue
			}
			return res, nil
		case <-tx.Done():
			return nil, fmt.Errorf("sipxtest: %s to %s: transaction ended: %v", req.Method, dst, tx.Err())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// MustSend is Send with a 5 s timeout that fails the spec when no final response came.
func (p *Peer) MustSend(req *sip.Request, dst string) *sip.Response {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := p.Send(ctx, req, dst)
	Expect(err).NotTo(HaveOccurred(), "no final response to %s from %s", req.Method, dst)
	return res
}

// Fire sends req from the peer's address to dst without a transaction (an ACK, or raw bytes from an attacker).
func (p *Peer) Fire(req *sip.Request, dst string) {
	out := req.Clone()
	out.PrependHeader(p.EP.Via())
	p.EP.Bind(out)
	out.SetDestination(dst)
	Expect(p.EP.Client.WriteRequest(out, func(*sipgo.Client, *sip.Request) error { return nil })).To(Succeed())
}

// Request builds a request: method, Request-URI, then headers as "Name: value" lines. From, To, Call-ID, CSeq
// and Max-Forwards get defaults when not given (From/To user0001@ims.test, a fresh Call-ID, CSeq 1, 70).
func Request(method sip.RequestMethod, ruri string, hdrs ...string) *sip.Request {
	u, err := sipx.ParseNameAddr(ruri)
	Expect(err).NotTo(HaveOccurred(), "request-uri %q", ruri)
	req := sip.NewRequest(method, u)
	has := map[string]bool{}
	for _, h := range hdrs {
		name, value, ok := strings.Cut(h, ":")
		Expect(ok).To(BeTrue(), "header %q: want Name: value", h)
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		has[strings.ToLower(name)] = true
		for _, x := range parseHeader(name, value) {
			req.AppendHeader(x)
		}
	}
	def := func(name, value string) {
		if !has[strings.ToLower(name)] {
			for _, x := range parseHeader(name, value) {
				req.AppendHeader(x)
			}
		}
	}
	def("From", "<sip:user0001@ims.test>;tag="+sip.GenerateBranchN(8))
	def("To", "<"+ruri+">")
	def("Call-ID", "sipxtest-"+sip.GenerateBranchN(12))
	def("CSeq", "1 "+string(method))
	def("Max-Forwards", "70")
	if method == sip.INVITE || method == sip.REGISTER {
		def("Contact", "<sip:user0001@127.0.0.1:5999>")
	}
	return req
}

// parseHeader turns one header line into the typed headers sipgo expects (a comma-separated Route or Via line
// gives several), by parsing a minimal message.
func parseHeader(name, value string) []sip.Header {
	raw := "OPTIONS sip:x SIP/2.0\r\n" + name + ": " + value + "\r\nContent-Length: 0\r\n\r\n"
	msg, err := sip.NewParser().ParseSIP([]byte(raw))
	Expect(err).NotTo(HaveOccurred(), "header %s: %s", name, value)
	var out []sip.Header
	for _, h := range msg.(*sip.Request).Headers() {
		if strings.EqualFold(h.Name(), name) || strings.EqualFold(h.Name(), canonical(name)) {
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		out = append(out, sip.NewHeader(name, value))
	}
	return out
}

func canonical(name string) string {
	switch strings.ToLower(name) {
	case "f":
		return "From"
	case "t":
		return "To"
	case "i":
		return "Call-ID"
	case "m":
		return "Contact"
	}
	return name
}

// Events is an event sink: the recorder a node under test emits to, and what it emitted.
type Events struct {
	mu  sync.Mutex
	buf bytes.Buffer
	Rec *obs.Recorder
}

// NewEvents returns an empty sink.
func NewEvents(node string) *Events {
	e := &Events{}
	e.Rec = obs.NewRecorder(syncWriter{e}, node)
	return e
}

type syncWriter struct{ e *Events }

func (w syncWriter) Write(b []byte) (int, error) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	return w.e.buf.Write(b)
}

// Of returns the events of a kind, as decoded JSON objects.
func (e *Events) Of(kind string) []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(e.buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}
