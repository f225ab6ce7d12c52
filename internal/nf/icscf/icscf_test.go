package icscf_test

import (
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/icscf"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
)

const icscfRoute = "Route: <sip:" + icscfHost + ";lr>"

var _ = Describe("I-CSCF registration (UAR)", Label("integration"), func() {
	var l *lab
	BeforeEach(func() { l = newLab() })

	register := func(hdrs ...string) *sip.Request {
		return sipxtest.Request(sip.REGISTER, "sip:ims.test", append([]string{"To: <" + user1 + ">",
			"Authorization: Digest username=\"user0001@ims.test\", realm=\"ims.test\", nonce=\"\", uri=\"sip:ims.test\", response=\"\""},
			hdrs...)...)
	}

	It("asks the HSS (UAR UAT 0) and forwards to the stored S-CSCF", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onUAR(stored(scscf2))
		res := l.pcscf.MustSend(register(), l.addr)
		Expect(res.StatusCode).To(Equal(200))
		Expect(l.scscf2.Count(sip.REGISTER)).To(Equal(1))
		Expect(l.scscf1.Count(sip.REGISTER)).To(Equal(0))
		uars := l.hss.UARs()
		Expect(uars).To(HaveLen(1))
		Expect(uars[0].AuthorizationType).To(Equal(cx.UATRegistration))
		Expect(uars[0].PublicIdentity).To(Equal(user1))
		Expect(uars[0].UserName).To(Equal("user0001@ims.test"))
		Expect(sipx.Routes(l.scscf2.Last(sip.REGISTER))).To(BeEmpty(), "REGISTER goes by Request-URI, no Route added")
		Expect(l.ev.Of("reselect")).To(BeEmpty())
	})

	It("de-registers with UAT 1", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onUAR(stored(scscf1))
		Expect(l.pcscf.MustSend(register("Expires: 0"), l.addr).StatusCode).To(Equal(200))
		Expect(l.hss.uarTypes()).To(Equal([]cx.UserAuthorizationType{cx.UATDeRegistration}))
	})

	// A de-registration is UAR DE_REGISTRATION however the expiry 0 is written (RFC 3261 §10.2.1: the Contact's
	// expires parameter wins over the Expires header); the I-CSCF used to read the Expires header only.
	DescribeTable("asks UAR DE_REGISTRATION for an expiry of 0, REGISTRATION otherwise",
		func(_ SpecContext, hdrs []string, want cx.UserAuthorizationType) {
			l.hss.onUAR(stored(scscf1))
			Expect(l.pcscf.MustSend(register(hdrs...), l.addr).StatusCode).To(Equal(200))
			Expect(l.hss.uarTypes()).To(Equal([]cx.UserAuthorizationType{want}))
			Expect(l.scscf1.Count(sip.REGISTER)).To(Equal(1), "forwarded to the stored S-CSCF either way")
		},
		Entry("Contact: <…>;expires=0", SpecTimeout(10*time.Second),
			[]string{"Contact: <sip:user0001@127.0.0.1:5999>;expires=0"}, cx.UATDeRegistration),
		Entry("Contact: <…>;expires=0 with Expires: 600 (the parameter wins)", SpecTimeout(10*time.Second),
			[]string{"Contact: <sip:user0001@127.0.0.1:5999>;expires=0", "Expires: 600"}, cx.UATDeRegistration),
		Entry("Expires: 0", SpecTimeout(10*time.Second), []string{"Expires: 0"}, cx.UATDeRegistration),
		Entry("Contact: * with Expires: 0", SpecTimeout(10*time.Second), []string{"Contact: *", "Expires: 0"},
			cx.UATDeRegistration),
		Entry("Contact: <…>;expires=600 with Expires: 0 (the parameter wins)", SpecTimeout(10*time.Second),
			[]string{"Contact: <sip:user0001@127.0.0.1:5999>;expires=600", "Expires: 0"}, cx.UATRegistration),
		Entry("Expires: 600", SpecTimeout(10*time.Second), []string{"Expires: 600"}, cx.UATRegistration),
		Entry("no expiry at all (the registrar's default)", SpecTimeout(10*time.Second), []string{}, cx.UATRegistration),
	)

	It("chooses by capabilities when no S-CSCF is assigned, without a second UAR", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onUAR(func(*cx.UAR) (*cx.UAA, error) {
			return &cx.UAA{Result: cx.Success, ServerCapabilities: &cx.ServerCapabilities{}}, nil
		})
		Expect(l.pcscf.MustSend(register(), l.addr).StatusCode).To(Equal(200))
		Expect(l.scscf1.Count(sip.REGISTER) + l.scscf2.Count(sip.REGISTER)).To(Equal(1))
		Expect(l.hss.uarTypes()).To(Equal([]cx.UserAuthorizationType{cx.UATRegistration}))
	})

	It("re-selects with UAR UAT 2 when the stored S-CSCF is dead (SPEC §4.4)", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onUAR(stored(scscf1))
		silent(l.scscf1)
		res := l.pcscf.MustSend(register(), l.addr)
		Expect(res.StatusCode).To(Equal(200))
		Expect(l.scscf1.Count(sip.REGISTER)).To(BeNumerically(">=", 1), "the stored S-CSCF was tried first")
		Expect(l.scscf2.Count(sip.REGISTER)).To(Equal(1))
		Expect(l.hss.uarTypes()).To(Equal([]cx.UserAuthorizationType{cx.UATRegistration, cx.UATRegistrationAndCapabilities}))
		ev := l.ev.Of("reselect")
		Expect(ev).To(HaveLen(1))
		Expect(ev[0]).To(HaveKeyWithValue("cmd", "UAR"))
		Expect(ev[0]).To(HaveKeyWithValue("tried", ConsistOf(scscf1)))
	})

	It("answers 504 when no S-CSCF is left", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onUAR(stored(scscf1))
		silent(l.scscf1)
		silent(l.scscf2)
		Expect(l.pcscf.MustSend(register(), l.addr).StatusCode).To(Equal(504))
		Expect(l.hss.uarTypes()).To(HaveLen(2))
	})

	It("maps Cx failures: unknown user 403, HSS unreachable 504", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onUAR(nil) // user unknown
		Expect(l.pcscf.MustSend(register(), l.addr).StatusCode).To(Equal(403))
		l.hss.onUAR(func(*cx.UAR) (*cx.UAA, error) { return nil, errUnreachable })
		Expect(l.pcscf.MustSend(register(), l.addr).StatusCode).To(Equal(504))
		Expect(l.scscf1.Count("") + l.scscf2.Count("")).To(Equal(0))
	})

	DescribeTable("refuses a REGISTER from anyone but a P-CSCF, before any UAR",
		func(_ SpecContext, sender func() *peer, role string) {
			l.hss.onUAR(stored(scscf1))
			res := sender().MustSend(register(), l.addr)
			Expect(res.StatusCode).To(Equal(403))
			Expect(l.hss.UARs()).To(BeEmpty())
			Expect(l.scscf1.Count(sip.REGISTER)).To(Equal(0))
			Expect(l.refusals()).To(ConsistOf("register_not_from_pcscf"))
			Expect(l.ev.Of("refused")[0]).To(HaveKeyWithValue("role", role))
		},
		Entry("a stranger", SpecTimeout(10*time.Second), func() *peer { return l.stranger }, "untrusted"),
		Entry("a phone", SpecTimeout(10*time.Second), func() *peer { return l.phone }, "untrusted"),
		Entry("the BAC", SpecTimeout(10*time.Second), func() *peer { return l.bac }, "bac"),
		Entry("an S-CSCF", SpecTimeout(10*time.Second), func() *peer { return l.scscfX }, "scscf"),
	)
})

