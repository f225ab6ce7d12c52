package sipx_test

import (
	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
)

var _ = Describe("IMS helpers", Label("unit"), func() {
	DescribeTable("HopFor: a host name without port is an SRV walk (RFC 3263 §4.2)",
		func(uri string, want sipx.Hop) {
			u, err := sipx.ParseNameAddr(uri)
			Expect(err).NotTo(HaveOccurred())
			Expect(sipx.HopFor(u)).To(Equal(want))
		},
		Entry("per-host record", "<sip:term@pcscf1.ims.test;lr>", sipx.Hop{Host: "pcscf1.ims.test", SRV: "_sip._udp.pcscf1.ims.test"}),
		Entry("explicit port skips SRV", "<sip:pcscf1.ims.test:5062;lr>", sipx.Hop{Host: "pcscf1.ims.test", Addr: "pcscf1.ims.test:5062"}),
		Entry("IP literal", "sip:user0001@127.0.0.1:5100", sipx.Hop{Host: "127.0.0.1", Addr: "127.0.0.1:5100"}),
		Entry("IP without port", "sip:10.0.0.1", sipx.Hop{Host: "10.0.0.1", Addr: "10.0.0.1:5060"}),
	)

	It("splits header lists outside brackets and quotes", func() {
		Expect(sipx.SplitList(`<sip:a@x;lr>, "b, c" <sip:b@y>,<sip:c@z>`)).To(Equal([]string{
			"<sip:a@x;lr>", `"b, c" <sip:b@y>`, "<sip:c@z>"}))
	})

	It("builds loose-route URIs with flags and no port", func() {
		u := sipx.RouteURI("", "icscf.ims.test", sipx.ParamOrig, sipx.ParamRestore+"=1")
		Expect(sipx.NameAddr(u)).To(Equal("<sip:icscf.ims.test;lr;orig;restore=1>"))
		Expect(sipx.HasParam(u, "orig")).To(BeTrue())
		Expect(sipx.ParamValue(u, "restore")).To(Equal("1"))
	})

	It("reads the address of record of SIP and tel URIs", func() {
		u, _ := sipx.ParseNameAddr("<sip:user0001@ims.test:5060;transport=udp>")
		Expect(sipx.AOR(u)).To(Equal("sip:user0001@ims.test"))
		id, err := sipx.IdentityOf(`"Alice" <tel:+15550001>`)
		Expect(err).NotTo(HaveOccurred())
		Expect(id).To(Equal("tel:+15550001"))
	})

	It("removes every instance of a header, whatever its case", func() {
		req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", Host: "x"})
		req.AppendHeader(sip.NewHeader("P-Asserted-Identity", "<sip:a@x>"))
		req.AppendHeader(sip.NewHeader("p-asserted-identity", "<tel:+1>"))
		sipx.RemoveHeaders(req, sipx.HdrPAssertedIdentity)
		Expect(req.GetHeaders("P-Asserted-Identity")).To(BeEmpty())
	})
})
