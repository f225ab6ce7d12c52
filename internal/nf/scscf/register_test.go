package scscf_test

import (
	"sync"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/scscf"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
)

var _ = Describe("registration", Label("integration"), func() {
	var l *lab
	BeforeEach(func() { l = startLab(true) })

	It("registers a user through the I-CSCF with SIP Digest: 401, then 200 and SAR REGISTRATION with the restoration info", func(ctx SpecContext) {
		ch, callID := l.challenge("user0001")
		Expect(ch.Realm).To(Equal("ims.test"))
		Expect(ch.QOP).To(ConsistOf("auth"))
		Expect(ch.Nonce).NotTo(BeEmpty())
		Expect(l.hss.MARs()).To(Equal(1))

		res := l.icscf.MustSend(registerReq("user0001", callID, 2, answer{user: "user0001"}.authorization(ch)), l.addr)
		Expect(res.StatusCode).To(Equal(200))
		Expect(sipx.FirstHeader(res, sipx.HdrServiceRoute)).To(Equal("<sip:orig@scscf1.ims.test;lr>"))
		Expect(sipx.FirstHeader(res, sipx.HdrPath)).To(Equal("<sip:term@pcscf1.ims.test;lr>"))
		Expect(sipx.FirstHeader(res, sipx.HdrPAssociatedURI)).To(Equal("<sip:user0001@ims.test>"))

		sars := l.hss.SARs(cx.SATRegistration)
		Expect(sars).To(HaveLen(1))
		Expect(sars[0].UserName).To(Equal("user0001@ims.test"))
		Expect(sars[0].PublicIdentities).To(Equal([]string{"sip:user0001@ims.test"}))
		ri := sars[0].Restoration
		Expect(ri).NotTo(BeNil())
		Expect(ri.UserName).To(Equal("user0001@ims.test"))
		Expect(ri.AuthScheme).To(Equal(cx.SchemeSIPDigest))
		Expect(ri.Registrations).To(HaveLen(1))
		Expect(ri.Registrations[0].Contact).To(Equal("<sip:user0001@bac.ims.test>"))
		Expect(ri.Registrations[0].Path).To(Equal("<sip:term@pcscf1.ims.test;lr>"))
		Expect(ri.Registrations[0].CallID).To(Equal(callID))
		Expect(ri.Registrations[0].InitialCSeq).To(BeEquivalentTo(2))
		Expect(l.node.Registered()).To(Equal(1))
		Expect(l.ev.Of("registration")).To(ContainElement(HaveKeyWithValue("event", "registered")))

		By("a re-registration is SAR RE_REGISTRATION")
		l.register("user0001")
		Expect(l.hss.SARs(cx.SATReRegistration)).To(HaveLen(1))
	}, SpecTimeout(10e9))

	It("accepts the SIPp form of the first REGISTER (no Authorization: identity from To)", func(ctx SpecContext) {
		res := l.icscf.MustSend(registerReq("user0002", "sipp-1", 1, ""), l.addr)
		ch := challengeOf(res)
		res = l.icscf.MustSend(registerReq("user0002", "sipp-1", 2, answer{user: "user0002"}.authorization(ch)), l.addr)
		Expect(res.StatusCode).To(Equal(200))
	}, SpecTimeout(10e9))

	It("refuses a digest uri other than the Request-URI, such as SIPp's default without -auth_uri (the address it sent to)", func(ctx SpecContext) {
		ch, callID := l.challenge("user0003")
		res := l.icscf.MustSend(registerReq("user0003", callID, 2, answer{user: "user0003", uri: "sip:" + l.bac.Addr()}.authorization(ch)), l.addr)
		Expect(res.StatusCode).To(Equal(401))
		ch = challengeOf(res)
		res = l.icscf.MustSend(registerReq("user0003", callID, 3, answer{user: "user0003"}.authorization(ch)), l.addr)
		Expect(res.StatusCode).To(Equal(200))
	}, SpecTimeout(10e9))

	It("de-registers with Expires 0 (SAR USER_DEREGISTRATION)", func(ctx SpecContext) {
		l.register("user0001")
		ch, callID := l.challenge("user0001")
		req := registerReq("user0001", callID, 2, answer{user: "user0001"}.authorization(ch))
		req.ReplaceHeader(sip.NewHeader("Expires", "0"))
		Expect(l.icscf.MustSend(req, l.addr).StatusCode).To(Equal(200))
		Expect(l.hss.SARs(cx.SATUserDeregistration)).To(HaveLen(1))
		Expect(l.node.Registered()).To(Equal(0))
	}, SpecTimeout(10e9))

	// The same expiry rule as the I-CSCF's UAR type and the P-CSCF's (vocab.RequestedExpiry): the Contact's expires
	// parameter wins over the Expires header.
	DescribeTable("a registered user's REGISTER: SAR USER_DEREGISTRATION for an expiry of 0, RE_REGISTRATION otherwise",
		func(ctx SpecContext, contact, expires string, want cx.ServerAssignmentType, registered int) {
			l.register("user0001")
			ch, callID := l.challenge("user0001")
			req := registerReq("user0001", callID, 2, answer{user: "user0001"}.authorization(ch))
			req.ReplaceHeader(sip.NewHeader("Contact", contact))
			req.ReplaceHeader(sip.NewHeader("Expires", expires))
			Expect(l.icscf.MustSend(req, l.addr).StatusCode).To(Equal(200))
			Expect(l.hss.SARs(want)).To(HaveLen(1))
			Expect(l.node.Registered()).To(Equal(registered))
		},
		Entry("Contact: <…>;expires=0 with Expires: 600", SpecTimeout(10e9),
			"<sip:user0001@bac.ims.test>;expires=0", "600", cx.SATUserDeregistration, 0),
		Entry("Contact: * with Expires: 0", SpecTimeout(10e9), "*", "0", cx.SATUserDeregistration, 0),
		Entry("Contact: <…>;expires=600 with Expires: 0", SpecTimeout(10e9),
			"<sip:user0001@bac.ims.test>;expires=600", "0", cx.SATReRegistration, 1),
	)

	It("answers a wrong password with one new challenge, then 403 and SAR AUTHENTICATION_FAILURE", func(ctx SpecContext) {
		ch, callID := l.challenge("user0001")
		res := l.icscf.MustSend(registerReq("user0001", callID, 2, answer{user: "user0001", password: "guess"}.authorization(ch)), l.addr)
		ch = challengeOf(res)
		res = l.icscf.MustSend(registerReq("user0001", callID, 3, answer{user: "user0001", password: "guess"}.authorization(ch)), l.addr)
		Expect(res.StatusCode).To(Equal(403))
		Expect(l.hss.SARs(cx.SATAuthenticationFailure)).To(HaveLen(1))
		Expect(l.hss.SARs(cx.SATRegistration)).To(BeEmpty())
	}, SpecTimeout(10e9))

	It("answers an unknown user 403 (MAR: user unknown)", func(ctx SpecContext) {
		res := l.icscf.MustSend(registerReq("user0099", "u99", 1, ""), l.addr)
		Expect(res.StatusCode).To(Equal(403))
	}, SpecTimeout(10e9))

	It("refuses a REGISTER from a stranger, the BAC, a P-CSCF or another S-CSCF: 403, refused, no MAR", func(ctx SpecContext) {
		for _, sender := range []struct {
			name string
			send func(*sip.Request) *sip.Response
		}{
			{"stranger", func(r *sip.Request) *sip.Response { return l.stray.MustSend(r, l.addr) }},
			{"bac", func(r *sip.Request) *sip.Response { return l.bac.MustSend(r, l.addr) }},
			{"pcscf", func(r *sip.Request) *sip.Response { return l.pcscf.MustSend(r, l.addr) }},
			{"scscf2", func(r *sip.Request) *sip.Response { return l.scscf2.MustSend(r, l.addr) }},
		} {
			res := sender.send(registerReq("user0001", "stray-"+sender.name, 1, ""))
			Expect(res.StatusCode).To(Equal(403), sender.name)
		}
		Expect(l.hss.MARs()).To(BeZero())
		Expect(l.hss.allSARs()).To(BeZero())
		Expect(l.refused()).To(Equal([]string{"register_not_from_icscf", "register_not_from_icscf", "register_not_from_icscf",
			"register_not_from_icscf"}))
	}, SpecTimeout(10e9))
})

