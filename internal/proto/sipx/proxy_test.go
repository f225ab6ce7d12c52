package sipx_test

import (
	"sync"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

var _ = Describe("Proxy prelude (trust boundary)", Label("unit"), func() {
	var (
		px               *sipx.Proxy
		bac, scscf, evil *sipxtest.Peer
		downstream       *sipxtest.Peer
		events           *sipxtest.Events
		mu               sync.Mutex
		seen             []*sipx.Request
	)
	BeforeEach(func() {
		mu.Lock()
		seen = nil
		mu.Unlock()
		bac, scscf, evil = sipxtest.StartPeer("bac.ims.test"), sipxtest.StartPeer("scscf1.ims.test"), sipxtest.StartPeer("evil.example")
		downstream = sipxtest.StartPeer("scscf2.ims.test")
		res := pool.NewStaticResolver().SetSRV("_sip._udp.scscf2.ims.test",
			pool.Target{Name: "scscf2.ims.test", Addr: downstream.Addr(), Priority: 1, Weight: 10})
		events = sipxtest.NewEvents("pcscf1")
		ep := sipxtest.Bind("pcscf1.ims.test")
		px = sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Rec: events.Rec, Log: sipxtest.Log(), Seed: 1,
			Trust: sipx.NewTrust(sipx.Peers{BAC: []string{bac.Addr()}, SCSCF: []string{scscf.Addr()}})},
			sipx.ForwarderConfig{}, "pcscf1.ims.test")
		px.Serve(sipx.Handlers{
			Register: func(r *sipx.Request) { panic("boom") },
			Request: func(r *sipx.Request) {
				if r.InDialog() {
					px.InDialog(r)
					return
				}
				mu.Lock()
				seen = append(seen, r)
				mu.Unlock()
				r.Reply(px, 200, "OK")
			},
		})
		sipxtest.Serve(ep)
	})
	last := func() *sipx.Request {
		mu.Lock()
		defer mu.Unlock()
		Expect(seen).NotTo(BeEmpty())
		return seen[len(seen)-1]
	}
	invite := func(hdrs ...string) *sip.Request {
		return sipxtest.Request(sip.MESSAGE, "sip:user0002@ims.test", hdrs...)
	}

	It("removes identity headers and markers from an untrusted sender", SpecTimeout(10e9), func(_ SpecContext) {
		res := evil.MustSend(invite("P-Asserted-Identity: <sip:user0001@ims.test>", "P-Preferred-Identity: <sip:user0001@ims.test>",
			"Route: <sip:icscf.ims.test;lr;orig;restore=1>"), px.EP.Addr)
		Expect(res.StatusCode).To(Equal(200))
		r := last()
		Expect(r.Role).To(Equal(sipx.RoleUntrusted))
		Expect(r.Out.GetHeader(sipx.HdrPAssertedIdentity)).To(BeNil())
		Expect(r.Out.GetHeader(sipx.HdrPPreferredIdentity)).To(BeNil())
		Expect(sipx.NameAddr(sipx.Routes(r.Out)[0])).To(Equal("<sip:icscf.ims.test;lr>"), "orig and restore removed from every Route")
	})

	It("keeps the BAC's P-Preferred-Identity but not a P-Asserted-Identity it sends", SpecTimeout(10e9), func(_ SpecContext) {
		bac.MustSend(invite("P-Asserted-Identity: <sip:user0009@ims.test>", "P-Preferred-Identity: <sip:user0001@ims.test>"), px.EP.Addr)
		r := last()
		Expect(r.Role).To(Equal(sipx.RoleBAC))
		Expect(r.Out.GetHeader(sipx.HdrPAssertedIdentity)).To(BeNil())
		Expect(sipx.FirstHeader(r.Out, sipx.HdrPPreferredIdentity)).To(ContainSubstring("user0001"))
	})

	It("keeps identity and markers from the trust domain", SpecTimeout(10e9), func(_ SpecContext) {
		scscf.MustSend(invite("P-Asserted-Identity: <sip:user0001@ims.test>", "Route: <sip:pcscf1.ims.test;lr;orig;restore=1>"), px.EP.Addr)
		r := last()
		Expect(r.Role).To(Equal(sipx.RoleSCSCF))
		Expect(r.Identity()).To(Equal("sip:user0001@ims.test"))
		Expect(r.Orig()).To(BeTrue())
		Expect(r.Restore()).To(BeTrue())
	})

	It("refuses orig or restore=1 on its own Route entry from outside the trust domain", SpecTimeout(10e9), func(_ SpecContext) {
		for _, route := range []string{"<sip:pcscf1.ims.test;lr;restore=1>", "<sip:pcscf1.ims.test;lr;orig>", "<sip:orig@pcscf1.ims.test;lr>"} {
			Expect(bac.MustSend(invite("Route: "+route), px.EP.Addr).StatusCode).To(Equal(403), route)
		}
		mu.Lock()
		Expect(seen).To(BeEmpty())
		mu.Unlock()
		Expect(events.Of("refused")).To(HaveLen(3))
		Expect(events.Of("refused")[0]).To(HaveKeyWithValue("reason", "marker_from_untrusted"))
	})

	It("relays an in-dialog request only with its own Route entry, and from outside only into the home network", SpecTimeout(10e9), func(_ SpecContext) {
		bye := func(route string) *sip.Request {
			return sipxtest.Request(sip.BYE, "sip:user0002@bac.ims.test", "To: <sip:user0002@ims.test>;tag=x1", "Route: "+route)
		}
		Expect(evil.MustSend(bye("<sip:scscf2.ims.test;lr>"), px.EP.Addr).StatusCode).To(Equal(403), "not our dialog")
		Expect(evil.MustSend(bye("<sip:pcscf1.ims.test;lr>, <sip:"+evil.Addr()+";lr>"), px.EP.Addr).StatusCode).To(Equal(403),
			"our Route, then an IP:port: an open relay")
		Expect(evil.MustSend(bye("<sip:pcscf1.ims.test;lr>, <sip:scscf2.ims.test:5999;lr>"), px.EP.Addr).StatusCode).To(Equal(403),
			"a port skips SRV and can name any socket")
		Expect(evil.Count(sip.BYE)).To(BeZero())
		Expect(downstream.Count(sip.BYE)).To(BeZero())
		Expect(bac.MustSend(bye("<sip:pcscf1.ims.test;lr>, <sip:scscf2.ims.test;lr>"), px.EP.Addr).StatusCode).To(Equal(200))
		Expect(downstream.Count(sip.BYE)).To(Equal(1))
		Expect(scscf.MustSend(bye("<sip:scscf2.ims.test;lr>"), px.EP.Addr).StatusCode).To(Equal(200), "the trust domain is relayed")
		Expect(downstream.Count(sip.BYE)).To(Equal(2))
	})

	It("answers 500 to a handler panic and keeps serving", SpecTimeout(10e9), func(_ SpecContext) {
		reg := sipxtest.Request(sip.REGISTER, "sip:ims.test")
		Expect(bac.MustSend(reg, px.EP.Addr).StatusCode).To(Equal(500))
		Expect(events.Of("sip_panic")).To(HaveLen(1))
		Expect(bac.MustSend(invite(), px.EP.Addr).StatusCode).To(Equal(200))
	})

	It("answers 400 to a request without a header every request needs", SpecTimeout(10e9), func(_ SpecContext) {
		req := invite()
		req.RemoveHeader("Call-ID")
		Expect(bac.MustSend(req, px.EP.Addr).StatusCode).To(Equal(400))
		mu.Lock()
		Expect(seen).To(BeEmpty())
		mu.Unlock()
	})
})
