package scscf

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/cx"
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

func newFakeTx() *fakeTx { return &fakeTx{done: make(chan struct{})} }

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

func (t *fakeTx) final() *sip.Response {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.res) - 1; i >= 0; i-- {
		if t.res[i].StatusCode >= 200 {
			return t.res[i]
		}
	}
	return nil
}

var _ sip.ServerTransaction = (*fakeTx)(nil)

func hexMD5(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// directHSS knows user0001…user0009 (passwords pass0001…) and restores anyone (registered through pcscf1).
type directHSS struct{}

func (directHSS) MultimediaAuth(_ context.Context, req *cx.MAR) (*cx.MAA, error) {
	if !strings.HasPrefix(req.UserName, "user000") {
		return nil, &cx.Error{Command: "MAR", Result: cx.ErrorUserUnknown}
	}
	pw := "pass" + strings.TrimSuffix(strings.TrimPrefix(req.UserName, "user"), "@ims.test")
	return &cx.MAA{Result: cx.Success, AuthItems: []cx.AuthItem{{Scheme: cx.SchemeSIPDigest,
		Digest: &cx.DigestAuthenticate{Realm: "ims.test", QoP: "auth", HA1: hexMD5(req.UserName + ":ims.test:" + pw)}}}}, nil
}

func (directHSS) ServerAssignment(_ context.Context, req *cx.SAR) (*cx.SAA, error) {
	saa := &cx.SAA{Result: cx.Success}
	if req.AssignmentType == cx.SATUnregisteredUser && len(req.PublicIdentities) > 0 {
		saa.Restoration = []*cx.SCSCFRestorationInfo{{UserName: "restored@ims.test", RegistrationTimeOut: time.Now().Add(time.Hour),
			Registrations: []cx.RestorationInfo{{Path: "<sip:term@pcscf1.ims.test;lr>", Contact: "<sip:restored@bac.ims.test>"}}}}
	}
	return saa, nil
}

// directNode is an S-CSCF whose handlers are called directly (no prelude, no recover: a panic fails the test),
// with fake I-CSCF and P-CSCF endpoints answering 200 to whatever it forwards.
type directNode struct {
	n                   *Node
	icscf, pcscf, bac   string
	stranger, scscfPeer string
}

func startDirectNode(ctx context.Context, tb interface{ Fatal(...any) }) *directNode {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ep, err := sipx.NewEndpoint("scscf1.ims.test", "127.0.0.1:0", log)
	if err != nil {
		tb.Fatal(err)
	}
	answer := func(req *sip.Request, tx sip.ServerTransaction) {
		_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	}
	peer := func(host string) *sipx.Endpoint {
		p, err := sipx.NewEndpoint(host, "127.0.0.1:0", log)
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range []sip.RequestMethod{sip.INVITE, sip.BYE, sip.MESSAGE, sip.REGISTER, sip.OPTIONS, sip.UPDATE, sip.INFO,
			sip.PRACK, sip.NOTIFY, sip.SUBSCRIBE, sip.REFER, sip.PUBLISH} {
			p.Server.OnRequest(m, answer)
		}
		return p
	}
	ic, pc := peer("icscf.ims.test"), peer("pcscf1.ims.test")
	res := pool.NewStaticResolver().
		SetSRV("_sip._udp.icscf.ims.test", pool.Target{Name: "icscf.ims.test", Addr: ic.Addr, Priority: 1, Weight: 1}).
		SetSRV("_sip._udp.pcscf1.ims.test", pool.Target{Name: "pcscf1.ims.test", Addr: pc.Addr, Priority: 1, Weight: 1})
	d := &directNode{icscf: ic.Addr, pcscf: pc.Addr, bac: "127.0.0.1:5998", stranger: "127.0.0.1:6666", scscfPeer: "127.0.0.1:6001"}
	n, err := New(Config{Host: "scscf1.ims.test", Listen: ep.Addr, Domain: "ims.test", ICSCF: "icscf.ims.test",
		PoolHosts: []string{"scscf1.ims.test", "scscf2.ims.test"},
		Peers:     sipx.Peers{BAC: []string{d.bac}, PCSCF: []string{pc.Addr}, ICSCF: []string{ic.Addr}, SCSCF: []string{d.scscfPeer}},
		Forward:   sipx.ForwarderConfig{NoAnswer: 30 * time.Millisecond, Proceeding: 100 * time.Millisecond, MaxAttempts: 1}},
		directHSS{}, ep, res, nil, obs.NewRecorder(io.Discard, "scscf1"), log)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range []*sipx.Endpoint{ep, ic, pc} {
		go func() { _ = e.Serve(ctx) }()
		<-e.Listening()
	}
	n.px.Start(ctx)
	d.n = n
	return d
}

// call runs a request through the S-CSCF's handlers as sent from src with role, after what the prelude does for
// such a sender (identity and markers removed outside the trust domain, own Route popped), and returns the
// transaction.
func (d *directNode) call(req *sip.Request, src string, role sipx.Role) *fakeTx {
	req.SetSource(src)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := &sipx.Request{Ctx: ctx, Req: req, Out: req.Clone(), Role: role}
	if !role.InTrustDomain() {
		sipx.RemoveHeaders(r.Out, sipx.HdrPAssertedIdentity)
		routes := sipx.Routes(r.Out)
		sipx.RemoveHeaders(r.Out, "Route")
		for i := len(routes) - 1; i >= 0; i-- {
			u := routes[i]
			if u.UriParams != nil {
				u.UriParams = u.UriParams.Clone()
				u.UriParams.Remove(sipx.ParamOrig)
				u.UriParams.Remove(sipx.ParamRestore)
			}
			if u.User == "orig" {
				return nil // the prelude refuses it
			}
			sipx.PrependRoute(r.Out, u)
		}
	}
	r.Top, r.Popped = d.n.px.PopSelf(r.Out)
	var tx *fakeTx
	if req.Method != sip.ACK {
		tx = newFakeTx()
		r.Tx = tx
	}
	switch req.Method {
	case sip.REGISTER:
		d.n.onRegister(r)
	case sip.ACK:
		d.n.px.Ack(r)
	case sip.OPTIONS, sip.CANCEL:
	default:
		d.n.onRequest(r)
	}
	return tx
}

var _ = Describe("nonce taken in one step (attack 9)", Label("unit"), func() {
	It("lets exactly one of many concurrent copies of one authorised REGISTER pass", func(ctx SpecContext) {
		nctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		d := startDirectNode(nctx, GinkgoT())
		const copies = 400
		for round := range 40 {
			reg := func(cseq int, authz string) *sip.Request {
				raw := fmt.Sprintf("REGISTER sip:ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK%d%d\r\n"+
					"From: <sip:user0001@ims.test>;tag=1\r\nTo: <sip:user0001@ims.test>\r\nCall-ID: c%d\r\nCSeq: %d REGISTER\r\n"+
					"Contact: <sip:user0001@bac.ims.test>\r\nExpires: 600\r\nMax-Forwards: 70\r\n", round, cseq, round, cseq)
				if authz != "" {
					raw += "Authorization: " + authz + "\r\n"
				}
				m, err := sip.NewParser().ParseSIP([]byte(raw + "Content-Length: 0\r\n\r\n"))
				Expect(err).NotTo(HaveOccurred())
				return m.(*sip.Request)
			}
			first := d.call(reg(1, ""), d.icscf, sipx.RoleICSCF).final()
			Expect(first.StatusCode).To(Equal(401))
			ch, err := digest.ParseChallenge(first.GetHeader("WWW-Authenticate").Value())
			Expect(err).NotTo(HaveOccurred())
			ha1 := hexMD5("user0001@ims.test:ims.test:pass0001")
			resp := hexMD5(ha1 + ":" + ch.Nonce + ":00000001:c0ffee:auth:" + hexMD5("REGISTER:sip:ims.test"))
			authz := fmt.Sprintf(`Digest username="user0001@ims.test", realm="ims.test", nonce="%s", uri="sip:ims.test", `+
				`response="%s", algorithm=MD5, cnonce="c0ffee", qop=auth, nc=00000001`, ch.Nonce, resp)
			codes := make(chan int, copies)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for range copies {
				req := reg(2, authz)
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					<-start
					codes <- d.call(req, d.icscf, sipx.RoleICSCF).final().StatusCode
				}()
			}
			close(start)
			wg.Wait()
			close(codes)
			ok := 0
			for c := range codes {
				if c == 200 {
					ok++
				}
			}
			Expect(ok).To(Equal(1), "round %d", round)
		}
	}, SpecTimeout(60e9))
})

