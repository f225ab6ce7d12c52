package hss_test

import (
	"encoding/binary"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/cx"
)

// experimentalResult reads Experimental-Result{Vendor-Id 10415, Experimental-Result-Code} from a raw answer (0: none).
func experimentalResult(m *rawAnswer) uint32 {
	for _, a := range m.AVP {
		if a.Code != avp.ExperimentalResult {
			continue
		}
		var vendor, code uint32
		for _, in := range parseAVPs(a.Data) {
			switch in.Code {
			case avp.VendorID:
				vendor = binary.BigEndian.Uint32(in.Data)
			case avp.ExperimentalResultCode:
				code = binary.BigEndian.Uint32(in.Data)
			}
		}
		if vendor == cx.Vendor3GPP {
			return code
		}
	}
	return 0
}

// topLevel returns the values of the top-level AVPs with this code and vendor, in order.
func topLevel(m *rawAnswer, code, vendor uint32) []string {
	var out []string
	for _, a := range m.AVP {
		if a.Code == code && a.Vendor == vendor {
			out = append(out, string(a.Data))
		}
	}
	return out
}

// Issue 34: Kamailio's CSCFs read User-Name before the result code, so an error answer without it shows up at the
// phone as "403 Private identity not found" instead of the real cause.
var _ = Describe("HSS error answers", Label("integration"), func() {
	type echoCase struct {
		host       string // Origin-Host of the raw requester
		req        func() *diam.Message
		wantExp    uint32 // Experimental-Result-Code (0: look at Result-Code)
		wantBase   uint32 // Result-Code
		userName   string // "" = no User-Name expected
		publicID   string
		errMessage bool
	}
	within := SpecTimeout(15 * time.Second)
	DescribeTable("echo the request's User-Name and first Public-Identity", func(_ SpecContext, c echoCase) {
		h := startHSS()
		p := dialRawAs(h.node.DiameterAddr(), c.host)
		ans := p.roundTrip(c.req())
		Expect(experimentalResult(ans)).To(Equal(c.wantExp))
		Expect(resultCode(ans)).To(Equal(c.wantBase))
		if c.userName == "" {
			Expect(topLevel(ans, avp.UserName, 0)).To(BeEmpty())
		} else {
			Expect(topLevel(ans, avp.UserName, 0)).To(Equal([]string{c.userName}))
		}
		Expect(topLevel(ans, 601, cx.Vendor3GPP)).To(Equal([]string{c.publicID}))
		Expect(topLevel(ans, avp.ErrorMessage, 0)).To(HaveLen(1), "the cause stays readable in Error-Message")
	},
		Entry("UAR, unknown user → 5001", echoCase{host: "raw.ims.test", wantExp: 5001,
			userName: "nobody@ims.test", publicID: "sip:nobody@ims.test",
			req: func() *diam.Message {
				return cxRequest(cx.CmdUA,
					diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("nobody@ims.test")),
					cxAVP(601, datatype.UTF8String("sip:nobody@ims.test")),
					cxAVP(600, datatype.OctetString("ims.test")))
			}}, within),
		Entry("UAR without Visited-Network-Identifier → 5005 missing AVP", echoCase{host: "raw.ims.test", wantBase: 5005,
			userName: "alice@ims.test", publicID: "sip:alice@ims.test",
			req: func() *diam.Message {
				return cxRequest(cx.CmdUA,
					diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("alice@ims.test")),
					cxAVP(601, datatype.UTF8String("sip:alice@ims.test")))
			}}, within),
		Entry("LIR, unknown user → 5001 (an LIR has no User-Name)", echoCase{host: "raw.ims.test", wantExp: 5001,
			publicID: "sip:nobody@ims.test",
			req: func() *diam.Message {
				return cxRequest(cx.CmdLI, cxAVP(601, datatype.UTF8String("sip:nobody@ims.test")))
			}}, within),
		Entry("LIR, not registered → 5003", echoCase{host: "raw.ims.test", wantExp: 5003,
			publicID: "sip:alice@ims.test",
			req: func() *diam.Message {
				return cxRequest(cx.CmdLI, cxAVP(601, datatype.UTF8String("sip:alice@ims.test")))
			}}, within),
		Entry("MAR for Digest-MD5 → 5006", echoCase{host: rawSCSCF, wantExp: 5006,
			userName: "alice@ims.test", publicID: "sip:alice@ims.test",
			req: func() *diam.Message {
				return cxRequestAs(rawSCSCF, cx.CmdMA,
					diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("alice@ims.test")),
					cxAVP(601, datatype.UTF8String("sip:alice@ims.test")),
					cxAVP(607, datatype.Unsigned32(1)),
					cxAVP(612, &diam.GroupedAVP{AVP: []*diam.AVP{cxAVP(608, datatype.UTF8String("Digest-MD5"))}}),
					cxAVP(602, datatype.UTF8String(scscf1)))
			}}, within),
		Entry("SAR, unknown user → 5001", echoCase{host: rawSCSCF, wantExp: 5001,
			userName: "nobody@ims.test", publicID: "sip:nobody@ims.test",
			req: func() *diam.Message { return sarRaw(rawSCSCF, "nobody@ims.test", scscf1, cx.SATRegistration) }}, within),
		Entry("SAR with two identities of another user → 5002, the first echoed", echoCase{host: rawSCSCF, wantExp: 5002,
			userName: "alice@ims.test", publicID: "sip:alice@ims.test",
			req: func() *diam.Message {
				m := sarRaw(rawSCSCF, "alice@ims.test", scscf1, cx.SATRegistration)
				m.AddAVP(cxAVP(601, datatype.UTF8String("sip:bob@ims.test")))
				return m
			}}, within),
	)

	It("leaves successful answers as they were: a UAA carries no identities", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS()
		p := dialRaw(h.node.DiameterAddr())
		ans := p.roundTrip(cxRequest(cx.CmdUA,
			diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("alice@ims.test")),
			cxAVP(601, datatype.UTF8String("sip:alice@ims.test")),
			cxAVP(600, datatype.OctetString("ims.test"))))
		Expect(experimentalResult(ans)).To(Equal(uint32(2001)))
		Expect(topLevel(ans, avp.UserName, 0)).To(BeEmpty())
		Expect(topLevel(ans, 601, cx.Vendor3GPP)).To(BeEmpty())
	})

	It("gives the typed client the identities of a failed MAR", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS()
		a, err := h.client.MultimediaAuth(ctx(), &cx.MAR{UserName: "alice@ims.test", PublicIdentity: "sip:alice@ims.test",
			ServerName: scscf1, NumberAuthItems: 1, AuthItem: cx.AuthItem{Scheme: "Digest-MD5"}})
		res, ok := cx.ResultOf(err)
		Expect(ok).To(BeTrue(), "%v", err)
		Expect(res).To(Equal(cx.ErrorAuthSchemeNotSupported))
		Expect(a).NotTo(BeNil())
		Expect(a.UserName).To(Equal("alice@ims.test"))
		Expect(a.PublicIdentity).To(Equal("sip:alice@ims.test"))
		Expect(a.AuthItems).To(BeEmpty())
	})
})
