package sipx_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// peer is a SIP server that answers every INVITE/OPTIONS/MESSAGE with a scripted response sequence.
type peer struct {
	addr string
	mu   sync.Mutex
	hits int
}

func startPeer(codes ...int) *peer {
	ep, err := sipx.NewEndpoint("peer.test", "127.0.0.1:0", slog.New(slog.NewTextHandler(GinkgoWriter, nil)))
	Expect(err).NotTo(HaveOccurred())
	p := &peer{addr: ep.Addr}
	h := func(req *sip.Request, tx sip.ServerTransaction) {
		p.mu.Lock()
		p.hits++
		p.mu.Unlock()
		for i, c := range codes {
			if i > 0 {
				// sipgo hands each received message to its own goroutine: responses sent back to back may be
				// processed out of order, which a real peer's timing never provokes.
				time.Sleep(50 * time.Millisecond)
			}
			_ = tx.Respond(sip.NewResponseFromRequest(req, c, "scripted", nil))
		}
		if len(codes) > 0 && codes[len(codes)-1] < 200 {
			<-tx.Done()
		}
	}
	ep.Server.OnRequest(sip.MESSAGE, h)
	ep.Server.OnInvite(h)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = ep.Serve(ctx) }()
	Eventually(ep.Listening()).Should(BeClosed())
	DeferCleanup(cancel)
	return p
}

func (p *peer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// deadAddr is a UDP address nobody answers on.
func deadAddr() string {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	return c.LocalAddr().String() // bound but never read: requests vanish
}

func newForwarder(res pool.Resolver) (*sipx.Forwarder, *pool.Health) {
	return newForwarderWith(res, pool.HealthConfig{})
}

func newForwarderWith(res pool.Resolver, hc pool.HealthConfig) (*sipx.Forwarder, *pool.Health) {
	log := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
	ep, err := sipx.NewEndpoint("proxy.test", "127.0.0.1:0", log)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go func() { _ = ep.Serve(ctx) }()
	Eventually(ep.Listening()).Should(BeClosed())
	h, err := pool.NewHealth(hc, pool.ProberFunc(func(context.Context, pool.Target) error { return nil }))
	Expect(err).NotTo(HaveOccurred())
	return sipx.NewForwarder(ep, res, h, sipx.ForwarderConfig{NoAnswer: 300 * time.Millisecond}, nil, log, 1), h
}

func message() *sip.Request {
	req := sip.NewRequest(sip.MESSAGE, sip.Uri{Scheme: "sip", User: "bob", Host: "ims.test"})
	req.AppendHeader(&sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "alice", Host: "ims.test"}, Params: sip.HeaderParams{{K: "tag", V: "1"}}})
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "bob", Host: "ims.test"}})
	cid := sip.CallIDHeader(sip.GenerateTagN(10))
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: 1, MethodName: sip.MESSAGE})
	return req
}

