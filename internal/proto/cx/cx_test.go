package cx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/overload"
)

// roundTrip serialises a request the way the client does and decodes it the way the server does.
func encodeRequest(code uint32, env Envelope, payload []*diam.AVP) *diam.Message {
	m := diam.NewRequest(code, AppID, Dict())
	m.AddAVP(m0(avpSessionID, utf8(env.SessionID)))
	for _, a := range env.avps() {
		m.AddAVP(a)
	}
	for _, a := range payload {
		m.AddAVP(a)
	}
	b, err := m.Serialize()
	Expect(err).NotTo(HaveOccurred())
	out, err := diam.ReadMessage(bytes.NewReader(b), Dict())
	Expect(err).NotTo(HaveOccurred())
	return out
}

var env = Envelope{SessionID: "icscf.ims.test;1;2", OriginHost: "icscf.ims.test", OriginRealm: "ims.test", DestinationRealm: "ims.test"}

var _ = Describe("Cx codec", Label("unit"), func() {
	It("loads a dictionary with base and Cx only", func() {
		apps := Dict().Apps()
		ids := []uint32{}
		for _, a := range apps {
			ids = append(ids, a.ID)
		}
		Expect(ids).To(ConsistOf(uint32(0), AppID))
	})

	It("round-trips a UAR with User-Authorization-Type 2", func() {
		q := &UAR{Envelope: env, UserName: "alice@ims.test", PublicIdentity: "sip:alice@ims.test",
			VisitedNetworkIdentifier: "ims.test", AuthorizationType: UATRegistrationAndCapabilities,
			SupportedFeatures: []SupportedFeatures{{VendorID: Vendor3GPP, ListID: 1, FeatureList: FeatureIMSRestorationInd}}}
		got, rerr := decodeUAR(encodeRequest(CmdUA, env, q.avps()))
		Expect(rerr).To(BeNil())
		Expect(got).To(Equal(q))
	})

	It("round-trips a LIR with Originating-Request and UAT 2", func() {
		t := UATRegistrationAndCapabilities
		q := &LIR{Envelope: env, PublicIdentity: "sip:bob@ims.test", Originating: true, AuthorizationType: &t}
		got, rerr := decodeLIR(encodeRequest(CmdLI, env, q.avps()))
		Expect(rerr).To(BeNil())
		Expect(got).To(Equal(q))
	})

	It("round-trips a SAR with SCSCF-Restoration-Info, including the nested subscription dialogs", func() {
		rest := &SCSCFRestorationInfo{UserName: "alice@ims.test", AuthScheme: SchemeSIPDigest,
			RegistrationTimeOut: time.Unix(1900000000, 0),
			Registrations: []RestorationInfo{{
				Path: "<sip:term@pcscf1.ims.test;lr>", Contact: "<sip:tok1@bac.ims.test>;expires=600", InitialCSeq: 7, CallID: "abc",
				Subscription:      &SubscriptionInfo{CallID: "s1", From: "<sip:alice@ims.test>;tag=1", To: "<sip:alice@ims.test>", RecordRoute: "<sip:pcscf1.ims.test;lr>", Contact: "<sip:tok1@bac.ims.test>"},
				PCSCFSubscription: &PCSCFSubscriptionInfo{CallID: "p1", From: "<sip:pcscf1.ims.test>;tag=2", To: "<sip:alice@ims.test>", Contact: "<sip:pcscf1.ims.test>"},
			}}}
		q := &SAR{Envelope: env, UserName: "alice@ims.test", PublicIdentities: []string{"sip:alice@ims.test"},
			ServerName: "sip:scscf1.ims.test", AssignmentType: SATRegistration, Restoration: rest}
		got, rerr := decodeSAR(encodeRequest(CmdSA, env, q.avps()))
		Expect(rerr).To(BeNil())
		Expect(got.Restoration).To(Equal(rest))
		Expect(got.RestorationRaw).NotTo(BeEmpty())
		back, err := DecodeRestorationRaw(got.RestorationRaw)
		Expect(err).NotTo(HaveOccurred())
		Expect(back).To(Equal(rest))
	})

	It("names the missing AVP and returns it in Failed-AVP", func() {
		q := &MAR{Envelope: env, UserName: "alice@ims.test", PublicIdentity: "sip:alice@ims.test", ServerName: "sip:scscf1.ims.test",
			AuthItem: AuthItem{Scheme: SchemeSIPDigest}}
		avps := q.avps()
		var without []*diam.AVP
		for _, a := range avps {
			if a.Code != avpServerName {
				without = append(without, a)
			}
		}
		_, rerr := decodeMAR(encodeRequest(CmdMA, env, without))
		Expect(rerr).NotTo(BeNil())
		Expect(rerr.Result).To(Equal(MissingAVP))
		Expect(rerr.Message).To(ContainSubstring("Server-Name"))
		Expect(rerr.Failed).To(HaveLen(1))
		Expect(rerr.Failed[0].Code).To(Equal(avpServerName))
		Expect(rerr.Failed[0].VendorID).To(Equal(Vendor3GPP))
	})

	It("keeps Result-Code and Experimental-Result apart", func() {
		Expect(Success).NotTo(Equal(FirstRegistration))
		Expect(Success.String()).To(ContainSubstring("DIAMETER_SUCCESS"))
		Expect(FirstRegistration.String()).To(ContainSubstring("DIAMETER_FIRST_REGISTRATION"))
		err := error(&Error{Command: "UAR", Result: ErrorUserUnknown})
		res, ok := ResultOf(errors.Join(errors.New("context"), err))
		Expect(ok).To(BeTrue())
		Expect(res).To(Equal(ErrorUserUnknown))
		_, ok = ResultOf(context.DeadlineExceeded)
		Expect(ok).To(BeFalse())
	})
})