var _ = Describe("I-CSCF terminating and originating requests (LIR)", Label("integration"), func() {
	var l *lab
	BeforeEach(func() { l = newLab() })

	It("routes a terminating request to the S-CSCF from the LIR (SPEC §3.2)", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onLIR(located(scscf2))
		inv := sipxtest.Request(sip.INVITE, user2, "P-Asserted-Identity: <"+user1+">")
		Expect(l.scscfX.MustSend(inv, l.addr).StatusCode).To(Equal(200))
		lirs := l.hss.LIRs()
		Expect(lirs).To(HaveLen(1))
		Expect(lirs[0].PublicIdentity).To(Equal(user2))
		Expect(lirs[0].Originating).To(BeFalse())
		Expect(lirs[0].AuthorizationType).To(BeNil())
		got := l.scscf2.Last(sip.INVITE)
		Expect(got).NotTo(BeNil())
		Expect(l.scscf1.Count(sip.INVITE)).To(Equal(0))
		top := topRoute(got)
		Expect(top.Host).To(Equal(scscf2))
		Expect(sipx.HasParam(top, sipx.ParamOrig)).To(BeFalse())
		Expect(sipx.HasParam(top, sipx.ParamRestore)).To(BeFalse())
		Expect(sipx.FirstHeader(got, sipx.HdrPAssertedIdentity)).To(ContainSubstring(user1), "asserted by the trust domain: kept")
	})

	It("takes over a terminating user whose S-CSCF is dead: LIR UAT 2, another S-CSCF, restore=1 (SPEC §4.6)", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onLIR(located(scscf1))
		silent(l.scscf1)
		Expect(l.scscfX.MustSend(sipxtest.Request(sip.INVITE, user2), l.addr).StatusCode).To(Equal(200))
		Expect(l.hss.lirUAT2()).To(Equal([]bool{false, true}))
		Expect(l.scscf1.Count(sip.INVITE)).To(BeNumerically(">=", 1))
		got := l.scscf2.Last(sip.INVITE)
		Expect(got).NotTo(BeNil())
		top := topRoute(got)
		Expect(top.Host).To(Equal(scscf2))
		Expect(sipx.ParamValue(top, sipx.ParamRestore)).To(Equal("1"), "the new S-CSCF is told it takes over")
		Expect(sipx.HasParam(top, sipx.ParamOrig)).To(BeFalse())
		ev := l.ev.Of("reselect")
		Expect(ev).To(HaveLen(1))
		Expect(ev[0]).To(HaveKeyWithValue("cmd", "LIR"))
	})

	It("does not take over without the S-CSCF takeover (Restore off): 504, one LIR", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l = newLab(func(c *icscf.Config) { off := false; c.Restore = &off })
		l.hss.onLIR(located(scscf1))
		silent(l.scscf1)
		Expect(l.scscfX.MustSend(sipxtest.Request(sip.MESSAGE, user2), l.addr).StatusCode).To(Equal(504))
		Expect(l.hss.lirUAT2()).To(Equal([]bool{false}))
		Expect(l.scscf2.Count("")).To(Equal(0))
	})

	It("maps Cx failures: unknown user 404, HSS unreachable 504", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onLIR(nil)
		Expect(l.scscfX.MustSend(sipxtest.Request(sip.MESSAGE, user2), l.addr).StatusCode).To(Equal(404))
		l.hss.onLIR(func(*cx.LIR) (*cx.LIA, error) { return nil, errUnreachable })
		Expect(l.scscfX.MustSend(sipxtest.Request(sip.MESSAGE, user2), l.addr).StatusCode).To(Equal(504))
	})

	It("takes over an originating user for a P-CSCF with restore=1: LIR UAT 2 + Originating, orig;restore=1, PAI kept (SPEC §4.1, §4.5)",
		SpecTimeout(10*time.Second), func(_ SpecContext) {
			l.hss.onLIR(located(scscf1))
			silent(l.scscf1)
			inv := sipxtest.Request(sip.INVITE, user2, "Route: <sip:"+icscfHost+";lr;orig;restore=1>",
				"P-Asserted-Identity: <"+user1+">")
			Expect(l.pcscf.MustSend(inv, l.addr).StatusCode).To(Equal(200))
			lirs := l.hss.LIRs()
			Expect(lirs).To(HaveLen(1), "restore=1 asks for the capabilities at once: no second LIR")
			Expect(lirs[0].PublicIdentity).To(Equal(user1), "the served user is the asserted caller")
			Expect(lirs[0].Originating).To(BeTrue())
			Expect(l.hss.lirUAT2()).To(Equal([]bool{true}))
			got := l.scscf2.Last(sip.INVITE)
			Expect(got).NotTo(BeNil())
			top := topRoute(got)
			Expect(top.Host).To(Equal(scscf2))
			Expect(sipx.HasParam(top, sipx.ParamOrig)).To(BeTrue())
			Expect(sipx.ParamValue(top, sipx.ParamRestore)).To(Equal("1"))
			Expect(sipx.FirstHeader(got, sipx.HdrPAssertedIdentity)).To(ContainSubstring(user1))
			Expect(l.refusals()).To(BeEmpty())
		})

	It("sends a restore=1 request to the stored S-CSCF first when it is alive", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l.hss.onLIR(located(scscf1))
		inv := sipxtest.Request(sip.INVITE, user2, "Route: <sip:"+icscfHost+";lr;orig;restore=1>",
			"P-Asserted-Identity: <"+user1+">")
		Expect(l.pcscf.MustSend(inv, l.addr).StatusCode).To(Equal(200))
		Expect(l.scscf1.Count(sip.INVITE)).To(Equal(1))
		Expect(l.scscf2.Count(sip.INVITE)).To(Equal(0))
	})

	It("answers 403 to restore=1 when restoration is not accepted, without LIR", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l = newLab(func(c *icscf.Config) { off := false; c.AcceptRestore = &off })
		l.hss.onLIR(located(scscf1))
		inv := sipxtest.Request(sip.INVITE, user2, "Route: <sip:"+icscfHost+";lr;orig;restore=1>",
			"P-Asserted-Identity: <"+user1+">")
		Expect(l.pcscf.MustSend(inv, l.addr).StatusCode).To(Equal(403))
		Expect(l.hss.LIRs()).To(BeEmpty())
	})
})

