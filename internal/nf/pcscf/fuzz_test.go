package pcscf_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/nf/pcscf"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// fuzzTx is a server transaction that records the responses of the handler.
type fuzzTx struct {
	mu    sync.Mutex
	codes []int
	done  chan struct{}
}

func (t *fuzzTx) Respond(res *sip.Response) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.codes = append(t.codes, res.StatusCode)
	return nil
}
func (t *fuzzTx) Acks() <-chan *sip.Request          { return nil }
func (t *fuzzTx) OnCancel(sip.FnTxCancel) bool       { return true }
func (t *fuzzTx) Terminate()                         {}
func (t *fuzzTx) OnTerminate(sip.FnTxTerminate) bool { return true }
func (t *fuzzTx) Done() <-chan struct{}              { return t.done }
func (t *fuzzTx) Err() error                         { return nil }
func (t *fuzzTx) finals() (n int)                    { t.mu.Lock(); defer t.mu.Unlock(); return t.final() }
func (t *fuzzTx) final() (n int) {
	for _, c := range t.codes {
		if c >= 200 {
			n++
		}
	}
	return n
}

var fuzzBAC, fuzzSCSCF = "127.0.0.1:40001", "127.0.0.1:40002"

// fuzzNode builds one P-CSCF whose next hops do not resolve (every forward fails at once): the fuzz target
// exercises the checks in front of the forwards, not the network.
func fuzzNode(f *testing.F) *pcscf.Node {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ep, err := sipx.NewEndpoint(self, "127.0.0.1:0", log)
	if err != nil {
		f.Fatal(err)
	}
	restore := true
	n, err := pcscf.New(pcscf.Config{Host: self, Listen: ep.Addr, Domain: "ims.test", ICSCF: "icscf.ims.test",
		PoolHosts: []string{self, peer2}, Peers: sipx.Peers{BAC: []string{fuzzBAC}, SCSCF: []string{fuzzSCSCF}},
		Forward: sipx.ForwarderConfig{NoAnswer: 50 * time.Millisecond}, Restore: &restore},
		ep, pool.NewStaticResolver(), nil, obs.NewRecorder(io.Discard, self), log)
	if err != nil {
		f.Fatal(err)
	}
	return n
}

// FuzzHandlers feeds arbitrary SIP messages (sipgo's parser) from each sender role to the P-CSCF's handlers,
// called directly behind an imitation of the prelude but without its panic recovery: a panic fails the target.
// Every request with a transaction must get exactly one final answer.
func FuzzHandlers(f *testing.F) {
	seeds := []string{
		"REGISTER sip:ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:40001;branch=z9hG4bK-1\r\nFrom: <sip:user0001@ims.test>;tag=a\r\n" +
			"To: <sip:user0001@ims.test>\r\nCall-ID: r1\r\nCSeq: 1 REGISTER\r\nContact: <sip:user0001@bac.ims.test>;expires=600\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		"INVITE sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:40001;branch=z9hG4bK-2\r\nFrom: <sip:user0001@ims.test>;tag=a\r\n" +
			"To: <sip:user0002@ims.test>\r\nCall-ID: i1\r\nCSeq: 1 INVITE\r\nContact: <sip:user0001@bac.ims.test>\r\n" +
			"P-Preferred-Identity: <sip:user0001@ims.test>\r\nP-Asserted-Identity: <sip:user0009@ims.test>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		"INVITE sip:user0001@bac.ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:40002;branch=z9hG4bK-3\r\nFrom: <sip:user0002@ims.test>;tag=b\r\n" +
			"To: <sip:user0001@ims.test>\r\nCall-ID: i2\r\nCSeq: 1 INVITE\r\nRoute: <sip:term@pcscf1.ims.test;lr>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		"BYE sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:40001;branch=z9hG4bK-4\r\nFrom: <sip:user0001@ims.test>;tag=a\r\n" +
			"To: <sip:user0002@ims.test>;tag=c\r\nCall-ID: i1\r\nCSeq: 2 BYE\r\nRoute: <sip:pcscf1.ims.test;lr>\r\nRoute: <sip:icscf.ims.test;lr;orig;restore=1>\r\n" +
			"Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		"MESSAGE sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:40001;branch=z9hG4bK-5\r\nCSeq: 1 MESSAGE\r\n" +
			"P-Preferred-Identity: garbage\r\nContent-Length: 0\r\n\r\n",
		"ACK sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:40001;branch=z9hG4bK-6\r\nFrom: <sip:user0001@ims.test>;tag=a\r\n" +
			"To: <sip:user0002@ims.test>;tag=c\r\nCall-ID: i1\r\nCSeq: 1 ACK\r\nRoute: <sip:pcscf2.ims.test;lr>\r\nContent-Length: 0\r\n\r\n",
	}
	for _, s := range seeds {
		for role := byte(0); role < 3; role++ {
			f.Add(role, []byte(s))
		}
	}
	n := fuzzNode(f)
	px := n.Proxy()
	sources := []string{"127.0.0.1:40009", fuzzBAC, fuzzSCSCF}
	f.Fuzz(func(t *testing.T, role byte, data []byte) {
		msg, err := sip.NewParser().ParseSIP(data)
		if err != nil {
			return
		}
		req, ok := msg.(*sip.Request)
		if !ok || req.Via() == nil || req.CSeq() == nil {
			return // sipgo answers these itself (no transaction)
		}
		req.SetSource(sources[int(role)%len(sources)])
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		tx := &fuzzTx{done: make(chan struct{})}
		r := &sipx.Request{Ctx: ctx, Req: req, Tx: tx, Role: px.Trust.RoleOf(req.Source()), Out: req.Clone()}
		if req.IsAck() {
			r.Tx = nil
		}
		r.Top, r.Popped = px.PopSelf(r.Out)
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.Handle(r)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("handler hangs on %q", data)
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("handler ran into its deadline on %q", data)
		}
		if !req.IsAck() && tx.finals() != 1 {
			t.Fatalf("%d final answers (%v) to %q", tx.finals(), tx.codes, data)
		}
	})
}