// echoHandler answers every request with success and nothing else.
type echoHandler struct{}

func (echoHandler) UserAuthorization(context.Context, *UAR) (*UAA, error) {
	return &UAA{Result: Success}, nil
}
func (echoHandler) LocationInfo(context.Context, *LIR) (*LIA, error) {
	return &LIA{Result: Success}, nil
}
func (echoHandler) MultimediaAuth(context.Context, *MAR) (*MAA, error) {
	return &MAA{Result: Success}, nil
}
func (echoHandler) ServerAssignment(context.Context, *SAR) (*SAA, error) {
	return &SAA{Result: Success}, nil
}

// serveHSS serves an HSS that answers everything 2001 on ln until stop; done receives what Serve returned.
func serveHSS(ln net.Listener, logger *slog.Logger) (stop func(), done chan error) {
	GinkgoHelper()
	srv, err := NewServer(ServerConfig{OriginHost: "hss.ims.test", OriginRealm: "ims.test", AllowAnyPeer: true}, echoHandler{}, WithLogger(logger))
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	return cancel, done
}

// runClient runs an I-CSCF's client of the HSS at addr with the given reconnect timers until the spec ends, and
// waits for its connection.
func runClient(addr string, logger *slog.Logger, reconnectMin, reconnectMax, failFastAfter time.Duration) *Client {
	GinkgoHelper()
	cli, err := NewClient(ClientConfig{Addr: addr, OriginHost: "icscf.ims.test", OriginRealm: "ims.test",
		DestinationRealm: "ims.test", ReconnectMin: reconnectMin, ReconnectMax: reconnectMax,
		FailFastAfter: failFastAfter}, WithClientLogger(logger))
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go func() { _ = cli.Run(ctx) }()
	Eventually(cli.Connected()).Should(BeClosed())
	return cli
}

