package bac_test

import (
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/runtime/overload"
)

var _ = Describe("BAC", Label("integration"), func() {
	var tb *testbed
	BeforeEach(func() { tb = startTestbed(tbOpts{}) })

	Describe("legitimate flows", func() {
		It("registers a phone, sends its call as its registered identity and delivers a terminating call to it", SpecTimeout(20*time.Second), func(_ SpecContext) {
			res := tb.register(tb.phone, "user0001")
			Expect(res.StatusCode).To(Equal(200))
			Expect(contactOf(res)).To(ContainSubstring(tb.phone.Addr()), "the phone sees its own Contact in the 200")
			reg := tb.pcscf1.Last(sip.REGISTER)
			Expect(reg).NotTo(BeNil())
			Expect(contactOf(reg)).To(Equal("sip:user0001@" + bacHost))

			res = tb.invite(tb.phone, "user0001", "sip:user0002@ims.test", "P-Asserted-Identity: <sip:user0099@ims.test>",
				"P-Preferred-Identity: <sip:user0099@ims.test>")
			Expect(res.StatusCode).To(Equal(200))
			inv := tb.pcscf1.Last(sip.INVITE)
			Expect(inv).NotTo(BeNil())
			Expect(ppi(inv)).To(Equal("<sip:user0001@ims.test>"))
			Expect(inv.GetHeaders(sipx.HdrPPreferredIdentity)).To(HaveLen(1))
			Expect(inv.GetHeader(sipx.HdrPAssertedIdentity)).To(BeNil())
			Expect(contactOf(inv)).To(Equal("sip:user0001@" + bacHost))

			res = tb.mt(tb.pcscf1, "user0001")
			Expect(res.StatusCode).To(Equal(200))
			Expect(contactOf(res)).To(Equal("sip:user0001@"+bacHost), "the P-CSCF sees the token, not the phone's address")
			got := tb.phone.Last(sip.INVITE)
			Expect(got).NotTo(BeNil())
			Expect(got.Recipient.Host).To(Equal("127.0.0.1"))
			Expect(got.Recipient.Port).To(Equal(tb.phone.EP.Port()))
		})

		It("relays in-dialog BYEs both ways: a phone's along its P-CSCF route set, a P-CSCF's to the phone", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			bye := sipxtest.Request(sip.BYE, "sip:user0002@"+bacHost, "From: <sip:user0001@ims.test>;tag=a",
				"To: <sip:user0002@ims.test>;tag=b", "Route: <sip:pcscf1.ims.test;lr>")
			Expect(tb.phone.MustSend(bye, tb.phoneSide()).StatusCode).To(Equal(200))
			Expect(tb.pcscf1.Count(sip.BYE)).To(Equal(1))

			bye = sipxtest.Request(sip.BYE, "sip:user0001@"+bacHost, "From: <sip:user0002@ims.test>;tag=b",
				"To: <sip:user0001@ims.test>;tag=a")
			Expect(tb.pcscf1.MustSend(bye, tb.core.Addr).StatusCode).To(Equal(200))
			Expect(tb.phone.Count(sip.BYE)).To(Equal(1))
			Expect(tb.refusals()).To(BeEmpty())
		})

		It("moves a phone that registers from a new source, on the 200 only, and emits pcscf_change when its P-CSCF changed", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			tb.pcscf1.OnRequest(func(*sip.Request) (int, []sip.Header) { return 503, nil })
			Expect(tb.register(tb.phone2, "user0001").StatusCode).To(Equal(200))
			Expect(tb.pcscf2.Count(sip.REGISTER)).To(Equal(1))
			Expect(tb.ev.Of("pcscf_change")).To(HaveLen(1))
			Expect(tb.ev.Of("pcscf_change")[0]).To(HaveKeyWithValue("to", "pcscf2.ims.test"))

			Expect(tb.mt(tb.pcscf2, "user0001").StatusCode).To(Equal(200))
			Expect(tb.phone2.Count(sip.INVITE)).To(Equal(1))
			Expect(tb.phone.Count(sip.INVITE)).To(Equal(0))
			Expect(tb.invite(tb.phone, "user0001", "sip:user0002@ims.test").StatusCode).To(Equal(403), "the old source is no phone any more")
		})

		It("removes a binding on a 200 to a de-registration", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			tb.pcscf1.OnRequest(pcscfAnswer("0"))
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			Expect(tb.node.Bindings()).To(Equal(0))
			Expect(tb.mt(tb.pcscf1, "user0001").StatusCode).To(Equal(404))
		})
	})

	// The expiry a 200 grants, by the rule every node shares (vocab.GrantedExpiry): the Contact's expires parameter
	// wins over the Expires header.
	DescribeTable("keeps a phone's binding for the expiry a 200 grants, removes it for 0",
		func(_ SpecContext, param, expires string, bindings int) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			tb.pcscf1.OnRequest(func(req *sip.Request) (int, []sip.Header) {
				if req.Method != sip.REGISTER {
					return 200, nil
				}
				c := &sip.ContactHeader{Address: req.Contact().Address, Params: sip.NewParams()}
				if param != "" {
					c.Params.Add("expires", param)
				}
				return 200, []sip.Header{c, sip.NewHeader("Expires", expires)}
			})
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			Expect(tb.node.Bindings()).To(Equal(bindings))
		},
		Entry("Contact expires=0 with Expires: 600", SpecTimeout(20*time.Second), "0", "600", 0),
		Entry("no parameter, Expires: 0", SpecTimeout(20*time.Second), "", "0", 0),
		Entry("no parameter, Expires: 600", SpecTimeout(20*time.Second), "", "600", 1),
		Entry("Contact expires=600 with Expires: 0", SpecTimeout(20*time.Second), "600", "0", 1),
	)

	It("attack 1: a REGISTER answered 401 does not move the victim's binding; the next call still reaches the victim", SpecTimeout(20*time.Second), func(_ SpecContext) {
		Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
		tb.pcscf1.OnRequest(func(req *sip.Request) (int, []sip.Header) {
			if req.Method == sip.REGISTER {
				return 401, []sip.Header{sip.NewHeader("WWW-Authenticate", `Digest realm="ims.test", nonce="n", qop="auth"`)}
			}
			return 200, nil
		})
		Expect(tb.register(tb.attacker, "user0001").StatusCode).To(Equal(401))

		Expect(tb.mt(tb.pcscf1, "user0001").StatusCode).To(Equal(200))
		Expect(tb.phone.Count(sip.INVITE)).To(Equal(1))
		Expect(tb.attacker.Count(sip.INVITE)).To(Equal(0), "the attacker received user0001's call")
	})

	Describe("attack 2: identity from the source's registration, never from From", func() {
		It("refuses a stranger that only sent a REGISTER (answered 401) and claims a registered user in From", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			tb.pcscf1.OnRequest(func(req *sip.Request) (int, []sip.Header) {
				if req.Method == sip.REGISTER {
					return 401, nil
				}
				return 200, nil
			})
			Expect(tb.register(tb.attacker, "user0099").StatusCode).To(Equal(401))
			invites := tb.pcscf1.Count(sip.INVITE)

			res := tb.invite(tb.attacker, "user0001", "sip:user0002@ims.test")
			Expect(res.StatusCode).To(Equal(403))
			Expect(tb.pcscf1.Count(sip.INVITE)).To(Equal(invites), "the call went on as user0001")
			Expect(tb.refusals()).To(ContainElement("not_registered"))
		})

		It("sends a registered attacker's call as its own identity whatever its From says", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			Expect(tb.register(tb.attacker, "user0099").StatusCode).To(Equal(200))
			Expect(tb.invite(tb.attacker, "user0001", "sip:user0002@ims.test").StatusCode).To(Equal(200))
			Expect(ppi(tb.pcscf1.Last(sip.INVITE))).To(Equal("<sip:user0099@ims.test>"))
		})

		It("lets From select only among the bindings registered from the sender's own source", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			Expect(tb.register(tb.phone, "user0002").StatusCode).To(Equal(200))
			Expect(tb.register(tb.phone2, "user0003").StatusCode).To(Equal(200))

			Expect(tb.invite(tb.phone, "user0002", "sip:user0009@ims.test").StatusCode).To(Equal(200))
			Expect(ppi(tb.pcscf1.Last(sip.INVITE))).To(Equal("<sip:user0002@ims.test>"))
			invites := tb.pcscf1.Count(sip.INVITE)
			Expect(tb.invite(tb.phone, "user0003", "sip:user0009@ims.test").StatusCode).To(Equal(403))
			Expect(tb.pcscf1.Count(sip.INVITE)).To(Equal(invites))
			Expect(tb.refusals()).To(ContainElement("identity_not_registered_from_source"))
		})
	})

	Describe("attack 3: requests towards phones only from the P-CSCFs", func() {
		It("refuses a stranger's INVITE to a phone token and its ACK", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			res := tb.attacker.MustSend(sipxtest.Request(sip.INVITE, "sip:user0001@"+bacHost, "From: <sip:evil@evil.test>;tag=e"), tb.core.Addr)
			Expect(res.StatusCode).To(Equal(403))
			tb.attacker.Fire(sipxtest.Request(sip.ACK, "sip:user0001@"+bacHost, "From: <sip:evil@evil.test>;tag=e",
				"To: <sip:user0001@ims.test>;tag=x", "CSeq: 1 ACK"), tb.core.Addr)
			Eventually(tb.refusals).Should(HaveLen(2))
			Expect(tb.refusals()).To(ConsistOf("to_phone_not_from_pcscf", "no_pcscf_route"))
			Expect(tb.phone.Count("")).To(Equal(0), "the phone received the stranger's request")
		})

		It("refuses a registered phone's new request straight to another phone's token", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			Expect(tb.register(tb.phone2, "user0002").StatusCode).To(Equal(200))
			Expect(tb.invite(tb.phone2, "user0002", "sip:user0001@"+bacHost).StatusCode).To(Equal(403))
			Expect(tb.phone.Count(sip.INVITE)).To(Equal(0))
		})
	})

	Describe("in-dialog requests from phones: no open relay", func() {
		It("refuses a BYE routed to anything but a P-CSCF, and one without a route set to a non-phone", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			bye := sipxtest.Request(sip.BYE, "sip:victim@ims.test", "From: <sip:user0001@ims.test>;tag=a",
				"To: <sip:victim@ims.test>;tag=b", "Route: <sip:"+tb.attacker.Addr()+";lr>")
			Expect(tb.phone.MustSend(bye, tb.phoneSide()).StatusCode).To(Equal(403))
			bye = sipxtest.Request(sip.BYE, "sip:victim@"+tb.attacker.Addr(), "From: <sip:user0001@ims.test>;tag=a",
				"To: <sip:victim@ims.test>;tag=b")
			Expect(tb.phone.MustSend(bye, tb.phoneSide()).StatusCode).To(Equal(403))
			bye = sipxtest.Request(sip.BYE, "sip:victim@ims.test", "From: <sip:user0001@ims.test>;tag=a",
				"To: <sip:victim@ims.test>;tag=b", "Route: <sip:pcscf1.ims.test:"+portOf(tb.attacker.Addr())+";lr>")
			Expect(tb.phone.MustSend(bye, tb.phoneSide()).StatusCode).To(Equal(403))
			Expect(tb.attacker.Count("")).To(Equal(0))
			Expect(tb.refusals()).To(Equal([]string{"route_not_pcscf", "no_pcscf_route", "route_not_pcscf"}))
		})

		It("delivers an in-dialog request between two phones behind the BAC without a route set", SpecTimeout(20*time.Second), func(_ SpecContext) {
			Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
			Expect(tb.register(tb.phone2, "user0002").StatusCode).To(Equal(200))
			bye := sipxtest.Request(sip.BYE, "sip:user0002@"+bacHost, "From: <sip:user0001@ims.test>;tag=a",
				"To: <sip:user0002@ims.test>;tag=b")
			Expect(tb.phone.MustSend(bye, tb.phoneSide()).StatusCode).To(Equal(200))
			Expect(tb.phone2.Count(sip.BYE)).To(Equal(1))
		})
	})

	It("attack 11: bindings are copied under the lock (re-registrations racing terminating calls; run with -race)", SpecTimeout(30*time.Second), func(_ SpecContext) {
		Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(2)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for j := 0; j < 5; j++ {
					Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
				}
			}()
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				for j := 0; j < 5; j++ {
					Expect(tb.mt(tb.pcscf1, "user0001").StatusCode).To(Equal(200))
				}
			}()
		}
		wg.Wait()
		Expect(tb.phone.Count(sip.INVITE)).To(Equal(40))
	})

	It("forgets a binding when its registration expires: no call either way, and the sweep removes it", SpecTimeout(20*time.Second), func(_ SpecContext) {
		tb.pcscf1.OnRequest(pcscfAnswer("60"))
		Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
		Expect(tb.node.Bindings()).To(Equal(1))
		tb.clock.Advance(59 * time.Second)
		Expect(tb.invite(tb.phone, "user0001", "sip:user0002@ims.test").StatusCode).To(Equal(200))
		Expect(tb.node.Bindings()).To(Equal(1))

		tb.clock.Advance(2 * time.Second)
		Expect(tb.invite(tb.phone, "user0001", "sip:user0002@ims.test").StatusCode).To(Equal(403))
		Expect(tb.mt(tb.pcscf1, "user0001").StatusCode).To(Equal(404))
		Expect(tb.phone.Count(sip.INVITE)).To(Equal(0))
		Eventually(tb.node.Bindings).Should(Equal(0))
	})
})

