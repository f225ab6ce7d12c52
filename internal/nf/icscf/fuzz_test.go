package icscf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// fuzzHSS answers by a mode the fuzzer chooses per input.
type fuzzHSS struct {
	mu   sync.Mutex
	mode uint8
}

func (h *fuzzHSS) answer() (string, *cx.ServerCapabilities, error) {
	h.mu.Lock()
	m := h.mode % 5
	h.mu.Unlock()
	switch m {
	case 0:
		return "sip:scscf1.ims.test", nil, nil
	case 1:
		return "", nil, &cx.Error{Command: "Cx", Result: cx.ErrorUserUnknown}
	case 2:
		return "", nil, errors.New("hss unreachable")
	case 3:
		return "", &cx.ServerCapabilities{ServerNames: []string{"sip:scscf1.ims.test", "<garbage", ""}}, nil
	default:
		return "sip:nowhere.ims.test;x=1", &cx.ServerCapabilities{}, nil
	}
}

func (h *fuzzHSS) UserAuthorization(context.Context, *cx.UAR) (*cx.UAA, error) {
	name, caps, err := h.answer()
	if err != nil {
		return nil, err
	}
	return &cx.UAA{Result: cx.Success, ServerName: name, ServerCapabilities: caps}, nil
}

func (h *fuzzHSS) LocationInfo(context.Context, *cx.LIR) (*cx.LIA, error) {
	name, caps, err := h.answer()
	if err != nil {
		return nil, err
	}
	return &cx.LIA{Result: cx.Success, ServerName: name, ServerCapabilities: caps}, nil
}

// fuzzTx is the server transaction of a fuzzed request: it records the responses.
type fuzzTx struct {
	sip.ServerTransaction // nil: a method the handlers should not call panics, which the fuzzer then reports
	mu                    sync.Mutex
	codes                 []int
}

func (t *fuzzTx) Respond(res *sip.Response) error {
	t.mu.Lock()
	t.codes = append(t.codes, res.StatusCode)
	t.mu.Unlock()
	return nil
}

func (t *fuzzTx) OnCancel(sip.FnTxCancel) bool { return true }

func (t *fuzzTx) final() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.codes {
		if c >= 200 {
			return true
		}
	}
	return false
}

// fuzzNode is the I-CSCF of the fuzz target, built once per process, with a live S-CSCF that answers 200.
var fuzzNode = sync.OnceValues(func() (*Node, error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background() // lives as long as the fuzzing process
	scscf, err := sipx.NewEndpoint("scscf1.ims.test", "127.0.0.1:0", log)
	if err != nil {
		return nil, err
	}
	ok := func(req *sip.Request, tx sip.ServerTransaction) {
		_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	}
	for _, m := range []sip.RequestMethod{sip.INVITE, sip.BYE, sip.MESSAGE, sip.REGISTER, sip.OPTIONS, sip.UPDATE,
		sip.INFO, sip.PRACK, sip.NOTIFY, sip.SUBSCRIBE, sip.REFER, sip.PUBLISH} {
		scscf.Server.OnRequest(m, ok)
	}
	go func() { _ = scscf.Serve(ctx) }()
	ep, err := sipx.NewEndpoint("icscf.ims.test", "127.0.0.1:0", log)
	if err != nil {
		return nil, err
	}
	t := pool.Target{Name: "scscf1.ims.test", Addr: scscf.Addr, Priority: 1, Weight: 1}
	res := pool.NewStaticResolver().SetSRV("_sip._udp.scscf1.ims.test", t).SetSRV("_sip._udp.scscf.ims.test", t)
	n, err := New(Config{Host: "icscf.ims.test", Listen: ep.Addr, Domain: "ims.test", SCSCFPool: "scscf.ims.test",
		Peers:   sipx.Peers{BAC: []string{"127.0.0.1:1"}, PCSCF: []string{"127.0.0.1:2"}, SCSCF: []string{"127.0.0.1:3"}},
		Forward: sipx.ForwarderConfig{NoAnswer: 100 * time.Millisecond, MaxAttempts: 2}},
		&fuzzHSS{}, ep, res, nil, obs.NewRecorder(io.Discard, "icscf"), log)
	if err != nil {
		return nil, err
	}
	go func() { _ = ep.Serve(ctx) }()
	<-scscf.Listening()
	<-ep.Listening()
	n.px.Start(ctx)
	return n, nil
})

