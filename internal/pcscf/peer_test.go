package pcscf_test

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

// fakePeer is sipxtest.Peer with its handlers registered before its endpoint serves: sipxtest.StartPeer registers
// them on an endpoint that already serves, which the race detector reports (sipgo's handler map is written
// while its reader goroutine runs). Same behaviour otherwise: it records every request, answers with its
// Answer (default 200 OK, with a To tag and a Contact for INVITE) and sends from its own address.
type fakePeer struct {
	Name string
	EP   *sipx.Endpoint

	mu     sync.Mutex
	got    []*sip.Request
	answer sipxtest.Answer
}

func startPeer(host string) *fakePeer {
	ep, err := sipx.NewEndpoint(host, "127.0.0.1:0", sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	p := &fakePeer{Name: host, EP: ep}
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

func (p *fakePeer) Addr() string { return p.EP.Addr }

func (p *fakePeer) OnRequest(a sipxtest.Answer) {
	p.mu.Lock()
	p.answer = a
	p.mu.Unlock()
}

func (p *fakePeer) Received(method sip.RequestMethod) []*sip.Request {
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

func (p *fakePeer) Count(method sip.RequestMethod) int { return len(p.Received(method)) }

func (p *fakePeer) Last(method sip.RequestMethod) *sip.Request {
	r := p.Received(method)
	if len(r) == 0 {
		return nil
	}
	return r[len(r)-1]
}

func (p *fakePeer) Send(ctx context.Context, req *sip.Request, dst string) (*sip.Response, error) {
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

func (p *fakePeer) MustSend(req *sip.Request, dst string) *sip.Response {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := p.Send(ctx, req, dst)
	Expect(err).NotTo(HaveOccurred(), "no final response to %s from %s", req.Method, dst)
	return res
}
