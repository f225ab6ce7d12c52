package scscf_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/sipx"
	"github.com/imslab/quasipool/internal/sipx/sipxtest"
)

// peer is sipxtest.Peer with one difference: its handlers are registered before its endpoint serves.
// sipxtest.StartPeer registers them on an endpoint that already serves, and sipgo's handler map has no lock, so
// the race detector reports the first request a peer receives (sipx should register before serving).
type peer struct {
	Name string
	EP   *sipx.Endpoint

	mu  sync.Mutex
	got []*sip.Request
}

func startPeer(host string) *peer {
	ep, err := sipx.NewEndpoint(host, "127.0.0.1:0", sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	p := &peer{Name: host, EP: ep}
	h := func(req *sip.Request, tx sip.ServerTransaction) {
		p.mu.Lock()
		p.got = append(p.got, req)
		p.mu.Unlock()
		res := sip.NewResponseFromRequest(req, 200, "scripted", nil)
		if req.IsInvite() {
			if to := res.To(); to != nil {
				if _, ok := to.Params.Get("tag"); !ok {
					to.Params.Add("tag", "peer-"+sip.GenerateBranchN(6))
				}
			}
			res.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "peer", Host: "127.0.0.1", Port: ep.Port()}})
		}
		_ = tx.Respond(res)
	}
	for _, m := range []sip.RequestMethod{sip.INVITE, sip.BYE, sip.MESSAGE, sip.REGISTER, sip.OPTIONS, sip.UPDATE, sip.INFO} {
		ep.Server.OnRequest(m, h)
	}
	ep.Server.OnAck(func(req *sip.Request, _ sip.ServerTransaction) {
		p.mu.Lock()
		p.got = append(p.got, req)
		p.mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ep.Serve(ctx) }()
	DeferCleanup(func() { cancel(); <-done })
	Eventually(ep.Listening()).Should(BeClosed())
	return p
}

func (p *peer) Addr() string { return p.EP.Addr }

func (p *peer) Received(method sip.RequestMethod) []*sip.Request {
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

func (p *peer) Count(method sip.RequestMethod) int { return len(p.Received(method)) }

func (p *peer) Last(method sip.RequestMethod) *sip.Request {
	r := p.Received(method)
	if len(r) == 0 {
		return nil
	}
	return r[len(r)-1]
}

// Send sends req from the peer's address as a client transaction and returns the final response.
func (p *peer) Send(ctx context.Context, req *sip.Request, dst string) (*sip.Response, error) {
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
			if res == nil || res.IsProvisional() {
				continue
			}
			return res, nil
		case <-tx.Done():
			return nil, fmt.Errorf("%s to %s: transaction ended: %v", req.Method, dst, tx.Err())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (p *peer) MustSend(req *sip.Request, dst string) *sip.Response {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := p.Send(ctx, req, dst)
	Expect(err).NotTo(HaveOccurred(), "no final response to %s from %s", req.Method, dst)
	return res
}

// Fire sends req without a transaction (an ACK).
func (p *peer) Fire(req *sip.Request, dst string) {
	out := req.Clone()
	out.PrependHeader(p.EP.Via())
	p.EP.Bind(out)
	out.SetDestination(dst)
	Expect(p.EP.Client.WriteRequest(out, func(*sipgo.Client, *sip.Request) error { return nil })).To(Succeed())
}