var fuzzSources = []string{"127.0.0.1:9" /* untrusted */, "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}

// FuzzHandlers feeds arbitrary SIP messages, from a sender of each role and with each HSS behaviour, to the
// I-CSCF's handlers, called directly (no recover: a panic fails the target). Every request but ACK must get a
// final answer, and no handler may run longer than 10 s. The prelude's part that matters to the handlers is
// reproduced: the role, the identity headers removed from outside the trust domain, our Route entry popped.
// Route markers from outside the trust domain are left in place (the prelude refuses them) so that the handlers
// also see what they must never trust.
func FuzzHandlers(f *testing.F) {
	seeds := []string{
		"REGISTER sip:ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK1\r\nFrom: <sip:user0001@ims.test>;tag=1\r\n" +
			"To: <sip:user0001@ims.test>\r\nCall-ID: r1\r\nCSeq: 1 REGISTER\r\nMax-Forwards: 70\r\nContact: <sip:user0001@127.0.0.1:5999>\r\n" +
			"Authorization: Digest username=\"user0001@ims.test\", realm=\"ims.test\", nonce=\"n\", uri=\"sip:ims.test\", response=\"r\"\r\n" +
			"Expires: 600\r\nContent-Length: 0\r\n\r\n",
		"INVITE sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK2\r\nFrom: <sip:user0001@ims.test>;tag=1\r\n" +
			"To: <sip:user0002@ims.test>\r\nCall-ID: i1\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\nContact: <sip:user0001@127.0.0.1:5999>\r\n" +
			"P-Asserted-Identity: <sip:user0001@ims.test>\r\nContent-Length: 0\r\n\r\n",
		"INVITE sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK3\r\nFrom: <sip:user0001@ims.test>;tag=1\r\n" +
			"To: <sip:user0002@ims.test>\r\nCall-ID: i2\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\nContact: <sip:user0001@127.0.0.1:5999>\r\n" +
			"Route: <sip:icscf.ims.test;lr;orig;restore=1>\r\nP-Asserted-Identity: <sip:user0001@ims.test>\r\nContent-Length: 0\r\n\r\n",
		"BYE sip:user0002@127.0.0.1:5998 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK4\r\nFrom: <sip:user0001@ims.test>;tag=1\r\n" +
			"To: <sip:user0002@ims.test>;tag=2\r\nCall-ID: i1\r\nCSeq: 2 BYE\r\nMax-Forwards: 70\r\n" +
			"Route: <sip:icscf.ims.test;lr>\r\nRoute: <sip:scscf1.ims.test;lr>\r\nContent-Length: 0\r\n\r\n",
		"ACK sip:user0002@127.0.0.1:5998 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK5\r\nFrom: <sip:user0001@ims.test>;tag=1\r\n" +
			"To: <sip:user0002@ims.test>;tag=2\r\nCall-ID: i1\r\nCSeq: 1 ACK\r\nMax-Forwards: 70\r\nRoute: <sip:icscf.ims.test;lr>\r\nContent-Length: 0\r\n\r\n",
		"MESSAGE tel:+15551234 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK6\r\nFrom: <sip:user0001@ims.test>;tag=1\r\n" +
			"To: <tel:+15551234>\r\nCall-ID: m1\r\nCSeq: 1 MESSAGE\r\nMax-Forwards: 70\r\nRoute: <sip:orig@icscf.ims.test;lr>\r\n" +
			"P-Asserted-Identity: tel:+15550000\r\nContent-Length: 0\r\n\r\n",
	}
	for i, s := range seeds {
		for role := range fuzzSources {
			f.Add(uint8(role), uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, role, hssMode uint8, data []byte) {
		n, err := fuzzNode()
		if err != nil {
			t.Fatal(err)
		}
		msg, err := sip.NewParser().ParseSIP(data)
		if err != nil {
			return
		}
		req, ok := msg.(*sip.Request)
		if !ok {
			return
		}
		// What sipgo's transaction layer needs before a handler is called.
		if req.Via() == nil || req.CSeq() == nil || req.From() == nil || req.To() == nil || req.CallID() == nil {
			return
		}
		src := fuzzSources[int(role)%len(fuzzSources)]
		req.SetSource(src)
		n.hss.(*fuzzHSS).mu.Lock()
		n.hss.(*fuzzHSS).mode = hssMode
		n.hss.(*fuzzHSS).mu.Unlock()

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tx := &fuzzTx{}
		r := &sipx.Request{Ctx: ctx, Req: req, Out: req.Clone(), Tx: tx, Role: n.px.Trust.RoleOf(src)}
		if !r.Role.InTrustDomain() {
			sipx.RemoveHeaders(r.Out, sipx.HdrPAssertedIdentity)
			if r.Role != sipx.RoleBAC {
				sipx.RemoveHeaders(r.Out, sipx.HdrPPreferredIdentity)
			}
		}
		r.Top, r.Popped = n.px.PopSelf(r.Out)
		var h func(*sipx.Request)
		switch req.Method {
		case sip.REGISTER:
			h = n.onRegister
		case sip.ACK:
			r.Tx = nil
			h = n.onAck
		case sip.CANCEL, sip.OPTIONS:
			return // answered by sipgo / the proxy
		default:
			h = n.onRequest
		}
		done := make(chan struct{})
		panicked := make(chan any, 1)
		go func() {
			defer close(done)
			defer func() {
				if v := recover(); v != nil {
					panicked <- fmt.Sprintf("%v\n%s", v, debug.Stack())
				}
			}()
			h(r)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("handler hung on %s from %s:\n%s", req.Method, src, strings.ReplaceAll(string(data), "\r", ""))
		}
		select {
		case v := <-panicked:
			t.Fatalf("handler panicked on %s from %s: %v\n%s", req.Method, src, v, data)
		default:
		}
		if req.Method != sip.ACK && !tx.final() {
			t.Fatalf("no final answer to %s from %s:\n%s", req.Method, src, data)
		}
	})
}
