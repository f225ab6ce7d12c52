package sipx_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// slowPeer answers every INVITE 100 Trying after trying, then 200 OK after final (from receipt), unless the INVITE
// was cancelled meanwhile. trying < 0 sends no 100.
type slowPeer struct {
	addr      string
	hits      atomic.Int32
	cancelled atomic.Int32
	answered  atomic.Int32
}

func startSlowPeer(trying, final time.Duration) *slowPeer {
	ep, err := sipx.NewEndpoint("slow.test", "127.0.0.1:0", slog.New(slog.NewTextHandler(GinkgoWriter, nil)))
	Expect(err).NotTo(HaveOccurred())
	p := &slowPeer{addr: ep.Addr}
	ep.Server.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) {
		p.hits.Add(1)
		cancel := make(chan struct{})
		tx.OnCancel(func(*sip.Request) { p.cancelled.Add(1); close(cancel) })
		start := time.Now()
		if trying >= 0 {
			time.Sleep(trying)
			_ = tx.Respond(sip.NewResponseFromRequest(req, 100, "Trying", nil))
		}
		select {
		case <-cancel:
			_ = tx.Respond(sip.NewResponseFromRequest(req, 487, "Request Terminated", nil))
			return
		case <-time.After(final - time.Since(start)):
		}
		p.answered.Add(1)
		_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = ep.Serve(ctx) }()
	Eventually(ep.Listening()).Should(BeClosed())
	DeferCleanup(cancel)
	return p
}

// fastForwarder is a forwarder with fast failure detection: no 1xx within 200 ms fails an INVITE over; the
// ordinary no-answer time is 1.5 s. Probing is off in this rig, so only ProvisionalMissed counts misses.
func fastForwarder(res pool.Resolver) (*sipx.Forwarder, *pool.Health) {
	log := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
	ep, err := sipx.NewEndpoint("proxy.test", "127.0.0.1:0", log)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go func() { _ = ep.Serve(ctx) }()
	Eventually(ep.Listening()).Should(BeClosed())
	h, err := pool.NewHealth(pool.HealthConfig{FailuresToDown: 2}, nil)
	Expect(err).NotTo(HaveOccurred())
	cfg := sipx.ForwarderConfig{NoAnswer: 1500 * time.Millisecond, ProvisionalTimeout: 200 * time.Millisecond}
	return sipx.NewForwarder(ep, res, h, cfg, nil, log, 1), h
}

func inviteReq() *sip.Request {
	inv := message()
	inv.Method = sip.INVITE
	inv.CSeq().MethodName = sip.INVITE
	return inv
}

func peerState(h *pool.Health, addr string) pool.PeerState {
	for _, s := range h.Snapshot() {
		if s.Addr == addr {
			return s
		}
	}
	return pool.PeerState{Addr: addr}
}