var (
	fuzzOnce sync.Once
	fuzzNode *directNode
)

// hostsLocal reports whether every URI the S-CSCF may send to (Request-URI, Route, Path, Contact) names a
// loopback address or a host name (resolved by the static resolver): the fuzz run sends nothing to the network.
func hostsLocal(req *sip.Request) bool {
	uris := []sip.Uri{req.Recipient}
	uris = append(uris, sipx.Routes(req)...)
	for _, v := range sipx.HeaderValues(req, sipx.HdrPath) {
		if u, err := sipx.ParseNameAddr(v); err == nil {
			uris = append(uris, u)
		}
	}
	for _, h := range req.GetHeaders("Contact") {
		if c, ok := h.(*sip.ContactHeader); ok {
			uris = append(uris, c.Address)
		}
	}
	for _, u := range uris {
		if ip := net.ParseIP(strings.Trim(strings.TrimSuffix(u.Host, "."), "[]")); ip != nil && !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// FuzzHandlers feeds bytes parsed by sipgo's parser to the S-CSCF's handlers directly (no recover: a panic
// fails the run; a handler that does not return within 10 s fails it too), as sent by the I-CSCF, a P-CSCF,
// another S-CSCF, the BAC and a stranger.
func FuzzHandlers(f *testing.F) {
	f.Add([]byte("REGISTER sip:ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK1\r\n"+
		"From: <sip:user0001@ims.test>;tag=1\r\nTo: <sip:user0001@ims.test>\r\nCall-ID: r1\r\nCSeq: 1 REGISTER\r\n"+
		"Contact: <sip:user0001@bac.ims.test>\r\nPath: <sip:term@pcscf1.ims.test;lr>\r\nExpires: 600\r\nMax-Forwards: 70\r\n"+
		"Authorization: Digest username=\"user0001@ims.test\", realm=\"ims.test\", nonce=\"\", uri=\"sip:ims.test\", response=\"\"\r\n"+
		"Content-Length: 0\r\n\r\n"), uint8(0))
	f.Add([]byte("REGISTER sip:ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK1\r\n"+
		"From: <sip:user0001@ims.test>;tag=1\r\nTo: <sip:user0001@ims.test>\r\nCall-ID: r1\r\nCSeq: 2 REGISTER\r\n"+
		"Contact: <sip:user0001@bac.ims.test>;expires=0\r\nMax-Forwards: 70\r\n"+
		"Authorization: Digest username=\"user0001@ims.test\", realm=\"ims.test\", nonce=\"abc\", uri=\"sip:ims.test\", "+
		"response=\"0123\", qop=auth, nc=00000001, cnonce=\"x\"\r\nContent-Length: 0\r\n\r\n"), uint8(0))
	f.Add([]byte("INVITE sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK2\r\n"+
		"From: <sip:user0001@ims.test>;tag=1\r\nTo: <sip:user0002@ims.test>\r\nCall-ID: i1\r\nCSeq: 1 INVITE\r\n"+
		"Contact: <sip:user0001@bac.ims.test>\r\nP-Asserted-Identity: <sip:user0003@ims.test>\r\n"+
		"Route: <sip:orig@scscf1.ims.test;lr>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(1))
	f.Add([]byte("INVITE sip:user0004@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK3\r\n"+
		"From: <sip:user0002@ims.test>;tag=2\r\nTo: <sip:user0004@ims.test>\r\nCall-ID: i2\r\nCSeq: 1 INVITE\r\n"+
		"Route: <sip:scscf1.ims.test;lr;orig;restore=1>\r\nP-Asserted-Identity: <sip:user0004@ims.test>\r\n"+
		"Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(0))
	f.Add([]byte("BYE sip:user0001@bac.ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK4\r\n"+
		"From: <sip:user0002@ims.test>;tag=2\r\nTo: <sip:user0001@ims.test>;tag=1\r\nCall-ID: i1\r\nCSeq: 2 BYE\r\n"+
		"Route: <sip:scscf1.ims.test;lr>\r\nRoute: <sip:term@pcscf1.ims.test;lr>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(4))
	f.Add([]byte("ACK sip:user0001@bac.ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:6000;branch=z9hG4bK5\r\n"+
		"From: <sip:user0002@ims.test>;tag=2\r\nTo: <sip:user0001@ims.test>;tag=1\r\nCall-ID: i2\r\nCSeq: 1 ACK\r\n"+
		"Route: <sip:pcscf1.ims.test;lr>\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"), uint8(3))
	fuzzOnce.Do(func() { fuzzNode = startDirectNode(context.Background(), f) })
	d := fuzzNode
	f.Fuzz(func(t *testing.T, data []byte, who uint8) {
		msg, err := sip.NewParser().ParseSIP(data)
		if err != nil {
			return
		}
		req, ok := msg.(*sip.Request)
		if !ok || !hostsLocal(req) {
			return
		}
		src, role := d.icscf, sipx.RoleICSCF
		switch who % 5 {
		case 1:
			src, role = d.pcscf, sipx.RolePCSCF
		case 2:
			src, role = d.scscfPeer, sipx.RoleSCSCF
		case 3:
			src, role = d.bac, sipx.RoleBAC
		case 4:
			src, role = d.stranger, sipx.RoleUntrusted
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.call(req, src, role)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("handler did not return within 10 s: %q", data)
		}
	})
}
