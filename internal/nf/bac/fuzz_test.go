package bac

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// fakeTx is a server transaction that only records the answers.
type fakeTx struct {
	mu   sync.Mutex
	res  []*sip.Response
	done chan struct{}
}

func (t *fakeTx) Respond(res *sip.Response) error {
	t.mu.Lock()
	t.res = append(t.res, res)
	t.mu.Unlock()
	return nil
}
func (t *fakeTx) Acks() <-chan *sip.Request          { return nil }
func (t *fakeTx) OnCancel(sip.FnTxCancel) bool       { return true }
func (t *fakeTx) Terminate()                         {}
func (t *fakeTx) OnTerminate(sip.FnTxTerminate) bool { return true }
func (t *fakeTx) Done() <-chan struct{}              { return t.done }
func (t *fakeTx) Err() error                         { return nil }

var _ sip.ServerTransaction = (*fakeTx)(nil)

// fuzzBAC is one BAC for the whole fuzz run, with a fake P-CSCF that answers 200 to everything (a REGISTER with
// expires=600) so that registrations install bindings and later inputs exercise them.
type fuzzBAC struct {
	n     *Node
	pcscf string
}

var (
	fuzzOnce sync.Once
	fuzzNode *fuzzBAC
)

func startFuzzBAC(tb testing.TB) *fuzzBAC {
	fuzzOnce.Do(func() {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		ep, err := sipx.NewEndpoint("bac.ims.test", "127.0.0.1:0", log)
		if err != nil {
			tb.Fatal(err)
		}
		pc, err := sipx.NewEndpoint("pcscf1.ims.test", "127.0.0.1:0", log)
		if err != nil {
			tb.Fatal(err)
		}
		answer := func(req *sip.Request, tx sip.ServerTransaction) {
			res := sip.NewResponseFromRequest(req, 200, "OK", nil)
			if c := req.Contact(); c != nil && req.Method == sip.REGISTER {
				p := sip.NewParams()
				p.Add("expires", "600")
				res.AppendHeader(&sip.ContactHeader{Address: c.Address, Params: p})
			}
			_ = tx.Respond(res)
		}
		for _, m := range []sip.RequestMethod{sip.INVITE, sip.BYE, sip.MESSAGE, sip.REGISTER, sip.OPTIONS, sip.UPDATE, sip.INFO,
			sip.PRACK, sip.NOTIFY, sip.SUBSCRIBE, sip.REFER, sip.PUBLISH} {
			pc.Server.OnRequest(m, answer)
		}
		t := pool.Target{Name: "pcscf1.ims.test", Addr: pc.Addr, Priority: 1, Weight: 1}
		res := pool.NewStaticResolver().SetSRV("_sip._udp.pcscf.ims.test", t).SetSRV("_sip._udp.pcscf1.ims.test", t)
		n, err := New(Config{Host: "bac.ims.test", Listen: ep.Addr, PCSCFPool: "pcscf.ims.test", PCSCFHosts: []string{"pcscf1.ims.test"},
			Peers: sipx.Peers{PCSCF: []string{pc.Addr}}, MaxPhones: 1000,
			Forward: sipx.ForwarderConfig{NoAnswer: 20 * time.Millisecond, Proceeding: 50 * time.Millisecond, MaxAttempts: 1}},
			ep, res, nil, obs.NewRecorder(io.Discard, "bac"), log)
		if err != nil {
			tb.Fatal(err)
		}
		ctx := context.Background()
		go func() { _ = ep.Serve(ctx) }()
		go func() { _ = pc.Serve(ctx) }()
		<-ep.Listening()
		<-pc.Listening()
		go func() { _ = n.Run(ctx) }()
		fuzzNode = &fuzzBAC{n: n, pcscf: pc.Addr}
	})
	return fuzzNode
}

const fuzzPhone = "127.0.0.1:5999"

// FuzzHandlers feeds bytes parsed by sipgo's parser to the BAC's handlers directly (no recover: a panic fails
// the fuzz run), as sent by a phone, by a stranger and by the P-CSCF, on one socket and on each side of two.
func FuzzHandlers(f *testing.F) {
	f.Add([]byte("REGISTER sip:ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK1\r\n"+
		"From: <sip:user0001@ims.test>;tag=1\r\nTo: <sip:user0001@ims.test>\r\nCall-ID: r1\r\nCSeq: 1 REGISTER\r\n"+
		"Contact: <sip:user0001@127.0.0.1:5999>\r\nExpires: 600\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(0))
	f.Add([]byte("INVITE sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK2\r\n"+
		"From: <sip:user0001@ims.test>;tag=1\r\nTo: <sip:user0002@ims.test>\r\nCall-ID: i1\r\nCSeq: 1 INVITE\r\n"+
		"Contact: <sip:user0001@127.0.0.1:5999>\r\nP-Preferred-Identity: <sip:user0009@ims.test>\r\n"+
		"Route: <sip:bac.ims.test;lr;orig>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(0))
	f.Add([]byte("INVITE sip:user0001@bac.ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:6000;branch=z9hG4bK3\r\n"+
		"From: <sip:user0002@ims.test>;tag=2\r\nTo: <sip:user0001@ims.test>\r\nCall-ID: i2\r\nCSeq: 1 INVITE\r\n"+
		"Contact: <sip:x@pcscf1.ims.test>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(2))
	f.Add([]byte("BYE sip:user0002@bac.ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK4\r\n"+
		"From: <sip:user0001@ims.test>;tag=1\r\nTo: <sip:user0002@ims.test>;tag=2\r\nCall-ID: i1\r\nCSeq: 2 BYE\r\n"+
		"Route: <sip:pcscf1.ims.test;lr>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(0))
	f.Add([]byte("ACK sip:user0001@bac.ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:6000;branch=z9hG4bK5\r\n"+
		"From: <sip:user0002@ims.test>;tag=2\r\nTo: <sip:user0001@ims.test>;tag=1\r\nCall-ID: i2\r\nCSeq: 1 ACK\r\n"+
		"Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(5))
	fb := startFuzzBAC(f)
	f.Fuzz(func(t *testing.T, data []byte, who uint8) {
		msg, err := sip.NewParser().ParseSIP(data)
		if err != nil {
			return
		}
		req, ok := msg.(*sip.Request)
		if !ok {
			return
		}
		// who: bit 0-1 the sender (phone, stranger, P-CSCF), bit 2 the side of a two-socket BAC.
		src, role := fuzzPhone, sipx.RoleUntrusted
		switch who & 3 {
		case 1:
			src = "127.0.0.1:6666"
		case 2, 3:
			src, role = fb.pcscf, sipx.RolePCSCF
		}
		s := sideBoth
		if who&4 != 0 {
			s = sideAccess
			role = sipx.RoleUntrusted
		}
		req.SetSource(src)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r := &sipx.Request{Ctx: ctx, Req: req, Out: req.Clone(), Role: role}
		r.Top, r.Popped = fb.n.core.PopSelf(r.Out)
		if req.Method != sip.ACK {
			r.Tx = &fakeTx{done: make(chan struct{})}
		}
		switch req.Method {
		case sip.REGISTER:
			fb.n.onRegister(s, r)
		case sip.ACK:
			fb.n.onAck(s, r)
		case sip.CANCEL, sip.OPTIONS:
		default:
			fb.n.onRequest(s, r)
		}
	})
}
