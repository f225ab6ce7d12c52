package scscf_test

import (
	"fmt"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

const (
	user1 = "sip:user0001@ims.test"
	user5 = "sip:user0005@ims.test"
)

var _ = Describe("calls from the trust domain", Label("integration"), func() {
	var l *lab
	BeforeEach(func() { l = startLab(true) })

	It("forwards an originating request from a P-CSCF with the P-Asserted-Identity of a registered user to the I-CSCF", func(ctx SpecContext) {
		l.register("user0001")
		res := l.pcscf.MustSend(invite("sip:user0002@ims.test", "Route: <sip:orig@scscf1.ims.test;lr>",
			"P-Asserted-Identity: <"+user1+">"), l.addr)
		Expect(res.StatusCode).To(Equal(200))
		got := l.icscf.Last(sip.INVITE)
		Expect(got).NotTo(BeNil())
		Expect(identityOf(got)).To(Equal(user1))
		Expect(got.Recipient.String()).To(Equal("sip:user0002@ims.test"))
		Expect(got.RecordRoute()).NotTo(BeNil())
		Expect(sipx.IsHost(got.RecordRoute().Address, "scscf1.ims.test")).To(BeTrue())
		Expect(l.hss.SARs(cx.SATUnregisteredUser)).To(BeEmpty())
		Expect(l.ev.Of("takeover")).To(BeEmpty())
	}, SpecTimeout(10e9))

	It("takes a user over for an originating request with restore=1 from the I-CSCF (SAR UNREGISTERED_USER) and serves it", func(ctx SpecContext) {
		l.hss.script("sip:user0003@ims.test", "user0003@ims.test")
		res := l.icscf.MustSend(invite("sip:user0002@ims.test", "Route: <sip:scscf1.ims.test;lr;orig;restore=1>",
			"P-Asserted-Identity: <sip:user0003@ims.test>"), l.addr)
		Expect(res.StatusCode).To(Equal(200))
		sars := l.hss.SARs(cx.SATUnregisteredUser)
		Expect(sars).To(HaveLen(1))
		Expect(sars[0].PublicIdentities).To(Equal([]string{"sip:user0003@ims.test"}))
		Expect(sars[0].ServerName).To(Equal("sip:scscf1.ims.test"))
		got := l.icscf.Last(sip.INVITE)
		Expect(got).NotTo(BeNil())
		Expect(identityOf(got)).To(Equal("sip:user0003@ims.test"))
		Expect(l.ev.Of("takeover")).To(ConsistOf(And(HaveKeyWithValue("direction", "mo"), HaveKeyWithValue("restore_marker", true),
			HaveKeyWithValue("impu", "sip:user0003@ims.test"))))
		Expect(l.node.Registered()).To(Equal(1))
	}, SpecTimeout(10e9))

	It("takes a user over for a P-CSCF whose Service-Route names a dead pool member (scscf2)", func(ctx SpecContext) {
		l.hss.script("sip:user0003@ims.test", "user0003@ims.test")
		res := l.pcscf.MustSend(invite("sip:user0002@ims.test", "Route: <sip:orig@scscf2.ims.test;lr>",
			"P-Asserted-Identity: <sip:user0003@ims.test>"), l.addr)
		Expect(res.StatusCode).To(Equal(200))
		Expect(l.hss.SARs(cx.SATUnregisteredUser)).To(HaveLen(1))
		Expect(l.icscf.Count(sip.INVITE)).To(Equal(1))
	}, SpecTimeout(10e9))

	It("delivers a terminating request for a registered user to the registered Contact along the Path", func(ctx SpecContext) {
		l.register("user0001")
		res := l.icscf.MustSend(invite(user1, "P-Asserted-Identity: <sip:user0002@ims.test>"), l.addr)
		Expect(res.StatusCode).To(Equal(200))
		got := l.pcscf.Last(sip.INVITE)
		Expect(got).NotTo(BeNil())
		Expect(got.Recipient.String()).To(Equal("sip:user0001@bac.ims.test"))
		Expect(got.Route()).NotTo(BeNil())
		Expect(got.Route().Address.User).To(Equal("term"))
		Expect(sipx.IsHost(got.Route().Address, "pcscf1.ims.test")).To(BeTrue())
		Expect(sipx.IsHost(got.RecordRoute().Address, "scscf1.ims.test")).To(BeTrue())
		Expect(l.hss.SARs(cx.SATUnregisteredUser)).To(BeEmpty())
	}, SpecTimeout(10e9))

	It("takes a user over for a terminating request from the I-CSCF and delivers it along the restored Path", func(ctx SpecContext) {
		l.hss.script("sip:user0004@ims.test", "user0004@ims.test")
		res := l.icscf.MustSend(invite("sip:user0004@ims.test", "P-Asserted-Identity: <sip:user0002@ims.test>"), l.addr)
		Expect(res.StatusCode).To(Equal(200))
		Expect(l.hss.SARs(cx.SATUnregisteredUser)).To(HaveLen(1))
		got := l.pcscf.Last(sip.INVITE)
		Expect(got).NotTo(BeNil())
		Expect(got.Recipient.String()).To(Equal("sip:user0004@bac.ims.test"))
		Expect(l.ev.Of("takeover")).To(ConsistOf(HaveKeyWithValue("direction", "mt")))
	}, SpecTimeout(10e9))

	It("asks a caller it cannot take over (no restoration data in the HSS) to register again: restoration 504, not 403", func(ctx SpecContext) {
		res := l.icscf.MustSend(invite("sip:user0002@ims.test", "Route: <sip:scscf1.ims.test;lr;orig;restore=1>",
			"P-Asserted-Identity: <sip:user0006@ims.test>"), l.addr)
		Expect(res.StatusCode).To(Equal(504))
		Expect(vocab.IsRestoration(res)).To(BeTrue(), "the 504 carries the restoration body, so the phone registers at once")
		Expect(string(res.Body())).To(ContainSubstring(vocab.ReasonNoRestorationData))
		Expect(l.hss.SARs(cx.SATUnregisteredUser)).To(HaveLen(1), "the takeover was tried first")
		Expect(l.icscf.Count(sip.INVITE)).To(BeZero(), "nothing was forwarded")
		Expect(l.refused()).To(ConsistOf("no_restoration_data"))
		Expect(l.node.Registered()).To(BeZero())
	}, SpecTimeout(10e9))

	It("answers 480 to a terminating request for a user registered nowhere", func(ctx SpecContext) {
		res := l.icscf.MustSend(invite("sip:user0006@ims.test"), l.addr)
		Expect(res.StatusCode).To(Equal(480))
		Expect(l.pcscf.Count(sip.INVITE)).To(BeZero())
	}, SpecTimeout(10e9))

	It("relays an in-dialog request from the trust domain, and one along our own Record-Route with a forged identity removed", func(ctx SpecContext) {
		bye := sipxtest.Request(sip.BYE, "sip:user0001@bac.ims.test", "To: <"+user1+">;tag=callee",
			"Route: <sip:term@pcscf1.ims.test;lr>")
		Expect(l.icscf.MustSend(bye, l.addr).StatusCode).To(Equal(200))
		Expect(l.pcscf.Count(sip.BYE)).To(Equal(1))

		bye = sipxtest.Request(sip.BYE, "sip:user0001@bac.ims.test", "To: <"+user1+">;tag=callee",
			"Route: <sip:scscf1.ims.test;lr>", "Route: <sip:term@pcscf1.ims.test;lr>", "P-Asserted-Identity: <sip:user0009@ims.test>")
		Expect(l.bac.MustSend(bye, l.addr).StatusCode).To(Equal(200))
		Expect(l.pcscf.Count(sip.BYE)).To(Equal(2))
		Expect(identityOf(l.pcscf.Last(sip.BYE))).To(BeEmpty())
	}, SpecTimeout(10e9))
})

var _ = Describe("strangers (attacks 4 and 5)", Label("integration"), func() {
	var l *lab
	BeforeEach(func() {
		l = startLab(true)
		l.register("user0001")
		l.hss.script(user5, "user0005@ims.test")
	})

	noSAR := func() {
		GinkgoHelper()
		Expect(l.hss.SARs(cx.SATUnregisteredUser)).To(BeEmpty())
		Expect(l.ev.Of("takeover")).To(BeEmpty())
	}
	nothingDelivered := func() {
		GinkgoHelper()
		Expect(l.icscf.Count(sip.INVITE)).To(BeZero())
		Expect(l.pcscf.Count(sip.INVITE)).To(BeZero())
	}

	It("refuses an originating request with orig and a forged P-Asserted-Identity from a stranger: 403, refused, no SAR", func(ctx SpecContext) {
		res := l.stray.MustSend(invite("sip:user0002@ims.test", "Route: <sip:orig@scscf1.ims.test;lr>",
			"P-Asserted-Identity: <"+user5+">"), l.addr)
		Expect(res.StatusCode).To(Equal(403))
		Expect(l.refused()).To(ConsistOf("marker_from_untrusted"))
		noSAR()
		nothingDelivered()
	}, SpecTimeout(10e9))

	DescribeTable("refuses an initial request from outside the trust domain (no marker): 403, refused, no SAR",
		func(ctx SpecContext, sender string, ruri string, hdrs []string) {
			from := map[string]*peer{"stranger": l.stray, "bac": l.bac}[sender]
			res := from.MustSend(invite(ruri, hdrs...), l.addr)
			Expect(res.StatusCode).To(Equal(403))
			Expect(l.refused()).To(ConsistOf("initial_request_from_untrusted"))
			noSAR()
			nothingDelivered()
		},
		Entry("stranger, a user registered nowhere here, with a forged PAI", SpecTimeout(10e9), "stranger", "sip:user0002@ims.test",
			[]string{"P-Asserted-Identity: <" + user5 + ">"}),
		Entry("stranger, identity only in From", SpecTimeout(10e9), "stranger", "sip:user0002@ims.test",
			[]string{"From: <" + user5 + ">;tag=x"}),
		Entry("stranger, terminating for a user to take over", SpecTimeout(10e9), "stranger", user5, nil),
		Entry("stranger, terminating for a registered user", SpecTimeout(10e9), "stranger", user1, nil),
		Entry("the BAC, terminating for a user to take over", SpecTimeout(10e9), "bac", user5, nil),
		Entry("the BAC, with a forged PAI", SpecTimeout(10e9), "bac", "sip:user0002@ims.test",
			[]string{"P-Asserted-Identity: <" + user5 + ">"}),
	)

	It("refuses an originating request without P-Asserted-Identity (identity only in From): 403, no SAR", func(ctx SpecContext) {
		res := l.pcscf.MustSend(invite("sip:user0002@ims.test", "Route: <sip:orig@scscf1.ims.test;lr>",
			"From: <"+user5+">;tag=x"), l.addr)
		Expect(res.StatusCode).To(Equal(403))
		Expect(l.refused()).To(ConsistOf("no_asserted_identity"))
		noSAR()
		nothingDelivered()
	}, SpecTimeout(10e9))

	It("takes over for an originating request only on a P-CSCF's or the I-CSCF's word, not another S-CSCF's", func(ctx SpecContext) {
		res := l.scscf2.MustSend(invite("sip:user0002@ims.test", "Route: <sip:scscf1.ims.test;lr;orig>",
			"P-Asserted-Identity: <"+user5+">"), l.addr)
		Expect(res.StatusCode).To(Equal(403))
		Expect(l.refused()).To(ConsistOf("restore_not_from_pcscf_or_icscf"))
		noSAR()
		nothingDelivered()
	}, SpecTimeout(10e9))

	It("takes over for a terminating request only on the I-CSCF's word", func(ctx SpecContext) {
		res := l.pcscf.MustSend(invite(user5, "P-Asserted-Identity: <sip:user0002@ims.test>"), l.addr)
		Expect(res.StatusCode).To(Equal(403))
		Expect(l.refused()).To(ConsistOf("restore_not_from_icscf"))
		noSAR()
		nothingDelivered()
	}, SpecTimeout(10e9))

	It("is no open relay for in-dialog requests from outside the trust domain (To tag, not our Route)", func(ctx SpecContext) {
		for i, route := range []string{"Route: <sip:term@pcscf1.ims.test;lr>", ""} {
			hdrs := []string{"To: <" + user1 + ">;tag=forged", "P-Asserted-Identity: <sip:user0009@ims.test>"}
			if route != "" {
				hdrs = append(hdrs, route)
			}
			ruri := fmt.Sprintf("sip:user0001@%s", l.pcscf.Addr())
			res := l.stray.MustSend(sipxtest.Request(sip.BYE, ruri, hdrs...), l.addr)
			Expect(res.StatusCode).To(Equal(403), "attempt %d", i)
			res = l.stray.MustSend(sipxtest.Request(sip.INVITE, ruri, hdrs...), l.addr)
			Expect(res.StatusCode).To(Equal(403), "attempt %d", i)
		}
		Expect(l.refused()).To(HaveEach("not_our_dialog"))
		Expect(l.refused()).To(HaveLen(4))
		l.stray.Fire(sipxtest.Request(sip.ACK, "sip:user0001@bac.ims.test", "To: <"+user1+">;tag=forged",
			"Route: <sip:term@pcscf1.ims.test;lr>"), l.addr)
		Consistently(func() int { return l.pcscf.Count("") }, 300*time.Millisecond, 50*time.Millisecond).Should(BeZero())
	}, SpecTimeout(10e9))
})

var _ = Describe("without restoration (load-sharing scheme)", Label("integration"), func() {
	It("answers an originating request for a user it does not know with the restoration body, without SAR", func(ctx SpecContext) {
		l := startLab(false)
		l.hss.script(user5, "user0005@ims.test")
		res := l.pcscf.MustSend(invite("sip:user0002@ims.test", "Route: <sip:orig@scscf1.ims.test;lr>",
			"P-Asserted-Identity: <"+user5+">"), l.addr)
		Expect(res.StatusCode).To(Equal(504))
		Expect(vocab.IsRestoration(res)).To(BeTrue())
		Expect(l.hss.allSARs()).To(BeZero())
		res = l.icscf.MustSend(invite(user5), l.addr)
		Expect(res.StatusCode).To(Equal(480))
		Expect(l.hss.allSARs()).To(BeZero())
	}, SpecTimeout(10e9))
})