var _ = Describe("I-CSCF attack 4: identity and takeover markers from outside the trust domain", Label("integration"), func() {
	var l *lab
	BeforeEach(func() {
		l = newLab()
		l.hss.onLIR(located(scscf1))
	})

	noForward := func() {
		Consistently(func() int { return l.scscf1.Count("") + l.scscf2.Count("") + l.victim.Count("") }).
			WithTimeout(300 * time.Millisecond).Should(BeZero())
	}

	DescribeTable("refuses orig with a forged P-Asserted-Identity, without LIR",
		func(_ SpecContext, sender func() *peer, route string) {
			inv := sipxtest.Request(sip.INVITE, user2, "Route: "+route, "P-Asserted-Identity: <"+user1+">",
				"From: <"+user1+">;tag=forged")
			Expect(sender().MustSend(inv, l.addr).StatusCode).To(Equal(403))
			Expect(l.hss.LIRs()).To(BeEmpty(), "the HSS was never asked")
			Expect(l.refusals()).To(ConsistOf("marker_from_untrusted"))
			noForward()
		},
		Entry("a phone, orig", SpecTimeout(10*time.Second), func() *peer { return l.phone }, "<sip:"+icscfHost+";lr;orig>"),
		Entry("a stranger, orig", SpecTimeout(10*time.Second), func() *peer { return l.stranger }, "<sip:"+icscfHost+";lr;orig>"),
		Entry("a stranger, orig user part", SpecTimeout(10*time.Second), func() *peer { return l.stranger }, "<sip:orig@"+icscfHost+";lr>"),
		Entry("the BAC, orig", SpecTimeout(10*time.Second), func() *peer { return l.bac }, "<sip:"+icscfHost+";lr;orig>"),
		Entry("a stranger, restore=1", SpecTimeout(10*time.Second), func() *peer { return l.stranger }, "<sip:"+icscfHost+";lr;orig;restore=1>"),
	)

	It("refuses restore=1 from an S-CSCF (only a P-CSCF takes over users), without LIR", SpecTimeout(10*time.Second), func(_ SpecContext) {
		inv := sipxtest.Request(sip.INVITE, user2, "Route: <sip:"+icscfHost+";lr;orig;restore=1>",
			"P-Asserted-Identity: <"+user1+">")
		Expect(l.scscfX.MustSend(inv, l.addr).StatusCode).To(Equal(403))
		Expect(l.hss.LIRs()).To(BeEmpty())
		Expect(l.refusals()).To(ConsistOf("restore_not_from_pcscf"))
		noForward()
	})

	It("refuses orig from the trust domain without P-Asserted-Identity (never From), without LIR", SpecTimeout(10*time.Second), func(_ SpecContext) {
		inv := sipxtest.Request(sip.INVITE, user2, "Route: <sip:"+icscfHost+";lr;orig;restore=1>",
			"From: <"+user1+">;tag=a", "P-Preferred-Identity: <"+user1+">")
		Expect(l.pcscf.MustSend(inv, l.addr).StatusCode).To(Equal(403))
		Expect(l.hss.LIRs()).To(BeEmpty())
		Expect(l.refusals()).To(ConsistOf("no_asserted_identity"))
		noForward()
	})

	DescribeTable("serves a terminating request from outside the home network without the identity it claims",
		func(_ SpecContext, sender func() *peer) {
			inv := sipxtest.Request(sip.INVITE, user2, "P-Asserted-Identity: <"+user1+">",
				"P-Preferred-Identity: <"+user1+">", icscfRoute)
			Expect(sender().MustSend(inv, l.addr).StatusCode).To(Equal(200))
			lirs := l.hss.LIRs()
			Expect(lirs).To(HaveLen(1))
			Expect(lirs[0].PublicIdentity).To(Equal(user2), "terminating: the callee")
			Expect(lirs[0].Originating).To(BeFalse())
			got := l.scscf1.Last(sip.INVITE)
			Expect(got).NotTo(BeNil())
			Expect(sipx.FirstHeader(got, sipx.HdrPAssertedIdentity)).To(BeEmpty())
			Expect(sipx.FirstHeader(got, sipx.HdrPPreferredIdentity)).To(BeEmpty())
			top := topRoute(got)
			Expect(top.Host).To(Equal(scscf1))
			Expect(sipx.HasParam(top, sipx.ParamOrig)).To(BeFalse())
			Expect(l.refusals()).To(BeEmpty())
		},
		Entry("a stranger", SpecTimeout(10*time.Second), func() *peer { return l.stranger }),
		Entry("the BAC", SpecTimeout(10*time.Second), func() *peer { return l.bac }),
	)
})