var _ = Describe("digest attacks (attack 9)", Label("integration"), func() {
	var l *lab
	BeforeEach(func() { l = startLab(true) })

	// refusedAnswer sends one forged answer to a fresh challenge and expects no registration.
	refusedAnswer := func(a answer) *sip.Response {
		ch, callID := l.challenge("user0001")
		res := l.icscf.MustSend(registerReq("user0001", callID, 2, a.authorization(ch)), l.addr)
		Expect(res.StatusCode).NotTo(Equal(200))
		Expect(l.hss.SARs(cx.SATRegistration)).To(BeEmpty())
		Expect(l.node.Registered()).To(BeZero())
		return res
	}

	It("refuses a correct response without qop when qop=auth was offered (RFC 2069 downgrade)", func(ctx SpecContext) {
		res := refusedAnswer(answer{user: "user0001", rfc2069: true})
		Expect(res.StatusCode).To(Equal(401))
	}, SpecTimeout(10e9))

	It("refuses a correct response with another qop (auth-int)", func(ctx SpecContext) {
		refusedAnswer(answer{user: "user0001", qop: "auth-int"})
	}, SpecTimeout(10e9))

	It("refuses a correct response for another digest uri", func(ctx SpecContext) {
		refusedAnswer(answer{user: "user0001", uri: "sip:evil.example"})
		refusedAnswer(answer{user: "user0001", uri: "sip:user0001@ims.test"})
	}, SpecTimeout(10e9))

	It("refuses a correct response naming another realm", func(ctx SpecContext) {
		refusedAnswer(answer{user: "user0001", realm: "evil.example"})
	}, SpecTimeout(10e9))

	It("refuses an answer whose username is not the challenged private identity", func(ctx SpecContext) {
		ch, callID := l.challenge("user0001")
		// user0002's correct answer to the nonce issued to user0001, in user0001's REGISTER
		res := l.icscf.MustSend(registerReq("user0001", callID, 2,
			answer{user: "user0002", username: "user0002@ims.test"}.authorization(ch)), l.addr)
		Expect(res.StatusCode).To(Equal(401))
		Expect(l.hss.SARs(cx.SATRegistration)).To(BeEmpty())
	}, SpecTimeout(10e9))

	It("answers a replayed Authorization (consumed nonce) with a fresh challenge, stale=true, never a 200", func(ctx SpecContext) {
		ch, callID := l.challenge("user0001")
		authz := answer{user: "user0001"}.authorization(ch)
		Expect(l.icscf.MustSend(registerReq("user0001", callID, 2, authz), l.addr).StatusCode).To(Equal(200))
		res := l.icscf.MustSend(registerReq("user0001", callID, 3, authz), l.addr)
		again := challengeOf(res)
		Expect(again.Stale).To(BeTrue())
		Expect(again.Nonce).NotTo(Equal(ch.Nonce))
		Expect(l.hss.SARs(cx.SATRegistration)).To(HaveLen(1))
		Expect(l.hss.SARs(cx.SATReRegistration)).To(BeEmpty())
	}, SpecTimeout(10e9))

	It("lets exactly one of concurrent copies of one authorised REGISTER pass", func(ctx SpecContext) {
		const copies = 8
		for round := 0; round < 5; round++ {
			ch, callID := l.challenge("user0001")
			req := registerReq("user0001", callID, 2, answer{user: "user0001"}.authorization(ch))
			codes := make([]int, copies)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range copies {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					<-start
					codes[i] = l.icscf.MustSend(req, l.addr).StatusCode
				}()
			}
			close(start)
			wg.Wait()
			ok := 0
			for _, c := range codes {
				if c == 200 {
					ok++
				} else {
					Expect(c).To(Equal(401))
				}
			}
			Expect(ok).To(Equal(1), "round %d: %v", round, codes)
		}
		Expect(len(l.hss.SARs(cx.SATRegistration)) + len(l.hss.SARs(cx.SATReRegistration))).To(Equal(5))
	}, SpecTimeout(30e9))
})

var _ = Describe("digest uri comparison", Label("unit"), func() {
	ruri := sip.Uri{Scheme: "sip", Host: "ims.test"}
	DescribeTable("against the Request-URI sip:ims.test",
		func(uri string, want bool) { Expect(scscf.SameURI(uri, ruri)).To(Equal(want)) },
		Entry("the phones' and SIPp's form", "sip:ims.test", true),
		Entry("host case", "sip:IMS.Test", true),
		Entry("angle brackets", "<sip:ims.test>", true),
		Entry("default port", "sip:ims.test:5060", true),
		Entry("uri parameters", "sip:ims.test;transport=udp", true),
		Entry("another host", "sip:evil.example", false),
		Entry("another port", "sip:ims.test:5070", false),
		Entry("a user part", "sip:user0001@ims.test", false),
		Entry("sips", "sips:ims.test", false),
		Entry("empty", "", false),
		Entry("garbage", "::::", false),
	)
})