var _ = Describe("Cx client and server", Label("integration"), func() {
	It("fails at once once the HSS has been gone for FailFastAfter, and serves again when it is back", SpecTimeout(30*time.Second), func(sctx SpecContext) {
		logger := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := ln.Addr().String()
		stop1, done1 := serveHSS(ln, logger)
		cli := runClient(addr, logger, 20*time.Millisecond, 100*time.Millisecond, 300*time.Millisecond)

		stop1()
		Eventually(done1).Should(Receive(BeNil()))
		time.Sleep(400 * time.Millisecond) // down for longer than FailFastAfter
		start := time.Now()
		ctx, c1 := context.WithTimeout(sctx, 5*time.Second)
		defer c1()
		_, err = cli.LocationInfo(ctx, &LIR{PublicIdentity: "sip:a@ims.test"})
		Expect(err).To(MatchError(ErrNotConnected))
		Expect(time.Since(start)).To(BeNumerically("<", time.Second), "at once, not after the 5 s deadline")

		ln2, err := net.Listen("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		stop2, _ := serveHSS(ln2, logger)
		DeferCleanup(stop2)
		Eventually(cli.Connected(), 5*time.Second).Should(BeClosed())
		a, err := cli.LocationInfo(sctx, &LIR{PublicIdentity: "sip:a@ims.test"})
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Result).To(Equal(Success))
	})

	It("serves the first request after the HSS's return, not only after the next reconnect tick", SpecTimeout(30*time.Second), func(sctx SpecContext) {
		logger := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := ln.Addr().String()
		stop1, done1 := serveHSS(ln, logger)
		// The backoff reaches 10 s long before the HSS returns: without attempts on demand the return would be
		// noticed up to 10 s later, and every request meanwhile would fail at once.
		cli := runClient(addr, logger, 50*time.Millisecond, 10*time.Second, 300*time.Millisecond)

		stop1()
		Eventually(done1).Should(Receive(BeNil()))
		time.Sleep(2 * time.Second) // attempts at 50, 100, 200, 400, 800 ms…: the next one is seconds away
		for range 3 {               // requests meanwhile fail at once, and their attempts on demand fail too
			start := time.Now()
			_, err = cli.LocationInfo(sctx, &LIR{PublicIdentity: "sip:a@ims.test"})
			Expect(err).To(MatchError(ErrNotConnected))
			Expect(time.Since(start)).To(BeNumerically("<", time.Second))
		}

		ln2, err := net.Listen("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		stop2, _ := serveHSS(ln2, logger)
		DeferCleanup(stop2)
		start := time.Now()
		a, err := cli.LocationInfo(sctx, &LIR{PublicIdentity: "sip:a@ims.test"})
		Expect(err).NotTo(HaveOccurred(), "the first request after the return asks for an attempt and goes out on it")
		Expect(a.Result).To(Equal(Success))
		Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
	})

	It("gives up an attempt whose address answers nothing after ConnectTimeout, so the first request after the "+
		"HSS's return is served", SpecTimeout(30*time.Second), func(sctx SpecContext) {
		logger := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := ln.Addr().String()
		stop1, done1 := serveHSS(ln, logger)
		cli, err := NewClient(ClientConfig{Addr: addr, OriginHost: "icscf.ims.test", OriginRealm: "ims.test",
			DestinationRealm: "ims.test", ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond,
			FailFastAfter: 300 * time.Millisecond}, WithClientLogger(logger))
		Expect(err).NotTo(HaveOccurred())
		// While the HSS is gone its address answers nothing, as a stopped container's does (no reset): a
		// connection attempt then waits until its context gives up. Each attempt's wait is recorded.
		var gone atomic.Bool
		waits := make(chan time.Duration, 1000)
		real := cli.connectTCP
		cli.connectTCP = func(ctx context.Context, a string) (net.Conn, error) {
			if !gone.Load() {
				return real(ctx, a)
			}
			start := time.Now()
			<-ctx.Done()
			waits <- time.Since(start)
			return nil, ctx.Err()
		}
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		go func() { _ = cli.Run(ctx) }()
		Eventually(cli.Connected()).Should(BeClosed())

		gone.Store(true)
		stop1()
		Eventually(done1).Should(Receive(BeNil()))
		var w time.Duration
		Eventually(waits, 5*time.Second).Should(Receive(&w), "an attempt to the silent address")
		Expect(w).To(BeNumerically("<", time.Second), "the attempt gave up after ConnectTimeout (300 ms), not DialTimeout (2 s)")
		time.Sleep(time.Second) // down for longer than FailFastAfter: requests now ask for attempts on demand

		ln2, err := net.Listen("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		stop2, _ := serveHSS(ln2, logger)
		DeferCleanup(stop2)
		gone.Store(false)
		// An attempt to the silent address may be under way: the request waits for it to give up and for the
		// next one, which finds the HSS.
		start := time.Now()
		a, err := cli.LocationInfo(sctx, &LIR{PublicIdentity: "sip:a@ims.test"})
		Expect(err).NotTo(HaveOccurred(), "the first request after the return is served")
		Expect(a.Result).To(Equal(Success))
		Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
	})

	It("answers DIAMETER_TOO_BUSY without reaching the handler while the overload control sheds", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		logger := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		ctl := overload.New(overload.Config{Interval: time.Hour, MaxShed: 1, Step: 1}, 1)
		DeferCleanup(ctl.Close)
		var seen []Exchange
		var mu sync.Mutex
		srv, err := NewServer(ServerConfig{OriginHost: "hss.ims.test", OriginRealm: "ims.test", AllowAnyPeer: true}, echoHandler{},
			WithLogger(logger), WithOverload(ctl), WithObserver(func(x Exchange) { mu.Lock(); seen = append(seen, x); mu.Unlock() }))
		Expect(err).NotTo(HaveOccurred())
		ctx, stop := context.WithCancel(context.Background())
		DeferCleanup(stop)
		go func() { _ = srv.Serve(ctx, ln) }()
		cli, err := NewClient(ClientConfig{Addr: ln.Addr().String(), OriginHost: "icscf.ims.test", OriginRealm: "ims.test",
			DestinationRealm: "ims.test"}, WithClientLogger(logger))
		Expect(err).NotTo(HaveOccurred())
		go func() { _ = cli.Run(ctx) }()
		Eventually(cli.Connected()).Should(BeClosed())

		_, err = cli.LocationInfo(sctx, &LIR{PublicIdentity: "sip:a@ims.test"})
		Expect(err).NotTo(HaveOccurred(), "admitted while the node keeps up")

		ctl.Observe(10 * time.Second) // far above the target: shed everything
		_, err = cli.LocationInfo(sctx, &LIR{PublicIdentity: "sip:a@ims.test"})
		res, ok := ResultOf(err)
		Expect(ok).To(BeTrue(), "%v", err)
		Expect(res).To(Equal(TooBusy))
		Expect(ctl.Stats().Shed).To(BeEquivalentTo(1))
		// The observer runs after the answer is written, so the two observations may come in either order (the
		// client can send the second request before the first one's observer has run): wait for both.
		Eventually(func() []Result {
			mu.Lock()
			defer mu.Unlock()
			var rs []Result
			for _, x := range seen {
				rs = append(rs, x.Result)
			}
			return rs
		}).Should(ConsistOf(Success, TooBusy), "the shed request is observed (metrics, events) as DIAMETER_TOO_BUSY")
	})

	It("reconnects after the server goes away and comes back on the same address", SpecTimeout(30*time.Second), func(sctx SpecContext) {
		logger := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		srv, err := NewServer(ServerConfig{OriginHost: "hss.ims.test", OriginRealm: "ims.test", AllowAnyPeer: true}, echoHandler{}, WithLogger(logger))
		Expect(err).NotTo(HaveOccurred())
		sctx1, stop1 := context.WithCancel(context.Background())
		done1 := make(chan error, 1)
		go func() { done1 <- srv.Serve(sctx1, ln) }()

		cli, err := NewClient(ClientConfig{Addr: ln.Addr().String(), OriginHost: "icscf.ims.test", OriginRealm: "ims.test",
			DestinationRealm: "ims.test", ReconnectMin: 20 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}, WithClientLogger(logger))
		Expect(err).NotTo(HaveOccurred())
		cctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		go func() { _ = cli.Run(cctx) }()
		Eventually(cli.Connected()).Should(BeClosed())
		_, err = cli.LocationInfo(sctx, &LIR{PublicIdentity: "sip:a@ims.test"})
		Expect(err).NotTo(HaveOccurred())

		stop1()
		Eventually(done1).Should(Receive(BeNil()))
		Eventually(func() bool {
			select {
			case <-cli.Connected():
				return false
			default:
				return true
			}
		}).Should(BeTrue())

		ln2, err := net.Listen("tcp", ln.Addr().String())
		Expect(err).NotTo(HaveOccurred())
		srv2, err := NewServer(ServerConfig{OriginHost: "hss.ims.test", OriginRealm: "ims.test", AllowAnyPeer: true}, echoHandler{}, WithLogger(logger))
		Expect(err).NotTo(HaveOccurred())
		sctx2, stop2 := context.WithCancel(context.Background())
		DeferCleanup(stop2)
		go func() { _ = srv2.Serve(sctx2, ln2) }()
		// A request made while the client is reconnecting waits for the connection instead of failing.
		ctx, c2 := context.WithTimeout(sctx, 5*time.Second)
		defer c2()
		a, err := cli.LocationInfo(ctx, &LIR{PublicIdentity: "sip:a@ims.test"})
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Result).To(Equal(Success))
	})
})