var _ = Describe("I-CSCF takeover of a terminating request from outside the home network", Label("integration"), func() {
	It("marks the new S-CSCF restore=1 but asserts no identity for the stranger", SpecTimeout(10*time.Second), func(_ SpecContext) {
		l := newLab()
		l.hss.onLIR(located(scscf1))
		silent(l.scscf1)
		inv := sipxtest.Request(sip.INVITE, user2, "P-Asserted-Identity: <"+user1+">", "From: <"+user1+">;tag=x")
		Expect(l.stranger.MustSend(inv, l.addr).StatusCode).To(Equal(200))
		Expect(l.hss.lirUAT2()).To(Equal([]bool{false, true}))
		for _, q := range l.hss.LIRs() {
			Expect(q.PublicIdentity).To(Equal(user2))
			Expect(q.Originating).To(BeFalse())
		}
		got := l.scscf2.Last(sip.INVITE)
		Expect(got).NotTo(BeNil())
		top := topRoute(got)
		Expect(sipx.ParamValue(top, sipx.ParamRestore)).To(Equal("1"))
		Expect(sipx.HasParam(top, sipx.ParamOrig)).To(BeFalse(), "never originating service for a stranger")
		Expect(sipx.FirstHeader(got, sipx.HdrPAssertedIdentity)).To(BeEmpty())
	})
})