var _ = Describe("BAC binding cap", Label("integration"), func() {
	It("answers a registration beyond MaxPhones 503 with Retry-After and records it; held phones re-register", SpecTimeout(20*time.Second), func(_ SpecContext) {
		tb := startTestbed(tbOpts{maxPhones: 1})
		Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
		res := tb.register(tb.phone2, "user0002")
		Expect(res.StatusCode).To(Equal(503))
		Expect(res.GetHeader("Retry-After")).NotTo(BeNil())
		Expect(tb.pcscf1.Count(sip.REGISTER)).To(Equal(1))
		Expect(tb.ev.Of("refused")).To(ContainElement(HaveKeyWithValue("reason", "max_phones")))
		Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
		Expect(tb.node.Bindings()).To(Equal(1))
	})
})

var _ = Describe("BAC overload control", Label("integration"), func() {
	It("times the core behind it for phones' new requests, and caps phones (never the P-CSCFs) with 503 and Retry-After when it is slow", SpecTimeout(30*time.Second), func(_ SpecContext) {
		ctl := overload.New(overload.Config{Interval: time.Hour, ChainTarget: 50 * time.Millisecond}, 1)
		DeferCleanup(ctl.Close)
		tb := startTestbed(tbOpts{overload: ctl, twoSocket: true})
		answer := pcscfAnswer("600")
		tb.pcscf1.OnRequest(func(req *sip.Request) (int, []sip.Header) {
			time.Sleep(120 * time.Millisecond) // a saturated chain
			return answer(req)
		})
		t := time.Now()
		ctl.EvalChain(t) // the window starts
		for _, u := range []string{"user0001", "user0002", "user0003"} {
			Expect(tb.register(tb.phone, u).StatusCode).To(Equal(200))
		}
		Expect(tb.invite(tb.phone, "user0001", "sip:user0009@ims.test").StatusCode).To(Equal(200))
		t = t.Add(time.Second)
		ctl.EvalChain(t)
		Expect(ctl.Stats().Chain).To(BeNumerically(">=", 120*time.Millisecond), "the median answer time through pcscf1")
		Expect(ctl.Stats().Chain).To(BeNumerically("<", time.Second))
		Expect(ctl.ChainLimit()).To(BeNumerically(">", 0), "above the 50 ms target: phones' new requests are capped")
		Expect(ctl.ChainLimit()).To(BeNumerically("<", 10), "at 85 %% of the few per second admitted (at least 5/s)")

		forwarded := tb.pcscf1.Count(sip.REGISTER)
		refused := 0
		for range 20 {
			if res := tb.register(tb.phone, "user0001"); res.StatusCode == 503 {
				refused++
				Expect(res.GetHeader("Retry-After")).NotTo(BeNil())
			}
		}
		Expect(refused).To(BeNumerically(">=", 14), "20 REGISTERs at once against a cap of a few per second")
		Expect(tb.pcscf1.Count(sip.REGISTER)).To(Equal(forwarded+20-refused), "a refused REGISTER never reaches the core")
		Expect(ctl.Stats().ShedChain).To(BeEquivalentTo(refused))
		for range 5 {
			Expect(tb.mt(tb.pcscf1, "user0001").StatusCode).To(Equal(200), "a P-CSCF's call to a phone is not refused")
		}
	})
})

