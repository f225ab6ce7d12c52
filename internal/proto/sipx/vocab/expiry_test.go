package vocab_test

import (
	"strings"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// parse parses a message from header lines as it arrives on the wire.
func parse(first string, hdrs ...string) sip.Message {
	raw := first + "\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK1\r\nFrom: <sip:user0001@ims.test>;tag=1\r\n" +
		"To: <sip:user0001@ims.test>\r\nCall-ID: c1\r\nCSeq: 1 REGISTER\r\n"
	for _, h := range hdrs {
		raw += h + "\r\n"
	}
	msg, err := sip.NewParser().ParseSIP([]byte(raw + "Content-Length: 0\r\n\r\n"))
	Expect(err).NotTo(HaveOccurred())
	return msg
}

func register(hdrs ...string) *sip.Request {
	return parse("REGISTER sip:ims.test SIP/2.0", hdrs...).(*sip.Request)
}

func ok200(hdrs ...string) *sip.Response {
	return parse("SIP/2.0 200 OK", hdrs...).(*sip.Response)
}

const contact = "Contact: <sip:user0001@bac.ims.test>"

var _ = Describe("the expiry of a registration (RFC 3261 §10.2.1, §10.3)", Label("unit"), func() {
	DescribeTable("a REGISTER's requested expiry and whether it de-registers",
		func(hdrs []string, want int, set, dereg bool) {
			req := register(hdrs...)
			n, ok := vocab.RequestedExpiry(req)
			Expect(ok).To(Equal(set))
			if set {
				Expect(n).To(Equal(want))
			}
			Expect(vocab.IsDeregistration(req)).To(Equal(dereg))
		},
		Entry("the Expires header alone", []string{contact, "Expires: 600"}, 600, true, false),
		Entry("Expires: 0 de-registers", []string{contact, "Expires: 0"}, 0, true, true),
		Entry("the Contact's expires parameter alone", []string{contact + ";expires=300"}, 300, true, false),
		Entry("Contact expires=0 de-registers", []string{contact + ";expires=0"}, 0, true, true),
		Entry("the Contact parameter wins over Expires: expires=0 with Expires: 600 de-registers",
			[]string{contact + ";expires=0", "Expires: 600"}, 0, true, true),
		Entry("the Contact parameter wins over Expires: expires=600 with Expires: 0 registers",
			[]string{contact + ";expires=600", "Expires: 0"}, 600, true, false),
		Entry("Contact: * with Expires: 0 removes every binding", []string{"Contact: *", "Expires: 0"}, 0, true, true),
		Entry("neither: the registrar's default applies", []string{contact}, 0, false, false),
		Entry("no Contact, Expires: 0", []string{"Expires: 0"}, 0, true, true),
		Entry("a malformed parameter is no parameter: Expires decides", []string{contact + ";expires=soon", "Expires: 0"}, 0, true, true),
		Entry("a negative parameter is malformed", []string{contact + ";expires=-1", "Expires: 60"}, 60, true, false),
		Entry("a malformed Expires is no Expires", []string{contact, "Expires: never"}, 0, false, false),
		Entry("spaces around Expires are allowed", []string{contact, "Expires:  0 "}, 0, true, true),
		Entry("more than 2**32-1 seconds is read as 2**32-1", []string{contact + ";expires=99999999999999999999"}, 1<<32-1, true, false),
		Entry("the first Contact of a list decides",
			[]string{"Contact: <sip:a@bac.ims.test>;expires=0, <sip:b@bac.ims.test>;expires=600"}, 0, true, true),
	)

	It("reads a Contact built with sip.NewHeader (not parsed off the wire) the same way", func() {
		req := sip.NewRequest(sip.REGISTER, sip.Uri{Scheme: "sip", Host: "ims.test"})
		req.AppendHeader(sip.NewHeader("Contact", "<sip:user0001@bac.ims.test>;expires=0"))
		req.AppendHeader(sip.NewHeader("Expires", "600"))
		Expect(vocab.IsDeregistration(req)).To(BeTrue())
		Expect(vocab.Contacts(req)).To(HaveLen(1))
	})

	It("recognises Contact: *", func() {
		cs := vocab.Contacts(register("Contact: *", "Expires: 0"))
		Expect(cs).To(HaveLen(1))
		Expect(vocab.IsWildcard(cs[0])).To(BeTrue())
		Expect(vocab.IsWildcard(vocab.Contacts(register(contact))[0])).To(BeFalse())
	})

	mine := func(u sip.Uri) bool { return u.User == "me" }
	DescribeTable("the expiry a 2xx to REGISTER grants",
		func(mineFn func(sip.Uri) bool, hdrs []string, want int, set bool) {
			n, ok := vocab.GrantedExpiry(ok200(hdrs...), mineFn)
			Expect(ok).To(Equal(set))
			if set {
				Expect(n).To(Equal(want))
			}
		},
		Entry("the only Contact's parameter", nil, []string{contact + ";expires=600"}, 600, true),
		Entry("the only Contact's parameter wins over Expires", nil, []string{contact + ";expires=0", "Expires: 600"}, 0, true),
		Entry("the Expires header when the Contact has no parameter", nil, []string{contact, "Expires: 300"}, 300, true),
		Entry("nothing granted", nil, []string{contact}, 0, false),
		Entry("no Contact (a de-registration's 200)", nil, []string{}, 0, false),
		Entry("our own binding among several", mine,
			[]string{"Contact: <sip:other@bac.ims.test>;expires=100, <sip:me@bac.ims.test>;expires=200"}, 200, true),
		Entry("several bindings, none ours: the Expires header", mine,
			[]string{"Contact: <sip:a@bac.ims.test>;expires=100, <sip:b@bac.ims.test>;expires=200", "Expires: 50"}, 50, true),
		Entry("several bindings and no way to recognise ours: nothing", nil,
			[]string{"Contact: <sip:a@bac.ims.test>;expires=100, <sip:b@bac.ims.test>;expires=200"}, 0, false),
	)
})

var _ = Describe("the restoration 504 (TS 24.229 §7.6)", Label("unit"), func() {
	req := func() *sip.Request { return register(contact) }
	It("builds a 504 that IsRestoration recognises, with the reason escaped", func() {
		res := vocab.NewRestoration504(req(), "a <b> & c")
		Expect(res.StatusCode).To(Equal(504))
		Expect(vocab.IsRestoration(res)).To(BeTrue())
		Expect(string(res.Body())).To(ContainSubstring("a &lt;b&gt; &amp; c"))
	})
	DescribeTable("what is not a restoration 504",
		func(code int, ct, body string) {
			res := sip.NewResponseFromRequest(req(), code, "x", []byte(body))
			if ct != "" {
				h := sip.ContentTypeHeader(ct)
				res.AppendHeader(&h)
			}
			Expect(vocab.IsRestoration(res)).To(BeFalse())
		},
		Entry("another status", 503, vocab.ContentType3GPPIMS, string(vocab.RestorationBody("x"))),
		Entry("no Content-Type", 504, "", string(vocab.RestorationBody("x"))),
		Entry("another Content-Type", 504, "application/xml", string(vocab.RestorationBody("x"))),
		Entry("another root element", 504, vocab.ContentType3GPPIMS,
			strings.ReplaceAll(string(vocab.RestorationBody("x")), "ims-3gpp", "other")),
		Entry("another action", 504, vocab.ContentType3GPPIMS,
			strings.Replace(string(vocab.RestorationBody("x")), "initial-registration", "reboot", 1)),
		Entry("not XML", 504, vocab.ContentType3GPPIMS, "<ims-3gpp"),
	)
	It("accepts Content-Type parameters and case", func() {
		res := sip.NewResponseFromRequest(req(), 504, "Server Time-out", vocab.RestorationBody("x"))
		h := sip.ContentTypeHeader("Application/3GPP-IMS+XML; charset=utf-8")
		res.AppendHeader(&h)
		Expect(vocab.IsRestoration(res)).To(BeTrue())
	})
})

var _ = Describe("Call-IDs and tags", Label("unit"), func() {
	It("makes fresh Call-IDs at a host and reads them back", func() {
		a, b := vocab.NewCallID("10.0.0.1"), vocab.NewCallID("10.0.0.1")
		Expect(a).To(MatchRegexp(`^[0-9a-f]{24}@10\.0\.0\.1$`))
		Expect(a).NotTo(Equal(b))
		Expect(vocab.CallID(register(contact))).To(Equal("c1"))
		Expect(vocab.NewTag()).To(MatchRegexp(`^[0-9a-f]{12}$`))
	})
	It("reads no Call-ID as empty", func() {
		Expect(vocab.CallID(sip.NewRequest(sip.OPTIONS, sip.Uri{Scheme: "sip", Host: "x"}))).To(BeEmpty())
	})
})