var _ = Describe("Forwarder", Label("integration"), func() {
	It("picks a pool member per request from its seed and the request, whatever came before", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		peers := []*peer{startPeer(200), startPeer(200), startPeer(200)}
		var ts []pool.Target
		for i, p := range peers {
			ts = append(ts, pool.Target{Name: fmt.Sprintf("pcscf%d.ims.test", i+1), Addr: p.addr, Priority: 1, Weight: 10})
		}
		res := pool.NewStaticResolver().SetSRV("_sip._udp.pcscf.ims.test", ts...)
		from := func(user string) *sip.Request {
			req := message()
			req.From().Address.User = user
			return req
		}
		picks := func(seed uint64, warmup int, users []string) map[string]string {
			log := slog.New(slog.NewTextHandler(GinkgoWriter, nil))
			ep, err := sipx.NewEndpoint("proxy.test", "127.0.0.1:0", log)
			Expect(err).NotTo(HaveOccurred())
			ctx, cancel := context.WithCancel(context.Background())
			DeferCleanup(cancel)
			go func() { _ = ep.Serve(ctx) }()
			Eventually(ep.Listening()).Should(BeClosed())
			f := sipx.NewForwarder(ep, res, nil, sipx.ForwarderConfig{NoAnswer: time.Second}, nil, log, seed)
			for i := range warmup { // other requests first: they must not shift the later choices
				f.Forward(sctx, nil, from(fmt.Sprintf("other%d", i)), sipx.SRVHop("pcscf.ims.test"))
			}
			out := map[string]string{}
			for _, u := range users {
				o := f.Forward(sctx, nil, from(u), sipx.SRVHop("pcscf.ims.test"))
				Expect(o.Succeeded()).To(BeTrue(), "%v", o.Err)
				out[u] = o.Target.Name
			}
			return out
		}
		var users []string
		for i := range 24 {
			users = append(users, fmt.Sprintf("user%04d", i+1))
		}
		a := picks(42, 0, users)
		reversed := slices.Clone(users)
		slices.Reverse(reversed)
		Expect(picks(42, 5, reversed)).To(Equal(a), "same seed: same member per user, in any order")
		members := map[string]int{}
		for _, m := range a {
			members[m]++
		}
		Expect(members).To(HaveLen(3), "the users are spread over the pool: %v", members)
		Expect(picks(43, 0, users)).NotTo(Equal(a), "another seed, other choices")
	})

	It("walks priorities, skips a dead target and a 503, and marks the silent one down", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		dead := deadAddr()
		busy := startPeer(503)
		ok := startPeer(200)
		res := pool.NewStaticResolver().SetSRV("_sip._udp.pcscf1.ims.test",
			pool.Target{Name: "pcscf1.ims.test", Addr: dead, Priority: 1, Weight: 10},
			pool.Target{Name: "pcscf2.ims.test", Addr: busy.addr, Priority: 2, Weight: 10},
			pool.Target{Name: "pcscf3.ims.test", Addr: ok.addr, Priority: 3, Weight: 10})
		f, h := newForwarder(res)
		out := f.Forward(sctx, nil, message(), sipx.SRVHop("pcscf1.ims.test"))
		Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Attempts).To(Equal(3))
		Expect(out.Target.Name).To(Equal("pcscf3.ims.test"))
		Expect(h.IsDown(dead)).To(BeTrue(), "no answer marks the peer down")
		Expect(h.IsDown(busy.addr)).To(BeFalse(), "a 503 retries elsewhere but does not mark the peer down")

		By("skipping the known-down target at once next time")
		start := time.Now()
		out = f.Forward(sctx, nil, message(), sipx.SRVHop("pcscf1.ims.test"))
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(time.Since(start)).To(BeNumerically("<", 250*time.Millisecond))
	})

	It("does not take down an address that is not a pool member when a request to it times out", SpecTimeout(10*time.Second), func(sctx SpecContext) {
		// The lab's phones share one socket: one silent phone must not take every phone behind it down.
		phones := deadAddr()
		f, h := newForwarder(pool.NewStaticResolver())
		out := f.Forward(sctx, nil, message(), sipx.AddrHop(phones))
		Expect(out.Final).To(BeNil())
		Expect(out.Err).To(MatchError(sipx.ErrNoAnswer))
		Expect(h.IsDown(phones)).To(BeFalse())
		ts, err := f.Targets(sctx, sipx.AddrHop(phones), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(HaveLen(1), "the next request (an ACK, say) is still sent")
	})

	It("does not send a non-INVITE to another member when the silent one answered since: the silence is further on", SpecTimeout(20*time.Second), func(sctx SpecContext) {
		// pcscf1 is alive (it answers its probes) but waits on its own next hop, a phone that does not answer; a
		// second copy through pcscf2 would wait for the same phone (RFC 4321 §2).
		waiting := startPeer() // takes every request and never answers
		ok := startPeer(200)
		res := pool.NewStaticResolver().SetSRV("_sip._udp.pcscf.ims.test",
			pool.Target{Name: "pcscf1.ims.test", Addr: waiting.addr, Priority: 1, Weight: 10},
			pool.Target{Name: "pcscf2.ims.test", Addr: ok.addr, Priority: 2, Weight: 10})
		f, h := newForwarder(res)
		t1 := pool.Target{Name: "pcscf1.ims.test", Addr: waiting.addr}
		h.Watch(t1) // known (probing off in this rig): Heard below stands for its answered probes
		heard := func() {
			time.Sleep(100 * time.Millisecond)
			h.Heard(t1)
		}
		go heard()
		out := f.Forward(sctx, nil, message(), sipx.SRVHop("pcscf.ims.test"))
		Expect(out.Final).To(BeNil())
		Expect(out.Err).To(MatchError(sipx.ErrNoAnswer))
		Expect(out.Err).To(MatchError(ContainSubstring("not failed over")))
		Expect(out.Attempts).To(Equal(1))
		Expect(ok.count()).To(BeZero(), "no second copy through pcscf2")
		Expect(h.IsDown(waiting.addr)).To(BeFalse())

		By("failing over a non-INVITE whose next hop said nothing since it was sent: that silence is the hop's own")
		out = f.Forward(sctx, nil, message(), sipx.SRVHop("pcscf.ims.test"))
		Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Attempts).To(Equal(2))
		Expect(h.IsDown(waiting.addr)).To(BeTrue())

		By("failing over an INVITE without any answer, heard since or not: it gets 100 Trying from any live hop")
		h.Heard(t1) // not down any more for this rig: bring it back up
		f2, h2 := newForwarder(res)
		h2.Watch(t1)
		go func() {
			time.Sleep(100 * time.Millisecond)
			h2.Heard(t1)
		}()
		inv := message()
		inv.Method = sip.INVITE
		inv.CSeq().MethodName = sip.INVITE
		out = f2.Forward(sctx, nil, inv, sipx.SRVHop("pcscf.ims.test"))
		Expect(out.Final).NotTo(BeNil(), "%v", out.Err)
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Attempts).To(Equal(2))
	})

	It("never retries a final answer other than 408/503/504", SpecTimeout(10*time.Second), func(sctx SpecContext) {
		forbidden := startPeer(403)
		ok := startPeer(200)
		res := pool.NewStaticResolver().SetSRV("_sip._udp.x.ims.test",
			pool.Target{Name: "a", Addr: forbidden.addr, Priority: 1, Weight: 10},
			pool.Target{Name: "b", Addr: ok.addr, Priority: 2, Weight: 10})
		f, _ := newForwarder(res)
		out := f.Forward(sctx, nil, message(), sipx.SRVHop("x.ims.test"))
		Expect(out.Final.StatusCode).To(Equal(403))
		Expect(ok.count()).To(BeZero())
	})

	It("does not retry a 504 with the 3GPP restoration body: the phone must register again", SpecTimeout(10*time.Second), func(sctx SpecContext) {
		ep, err := sipx.NewEndpoint("peer.test", "127.0.0.1:0", slog.New(slog.NewTextHandler(GinkgoWriter, nil)))
		Expect(err).NotTo(HaveOccurred())
		ep.Server.OnRequest(sip.MESSAGE, func(req *sip.Request, tx sip.ServerTransaction) {
			res := sip.NewResponseFromRequest(req, 504, "Server Time-out", vocab.RestorationBody(vocab.ReasonNotRegisteredHere))
			ct := sip.ContentTypeHeader(vocab.ContentType3GPPIMS)
			res.AppendHeader(&ct)
			_ = tx.Respond(res)
		})
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		go func() { _ = ep.Serve(ctx) }()
		Eventually(ep.Listening()).Should(BeClosed())
		plain504, ok := startPeer(504), startPeer(200)
		res := pool.NewStaticResolver().SetSRV("_sip._udp.x.ims.test",
			pool.Target{Name: "a", Addr: plain504.addr, Priority: 1, Weight: 10},
			pool.Target{Name: "b", Addr: ep.Addr, Priority: 2, Weight: 10},
			pool.Target{Name: "c", Addr: ok.addr, Priority: 3, Weight: 10})
		f, _ := newForwarder(res)
		out := f.Forward(sctx, nil, message(), sipx.SRVHop("x.ims.test"))
		Expect(out.Final.StatusCode).To(Equal(504))
		Expect(vocab.IsRestoration(out.Final)).To(BeTrue())
		Expect(out.Attempts).To(Equal(2), "a plain 504 is retried, the restoration 504 is not")
		Expect(out.Retryable()).To(BeFalse())
		Expect(ok.count()).To(BeZero())
	})

	It("does not fail over an INVITE after a non-100 provisional", SpecTimeout(10*time.Second), func(sctx SpecContext) {
		ringingThenBusy := startPeer(180, 503)
		ok := startPeer(200)
		res := pool.NewStaticResolver().SetSRV("_sip._udp.x.ims.test",
			pool.Target{Name: "a", Addr: ringingThenBusy.addr, Priority: 1, Weight: 10},
			pool.Target{Name: "b", Addr: ok.addr, Priority: 2, Weight: 10})
		f, _ := newForwarder(res)
		inv := message()
		inv.Method = sip.INVITE
		inv.CSeq().MethodName = sip.INVITE
		out := f.Forward(sctx, nil, inv, sipx.SRVHop("x.ims.test"))
		Expect(out.Relayed).To(BeTrue())
		Expect(out.Final.StatusCode).To(Equal(503))
		Expect(ok.count()).To(BeZero(), "no double ringing")
	})

	It("answers quickly when every target is down (panic routing off, the default)", SpecTimeout(10*time.Second), func(sctx SpecContext) {
		res := pool.NewStaticResolver().SetSRV("_sip._udp.x.ims.test",
			pool.Target{Name: "a", Addr: deadAddr(), Priority: 1, Weight: 10})
		f, h := newForwarderWith(res, pool.HealthConfig{Panic: false})
		h.TransactionFailed(pool.Target{Name: "a", Addr: mustTarget(res).Addr}, "test")
		start := time.Now()
		out := f.Forward(sctx, nil, message(), sipx.SRVHop("x.ims.test"))
		Expect(out.Final).To(BeNil())
		Expect(out.Err).To(MatchError(ContainSubstring("no reachable target")))
		Expect(time.Since(start)).To(BeNumerically("<", 100*time.Millisecond))
	})
})