var _ = Describe("BAC with a socket on each side", Label("integration"), func() {
	var tb *testbed
	BeforeEach(func() { tb = startTestbed(tbOpts{twoSocket: true}) })

	It("registers and calls through the access socket, reaches the P-CSCF from the core socket and the phone from the access socket", SpecTimeout(20*time.Second), func(_ SpecContext) {
		Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
		Expect(tb.pcscf1.Last(sip.REGISTER).Source()).To(Equal(tb.core.Addr))
		Expect(tb.invite(tb.phone, "user0001", "sip:user0002@ims.test").StatusCode).To(Equal(200))
		inv := tb.pcscf1.Last(sip.INVITE)
		Expect(inv.Source()).To(Equal(tb.core.Addr))
		Expect(ppi(inv)).To(Equal("<sip:user0001@ims.test>"))

		Expect(tb.mt(tb.pcscf1, "user0001").StatusCode).To(Equal(200))
		got := tb.phone.Last(sip.INVITE)
		Expect(got).NotTo(BeNil())
		Expect(got.Source()).To(Equal(tb.access.Addr))
		Expect(got.Via().Port).To(Equal(tb.access.Port()), "the phone answers to the access address")

		bye := sipxtest.Request(sip.BYE, "sip:user0002@"+bacHost, "From: <sip:user0001@ims.test>;tag=a",
			"To: <sip:user0002@ims.test>;tag=b", "Route: <sip:pcscf1.ims.test;lr>")
		Expect(tb.phone.MustSend(bye, tb.access.Addr).StatusCode).To(Equal(200))
		Expect(tb.pcscf1.Last(sip.BYE).Source()).To(Equal(tb.core.Addr))
	})

	It("refuses a request to a phone arriving on the access socket, from a stranger or even from a P-CSCF's address", SpecTimeout(20*time.Second), func(_ SpecContext) {
		Expect(tb.register(tb.phone, "user0001").StatusCode).To(Equal(200))
		res := tb.attacker.MustSend(sipxtest.Request(sip.INVITE, "sip:user0001@"+bacHost, "From: <sip:evil@evil.test>;tag=e"), tb.access.Addr)
		Expect(res.StatusCode).To(Equal(403))
		res = tb.pcscf1.MustSend(sipxtest.Request(sip.INVITE, "sip:user0001@"+bacHost, "From: <sip:evil@evil.test>;tag=e"), tb.access.Addr)
		Expect(res.StatusCode).To(Equal(403))
		Expect(tb.phone.Count(sip.INVITE)).To(Equal(0))
	})

	It("serves no phone on the core socket", SpecTimeout(20*time.Second), func(_ SpecContext) {
		res := tb.phone.MustSend(sipxtest.Request(sip.REGISTER, "sip:ims.test", "To: <sip:user0001@ims.test>"), tb.core.Addr)
		Expect(res.StatusCode).To(Equal(403))
		Expect(tb.pcscf1.Count(sip.REGISTER)).To(Equal(0))
		Expect(tb.refusals()).To(ContainElement("register_not_from_access"))
	})
})

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return ""
}
