package pool_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(GinkgoWriter, nil)) }

func newUA(name string) *sipgo.UserAgent {
	ua, err := sipgo.NewUA(sipgo.WithUserAgent(name), sipgo.WithUserAgentHostname(name+".ims.test"),
		sipgo.WithUserAgentTransportLayerOptions(sip.WithTransportLayerLogger(testLogger())),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerLogger(testLogger())))
	Expect(err).NotTo(HaveOccurred())
	return ua
}

// sipPeer is a sipgo server on 127.0.0.1 UDP that answers OPTIONS with code (0: never answers).
type sipPeer struct {
	Addr string
	ua   *sipgo.UserAgent
	pc   net.PacketConn
	done chan struct{}

	mu   sync.Mutex
	code int
	last *sip.Request
}

func startSIPPeer(addr string, code int) *sipPeer {
	p := &sipPeer{code: code, ua: newUA("pcscf1"), done: make(chan struct{})}
	srv, err := sipgo.NewServer(p.ua, sipgo.WithServerLogger(testLogger()))
	Expect(err).NotTo(HaveOccurred())
	srv.OnOptions(func(req *sip.Request, tx sip.ServerTransaction) {
		p.mu.Lock()
		code := p.code
		p.last = req.Clone()
		p.mu.Unlock()
		if code == 0 {
			return
		}
		if err := tx.Respond(sip.NewResponseFromRequest(req, code, "Test", nil)); err != nil {
			GinkgoWriter.Printf("respond: %v\n", err)
		}
	})
	p.pc, err = net.ListenPacket("udp", addr)
	Expect(err).NotTo(HaveOccurred())
	p.Addr = p.pc.LocalAddr().String()
	go func() {
		defer close(p.done)
		_ = srv.ServeUDP(p.pc) // the socket is bound: requests queue until the reader runs
	}()
	DeferCleanup(p.Stop)
	return p
}

// Stop closes the peer's socket: from then on nothing answers (and, over UDP, nothing says so).
func (p *sipPeer) Stop() {
	_ = p.pc.Close()
	_ = p.ua.Close()
	Eventually(p.done).Should(BeClosed())
}

func (p *sipPeer) Last() *sip.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func newProber() *pool.SIPProber {
	ua := newUA("bac")
	DeferCleanup(ua.Close)
	cli, err := sipgo.NewClient(ua, sipgo.WithClientHostname("127.0.0.1"), sipgo.WithClientLogger(testLogger()))
	Expect(err).NotTo(HaveOccurred())
	return pool.NewSIPProber(cli, "bac.ims.test")
}

var _ = Describe("SIPProber", Label("integration"), func() {
	const timeout = 300 * time.Millisecond

	DescribeTable("judges the answer to OPTIONS",
		func(ctx SpecContext, code int, alive bool) {
			peer := startSIPPeer("127.0.0.1:0", code)
			prober := newProber()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			err := prober.Probe(pctx, pool.Target{Name: "pcscf1.ims.test", Addr: peer.Addr})
			if alive {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			var se *pool.StatusError
			Expect(errors.As(err, &se)).To(BeTrue(), "got %v", err)
			Expect(se.Code).To(Equal(code))
		},
		Entry("200 → alive", 200, true, SpecTimeout(5*time.Second)),
		Entry("405 (no OPTIONS handler) → alive", 405, true, SpecTimeout(5*time.Second)),
		Entry("483 → alive", 483, true, SpecTimeout(5*time.Second)),
		Entry("486 → alive", 486, true, SpecTimeout(5*time.Second)),
		Entry("500 → alive", 500, true, SpecTimeout(5*time.Second)),
		Entry("408 → failed", 408, false, SpecTimeout(5*time.Second)),
		Entry("503 → failed", 503, false, SpecTimeout(5*time.Second)),
		Entry("504 → failed", 504, false, SpecTimeout(5*time.Second)),
	)

	It("sends OPTIONS to the target's host from the given host", func(ctx SpecContext) {
		peer := startSIPPeer("127.0.0.1:0", 200)
		Expect(newProber().Probe(ctx, pool.Target{Name: "pcscf1.ims.test", Addr: peer.Addr})).To(Succeed())
		req := peer.Last()
		Expect(req).NotTo(BeNil())
		Expect(req.Method).To(Equal(sip.OPTIONS))
		Expect(req.Recipient.String()).To(Equal("sip:pcscf1.ims.test"))
		Expect(req.From().Address.Host).To(Equal("bac.ims.test"))
		Expect(req.To().Address.Host).To(Equal("pcscf1.ims.test"))
	}, SpecTimeout(5*time.Second))

	It("gives up at the probe timeout, not at Timer F, when nothing answers", func(ctx SpecContext) {
		peer := startSIPPeer("127.0.0.1:0", 0)
		prober := newProber()
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		err := prober.Probe(pctx, pool.Target{Name: "pcscf1.ims.test", Addr: peer.Addr})
		Expect(err).To(MatchError(pool.ErrProbeTimeout))
		Expect(time.Since(start)).To(BeNumerically("<", timeout+300*time.Millisecond))
	}, SpecTimeout(5*time.Second))

	It("marks a live peer up, a stopped one down within Interval×FailuresToDown+Timeout, and up again", func(ctx SpecContext) {
		cfg := pool.HealthConfig{Interval: 200 * time.Millisecond, Timeout: 100 * time.Millisecond, FailuresToDown: 2}
		bound := cfg.Interval*time.Duration(cfg.FailuresToDown) + cfg.Timeout
		peer := startSIPPeer("127.0.0.1:0", 200)
		target := pool.Target{Name: "pcscf1.ims.test", Addr: peer.Addr}
		events := &eventLog{}
		h, err := pool.NewHealth(cfg, newProber(), pool.WithLogger(testLogger()),
			pool.WithEvents(obs.NewRecorder(events, "bac")))
		Expect(err).NotTo(HaveOccurred())
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- h.Run(runCtx) }()
		DeferCleanup(func() {
			stop()
			Eventually(done).Should(Receive(BeNil()))
		})
		h.Watch(target)

		Eventually(h.Snapshot).Should(ContainElement(And(
			HaveField("Probes", BeNumerically(">=", 2)), HaveField("ProbeFailures", BeZero()),
			HaveField("Down", BeFalse()))))

		peer.Stop()
		stopped := time.Now()
		Eventually(func() bool { return h.IsDown(target.Addr) }).
			WithTimeout(bound + time.Second).WithPolling(5 * time.Millisecond).Should(BeTrue())
		Expect(time.Since(stopped)).To(BeNumerically("<", bound+250*time.Millisecond))

		startSIPPeer(peer.Addr, 200)
		Eventually(func() bool { return h.IsDown(target.Addr) }).
			WithTimeout(2 * time.Second).WithPolling(5 * time.Millisecond).Should(BeFalse())
		Expect(events.PeerStates()).To(Equal([]map[string]string{
			peerEvent("pcscf1.ims.test", peer.Addr, "down", "probe_timeout"),
			peerEvent("pcscf1.ims.test", peer.Addr, "up", "probe_ok"),
		}))
	}, SpecTimeout(10*time.Second))
})