var _ = Describe("I-CSCF attack 5: in-dialog relay", Label("integration"), func() {
	var l *lab
	BeforeEach(func() { l = newLab() })

	DescribeTable("refuses an in-dialog request from outside the trust domain and forwards nothing",
		func(_ SpecContext, sender func() *peer, viaRoute bool) {
			target := "sip:victim@" + l.victim.Addr()
			hdrs := []string{"To: <" + user2 + ">;tag=abc", "P-Asserted-Identity: <" + user1 + ">"}
			if viaRoute {
				hdrs = append(hdrs, "Route: <sip:"+icscfHost+";lr>", "Route: <sip:"+l.victim.Addr()+";lr>")
				target = user2
			}
			bye := sipxtest.Request(sip.BYE, target, hdrs...)
			Expect(sender().MustSend(bye, l.addr).StatusCode).To(Equal(403))
			Expect(l.refusals()).To(ConsistOf("in_dialog_from_untrusted"))
			Consistently(l.victim.Count).WithArguments(sip.RequestMethod("")).WithTimeout(300 * time.Millisecond).Should(BeZero())
			Expect(l.hss.LIRs()).To(BeEmpty())
		},
		Entry("a stranger, by Request-URI", SpecTimeout(10*time.Second), func() *peer { return l.stranger }, false),
		Entry("a stranger, through our Route", SpecTimeout(10*time.Second), func() *peer { return l.stranger }, true),
		Entry("the BAC, through our Route", SpecTimeout(10*time.Second), func() *peer { return l.bac }, true),
	)

	It("drops an ACK from a stranger routed through it", SpecTimeout(10*time.Second), func(_ SpecContext) {
		ack := sipxtest.Request(sip.ACK, user2, "To: <"+user2+">;tag=abc",
			"Route: <sip:"+icscfHost+";lr>", "Route: <sip:"+l.victim.Addr()+";lr>")
		l.stranger.Fire(ack, l.addr)
		Consistently(l.victim.Count).WithArguments(sip.RequestMethod("")).WithTimeout(500 * time.Millisecond).Should(BeZero())
	})

	It("still relays an in-dialog request from the trust domain", SpecTimeout(10*time.Second), func(_ SpecContext) {
		bye := sipxtest.Request(sip.BYE, user2, "To: <"+user2+">;tag=abc",
			"Route: <sip:"+icscfHost+";lr>", "Route: <sip:"+l.scscf2.Addr()+";lr>")
		Expect(l.scscfX.MustSend(bye, l.addr).StatusCode).To(Equal(200))
		Expect(l.scscf2.Count(sip.BYE)).To(Equal(1))
	})
})