var _ = Describe("Forwarder, panic routing", Label("integration"), func() {
	It("sends to members all marked down, and is served by the live one among them", SpecTimeout(10*time.Second), func(sctx SpecContext) {
		// A saturated machine: both members missed their probes and are marked down, but b still answers.
		live := startPeer(200)
		dead := deadAddr()
		res := pool.NewStaticResolver().SetSRV("_sip._udp.x.ims.test",
			pool.Target{Name: "a", Addr: dead, Priority: 1, Weight: 10},
			pool.Target{Name: "b", Addr: live.addr, Priority: 2, Weight: 10})
		f, h := newForwarderWith(res, pool.HealthConfig{Panic: true})
		h.TransactionFailed(pool.Target{Name: "a", Addr: dead}, pool.ReasonTimeout)
		h.TransactionFailed(pool.Target{Name: "b", Addr: live.addr}, pool.ReasonTimeout)
		out := f.Forward(sctx, nil, message(), sipx.SRVHop("x.ims.test"))
		Expect(out.Err).NotTo(HaveOccurred())
		Expect(out.Final).NotTo(BeNil())
		Expect(out.Final.StatusCode).To(Equal(200))
		Expect(out.Attempts).To(Equal(2), "a first (priority 1, no answer), then b")
		Expect(live.count()).To(Equal(1))
		Expect(h.PanicRequests()).To(BeEquivalentTo(2), "both attempts routed in panic")
	})
})

func mustTarget(res pool.Resolver) pool.Target {
	ts, err := res.LookupSRV(context.Background(), "_sip._udp.x.ims.test")
	Expect(err).NotTo(HaveOccurred())
	return ts[0]
}

var _ = sipgo.NewUA // keep the import for helpers above