var _ = Describe("Forwarder, fast failure detection (provisional timeout)", Label("integration"), func() {
	pair := func(first, second string) pool.Resolver {
		return pool.NewStaticResolver().SetSRV("_sip._udp.pcscf.ims.test",
			pool.Target{Name: "pcscf1.ims.test", Addr: first, Priority: 1, Weight: 10},
			pool.Target{Name: "pcscf2.ims.test", Addr: second, Priority: 2, Weight: 10})
	}

	It("fails an INVITE over when a member sends no provisional answer in time, and counts it as a missed probe", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		dead := deadAddr()
		ok := startPeer(100, 200)
		f, h := fastForwarder(pair(dead, ok.addr))
		start := time.Now()
		out := f.Forward(sctx, nil, inviteReq(), sipx.SRVHop("pcscf.ims.test"))
		took := time.Since(start)
		Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Attempts).To(Equal(2))
		Expect(out.Target.Name).To(Equal("pcscf2.ims.test"))
		Expect(took).To(BeNumerically("<", time.Second), "failed over after 200 ms, not the 1.5 s no-answer time")
		Expect(took).To(BeNumerically(">=", 200*time.Millisecond))

		s := peerState(h, dead)
		Expect(s.ProvisionalMisses).To(BeEquivalentTo(1))
		Expect(s.ConsecutiveFailures).To(Equal(1))
		Expect(s.Down).To(BeFalse(), "one miss is one missed probe: failures_to_down is 2")

		By("a second miss in a row takes the member down")
		out = f.Forward(sctx, nil, inviteReq(), sipx.SRVHop("pcscf.ims.test"))
		Expect(out.Final.StatusCode).To(Equal(200))
		s = peerState(h, dead)
		Expect(s.Down).To(BeTrue())
		Expect(s.Reason).To(Equal(pool.ReasonNoProvisional))

		By("and the next INVITE skips it at once")
		start = time.Now()
		out = f.Forward(sctx, nil, inviteReq(), sipx.SRVHop("pcscf.ims.test"))
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Attempts).To(Equal(1))
		Expect(time.Since(start)).To(BeNumerically("<", 150*time.Millisecond))
	})

	It("keeps a slow member that answers 100 Trying within the timer, however late its final answer", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		slow := startSlowPeer(100*time.Millisecond, 700*time.Millisecond)
		other := startPeer(100, 200)
		f, h := fastForwarder(pair(slow.addr, other.addr))
		for range 3 {
			out := f.Forward(sctx, nil, inviteReq(), sipx.SRVHop("pcscf.ims.test"))
			Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
			Expect(out.Final.StatusCode).To(Equal(200))
			Expect(out.Target.Name).To(Equal("pcscf1.ims.test"))
			Expect(out.Attempts).To(Equal(1))
		}
		Expect(other.count()).To(BeZero(), "never sent elsewhere")
		s := peerState(h, slow.addr)
		Expect(s.Down).To(BeFalse())
		Expect(s.ProvisionalMisses).To(BeZero())
		Expect(slow.cancelled.Load()).To(BeZero())
	})

	It("cancels the INVITE at the member whose 100 Trying came after the failover, so the call is set up once", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		late := startSlowPeer(400*time.Millisecond, 1200*time.Millisecond)
		ok := startPeer(100, 200)
		f, h := fastForwarder(pair(late.addr, ok.addr))
		out := f.Forward(sctx, nil, inviteReq(), sipx.SRVHop("pcscf.ims.test"))
		Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Target.Name).To(Equal("pcscf2.ims.test"))
		Eventually(late.cancelled.Load, 3*time.Second, 20*time.Millisecond).Should(BeEquivalentTo(1),
			"the late 100 Trying is answered with a CANCEL")
		Consistently(late.answered.Load, 1500*time.Millisecond, 100*time.Millisecond).Should(BeZero(),
			"the late member never answers the call it was relieved of")
		s := peerState(h, late.addr)
		Expect(s.ProvisionalMisses).To(BeEquivalentTo(1))
		Expect(s.Down).To(BeFalse(), "alive though slow: one miss does not take it down")
	})

	It("keeps today's rules for a non-INVITE: it waits the no-answer time", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		dead := deadAddr()
		ok := startPeer(200)
		f, h := fastForwarder(pair(dead, ok.addr))
		start := time.Now()
		out := f.Forward(sctx, nil, message(), sipx.SRVHop("pcscf.ims.test"))
		Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(time.Since(start)).To(BeNumerically(">=", 1500*time.Millisecond))
		s := peerState(h, dead)
		Expect(s.ProvisionalMisses).To(BeZero())
		Expect(s.Down).To(BeTrue(), "a timed-out non-INVITE takes the silent peer down at once, as before")
		Expect(s.Reason).To(Equal(pool.ReasonTimeout))
	})

	It("does not apply to an INVITE sent to an address outside the pools (a phone)", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		phone := startSlowPeer(-1, 500*time.Millisecond) // no 100 Trying, rings and answers after 500 ms
		f, _ := fastForwarder(pool.NewStaticResolver())
		out := f.Forward(sctx, nil, inviteReq(), sipx.AddrHop(phone.addr))
		Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Attempts).To(Equal(1))
	})
})

var _ = Describe("Proxy, fast failure detection", Label("integration"), func() {
	It("answers a new INVITE 100 Trying at once, so a member busy with it is not failed over", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		// The member is a Proxy whose handler takes 600 ms (a takeover through the HSS, say) before it answers.
		ep := sipxtest.Bind("pcscf1.ims.test")
		px := sipx.NewProxy(sipx.Deps{EP: ep, Res: pool.NewStaticResolver(), Log: sipxtest.Log(), Seed: 1},
			sipx.ForwarderConfig{ProvisionalTimeout: 200 * time.Millisecond}, "pcscf1.ims.test")
		Expect(px.TryingAtOnce).To(BeTrue())
		px.Serve(sipx.Handlers{Request: func(r *sipx.Request) {
			time.Sleep(600 * time.Millisecond)
			r.Reply(px, 200, "OK")
		}})
		sipxtest.Serve(ep)
		other := startPeer(100, 200)
		f, h := fastForwarder(pool.NewStaticResolver().SetSRV("_sip._udp.pcscf.ims.test",
			pool.Target{Name: "pcscf1.ims.test", Addr: ep.Addr, Priority: 1, Weight: 10},
			pool.Target{Name: "pcscf2.ims.test", Addr: other.addr, Priority: 2, Weight: 10}))
		out := f.Forward(sctx, nil, inviteReq(), sipx.SRVHop("pcscf.ims.test"))
		Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Target.Name).To(Equal("pcscf1.ims.test"))
		Expect(other.count()).To(BeZero())
		Expect(peerState(h, ep.Addr).ProvisionalMisses).To(BeZero())
	})

	It("leaves the 100 Trying to sipgo when fast failure detection is off", func() {
		px := sipx.NewProxy(sipx.Deps{EP: sipxtest.Bind("pcscf1.ims.test"), Res: pool.NewStaticResolver(), Seed: 1},
			sipx.ForwarderConfig{}, "pcscf1.ims.test")
		Expect(px.TryingAtOnce).To(BeFalse())
	})
})
