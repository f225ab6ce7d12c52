package sipx_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/runtime/overload"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

var _ = Describe("Proxy prelude (overload)", Label("unit"), func() {
	var (
		px      *sipx.Proxy
		phone   *sipxtest.Peer
		ctl     *overload.Controller
		handled atomic.Int64
	)
	BeforeEach(func() {
		handled.Store(0)
		phone = sipxtest.StartPeer("phone.example")
		ep := sipxtest.Bind("pcscf1.ims.test")
		ctl = overload.New(overload.Config{Interval: time.Hour, MaxShed: 1, Step: 1, RetryAfter: 2 * time.Second}, 1)
		DeferCleanup(ctl.Close)
		ep.Overload = ctl
		events := sipxtest.NewEvents("pcscf1")
		px = sipx.NewProxy(sipx.Deps{EP: ep, Res: pool.NewStaticResolver(), Rec: events.Rec, Log: sipxtest.Log(), Seed: 1},
			sipx.ForwarderConfig{}, "pcscf1.ims.test")
		px.Serve(sipx.Handlers{
			Register: func(r *sipx.Request) { handled.Add(1); r.Reply(px, 200, "OK") },
			Request:  func(r *sipx.Request) { handled.Add(1); r.Reply(px, 200, "OK") },
		})
		sipxtest.Serve(ep)
	})

	It("serves new requests while the node keeps up", SpecTimeout(10e9), func(_ SpecContext) {
		res := phone.MustSend(sipxtest.Request(sip.MESSAGE, "sip:user0002@ims.test"), px.EP.Addr)
		Expect(res.StatusCode).To(Equal(200))
		Expect(handled.Load()).To(BeEquivalentTo(1))
	})

	It("answers new requests 503 with Retry-After when overloaded, without running the handler", SpecTimeout(10e9), func(_ SpecContext) {
		ctl.Observe(10 * time.Second) // far above the target: shed everything (MaxShed 1)
		for _, m := range []sip.RequestMethod{sip.REGISTER, sip.INVITE, sip.MESSAGE} {
			res := phone.MustSend(sipxtest.Request(m, "sip:user0002@ims.test"), px.EP.Addr)
			Expect(res.StatusCode).To(Equal(503), string(m))
			ra := res.GetHeader("Retry-After")
			Expect(ra).NotTo(BeNil(), string(m))
			secs, err := strconv.Atoi(ra.Value())
			Expect(err).NotTo(HaveOccurred())
			Expect(secs).To(BeNumerically(">=", 2))
			Expect(secs).To(BeNumerically("<=", 4))
		}
		Expect(handled.Load()).To(BeZero())
		Expect(ctl.Stats().Shed).To(BeEquivalentTo(3))
	})

	It("never sheds a request of an existing dialog (it finishes admitted work) nor a health probe", SpecTimeout(10e9), func(_ SpecContext) {
		ctl.Observe(10 * time.Second)
		bye := sipxtest.Request(sip.BYE, "sip:user0002@ims.test")
		bye.To().Params.Add("tag", "callee1")
		res := phone.MustSend(bye, px.EP.Addr)
		Expect(res.StatusCode).To(Equal(200))
		Expect(handled.Load()).To(BeEquivalentTo(1))
		res = phone.MustSend(sipxtest.Request(sip.OPTIONS, "sip:pcscf1.ims.test"), px.EP.Addr)
		Expect(res.StatusCode).To(Equal(200))
	})
})

var _ = Describe("Proxy prelude (configured rate)", Label("unit"), func() {
	It("holds the phones' new requests to max_rate with 503 + Retry-After, and never the trust domain's", SpecTimeout(20e9), func(_ SpecContext) {
		phone := sipxtest.StartPeer("phone.example")
		pcscf := sipxtest.StartPeer("pcscf1.ims.test")
		ep := sipxtest.Bind("bac.ims.test")
		ctl := overload.New(overload.Config{Interval: time.Hour, MaxRate: 3}, 1)
		DeferCleanup(ctl.Close)
		ep.Overload = ctl
		events := sipxtest.NewEvents("bac")
		px := sipx.NewProxy(sipx.Deps{EP: ep, Res: pool.NewStaticResolver(), Rec: events.Rec, Log: sipxtest.Log(), Seed: 1,
			Trust: sipx.NewTrust(sipx.Peers{PCSCF: []string{pcscf.Addr()}})}, sipx.ForwarderConfig{}, "bac.ims.test")
		px.Serve(sipx.Handlers{Request: func(r *sipx.Request) { r.Reply(px, 200, "OK") }})
		sipxtest.Serve(ep)

		codes := map[int]int{}
		for range 10 { // well within a second: the bucket holds 3
			res := phone.MustSend(sipxtest.Request(sip.MESSAGE, "sip:user0002@ims.test"), px.EP.Addr)
			codes[res.StatusCode]++
			if res.StatusCode == 503 {
				Expect(res.GetHeader("Retry-After")).NotTo(BeNil())
			}
		}
		Expect(codes[200]).To(BeNumerically(">=", 3))
		Expect(codes[200]).To(BeNumerically("<=", 4), "3 tokens, and at most one refilled meanwhile")
		Expect(codes[503]).To(Equal(10 - codes[200]))
		for range 10 {
			res := pcscf.MustSend(sipxtest.Request(sip.MESSAGE, "sip:user0002@ims.test"), px.EP.Addr)
			Expect(res.StatusCode).To(Equal(200), "a request from the trust domain is not rate-limited")
		}
		Expect(ctl.Stats().ShedRate).To(BeEquivalentTo(codes[503]))
	})
})

var _ = Describe("Proxy.Finish with every member down", Label("unit"), func() {
	It("answers 503 with Retry-After, so that phones come back later instead of at once", SpecTimeout(10e9), func(_ SpecContext) {
		phone := sipxtest.StartPeer("phone.example")
		ep := sipxtest.Bind("bac.ims.test")
		events := sipxtest.NewEvents("bac")
		px := sipx.NewProxy(sipx.Deps{EP: ep, Res: pool.NewStaticResolver(), Rec: events.Rec, Log: sipxtest.Log(), Seed: 1},
			sipx.ForwarderConfig{}, "bac.ims.test")
		px.Serve(sipx.Handlers{Request: func(r *sipx.Request) {
			px.Finish(r.Tx, r.Req, sipx.Outcome{Err: fmt.Errorf("pcscf.ims.test: %w", sipx.ErrNoTarget)})
		}})
		sipxtest.Serve(ep)
		res := phone.MustSend(sipxtest.Request(sip.MESSAGE, "sip:user0002@ims.test"), px.EP.Addr)
		Expect(res.StatusCode).To(Equal(503))
		ra := res.GetHeader("Retry-After")
		Expect(ra).NotTo(BeNil())
		Expect(ra.Value()).To(Equal("1"))
	})
})