var _ = Describe("Cx server handshake", Label("integration"), func() {
	It("answers a request sent right after the capabilities exchange (go-diameter races it with concurrent handlers)", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		logger := slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelError}))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		srv, err := NewServer(ServerConfig{OriginHost: "hss.ims.test", OriginRealm: "ims.test", AllowAnyPeer: true}, echoHandler{}, WithLogger(logger))
		Expect(err).NotTo(HaveOccurred())
		ctx, stop := context.WithCancel(context.Background())
		DeferCleanup(stop)
		go func() { _ = srv.Serve(ctx, ln) }()
		// Many connections at once keep both cores busy, which widens go-diameter's window.
		connect := func(i int) error {
			cli, err := NewClient(ClientConfig{Addr: ln.Addr().String(), OriginHost: fmt.Sprintf("icscf%d.ims.test", i), OriginRealm: "ims.test",
				DestinationRealm: "ims.test"}, WithClientLogger(logger))
			if err != nil {
				return err
			}
			cctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = cli.Run(cctx) }()
			errs := make(chan error, 8)
			for j := 0; j < 8; j++ {
				go func() {
					rctx, c := context.WithTimeout(sctx, 2*time.Second)
					defer c()
					_, err := cli.LocationInfo(rctx, &LIR{PublicIdentity: "sip:a@ims.test"})
					errs <- err
				}()
			}
			for j := 0; j < 8; j++ {
				if err := <-errs; err != nil {
					return fmt.Errorf("connection %d: %w", i, err)
				}
			}
			return nil
		}
		for round := 0; round < 10; round++ {
			errs := make(chan error, 30)
			for i := 0; i < 30; i++ {
				go func() { errs <- connect(round*30 + i) }()
			}
			for i := 0; i < 30; i++ {
				Expect(<-errs).NotTo(HaveOccurred())
			}
		}
	})
})
