package hss_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"net"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/cx"
)

const (
	scscf1 = "sip:scscf1.ims.test"
	scscf2 = "sip:scscf2.ims.test"
)

// state names a registration state the table entries prepare before the request.
type state int

const (
	notRegistered state = iota
	authPending         // MAR from scscf1, no SAR yet
	registered          // MAR + SAR REGISTRATION from scscf1 with restoration info
	unregistered        // SAR UNREGISTERED_USER from scscf1
)

func prepare(h *testHSS, impi string, st state) {
	switch st {
	case authPending:
		_, err := mar(h.client, impi, scscf1)
		Expect(err).NotTo(HaveOccurred())
	case registered:
		register(h.client, impi, scscf1, "pcscf1.ims.test")
	case unregistered:
		_, err := sar(h.client, impi, scscf1, cx.SATUnregisteredUser, nil)
		Expect(err).NotTo(HaveOccurred())
	}
}

func uat(t cx.UserAuthorizationType) *cx.UserAuthorizationType { return &t }

var _ = Describe("HSS Cx procedures", Label("integration"), func() {
	var h *testHSS
	BeforeEach(func() { h = startHSS() })

	type uarCase struct {
		impi, impu, visited string
		st                  state
		uat                 cx.UserAuthorizationType
		want                cx.Result
		wantName            string
		wantCaps            bool
	}
	DescribeTable("UAR", func(c uarCase) {
		prepare(h, c.impi, c.st)
		if c.visited == "" {
			c.visited = "ims.test"
		}
		a, err := h.icscf.UserAuthorization(ctx(), &cx.UAR{UserName: c.impi, PublicIdentity: c.impu,
			VisitedNetworkIdentifier: c.visited, AuthorizationType: c.uat})
		if !c.want.IsSuccess() {
			res, ok := cx.ResultOf(err)
			Expect(ok).To(BeTrue(), "want a Diameter answer, got %v", err)
			Expect(res).To(Equal(c.want))
			return
		}
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Result).To(Equal(c.want))
		Expect(a.ServerName).To(Equal(c.wantName))
		if c.wantCaps {
			Expect(a.ServerCapabilities).NotTo(BeNil())
			Expect(a.ServerCapabilities.Mandatory).To(Equal([]uint32{1}))
			Expect(a.ServerCapabilities.Optional).To(Equal([]uint32{2}))
			Expect(a.ServerCapabilities.ServerNames).To(Equal([]string{scscf1, scscf2}))
		} else {
			Expect(a.ServerCapabilities).To(BeNil())
		}
	},
		Entry("unknown public identity → 5001", uarCase{impi: "nobody@ims.test", impu: "sip:nobody@ims.test", want: cx.ErrorUserUnknown}),
		Entry("unknown private identity → 5001", uarCase{impi: "nobody@ims.test", impu: "sip:alice@ims.test", want: cx.ErrorUserUnknown}),
		Entry("identities of two users → 5002", uarCase{impi: "bob@ims.test", impu: "sip:alice@ims.test", want: cx.ErrorIdentitiesDontMatch}),
		Entry("visited network not allowed → 5004", uarCase{impi: "carol@ims.test", impu: "sip:carol@ims.test", visited: "other.test", want: cx.ErrorRoamingNotAllowed}),
		Entry("UAT 0, not registered → 2001 first registration + capabilities",
			uarCase{impi: "alice@ims.test", impu: "sip:alice@ims.test", want: cx.FirstRegistration, wantCaps: true}),
		Entry("UAT 0, second IMPU of the same user → 2001",
			uarCase{impi: "alice@ims.test", impu: "tel:+15550001", want: cx.FirstRegistration, wantCaps: true}),
		Entry("UAT 0, authentication pending → 2002 + pending S-CSCF",
			uarCase{impi: "alice@ims.test", impu: "sip:alice@ims.test", st: authPending, want: cx.SubsequentRegistration, wantName: scscf1}),
		Entry("UAT 0, registered → 2002 subsequent registration + Server-Name",
			uarCase{impi: "alice@ims.test", impu: "sip:alice@ims.test", st: registered, want: cx.SubsequentRegistration, wantName: scscf1}),
		Entry("UAT 0, unregistered (kept by an S-CSCF) → 2002 + Server-Name",
			uarCase{impi: "bob@ims.test", impu: "sip:bob@ims.test", st: unregistered, want: cx.SubsequentRegistration, wantName: scscf1}),
		Entry("UAT 1, registered → Result-Code 2001 + Server-Name",
			uarCase{impi: "alice@ims.test", impu: "sip:alice@ims.test", st: registered, uat: cx.UATDeRegistration, want: cx.Success, wantName: scscf1}),
		Entry("UAT 1, not registered → 5003",
			uarCase{impi: "alice@ims.test", impu: "sip:alice@ims.test", uat: cx.UATDeRegistration, want: cx.ErrorIdentityNotRegistered}),
		Entry("UAT 2, registered → Result-Code 2001 + capabilities only",
			uarCase{impi: "alice@ims.test", impu: "sip:alice@ims.test", st: registered, uat: cx.UATRegistrationAndCapabilities, want: cx.Success, wantCaps: true}),
		Entry("UAT 2, not registered → Result-Code 2001 + capabilities only",
			uarCase{impi: "alice@ims.test", impu: "sip:alice@ims.test", uat: cx.UATRegistrationAndCapabilities, want: cx.Success, wantCaps: true}),
		Entry("UAT 7 (undefined) → 5004 invalid AVP value",
			uarCase{impi: "alice@ims.test", impu: "sip:alice@ims.test", uat: 7, want: cx.InvalidAVPValue}),
	)

	type lirCase struct {
		impu        string
		impi        string // whose state to prepare
		st          state
		originating bool
		uat         *cx.UserAuthorizationType
		want        cx.Result
		wantName    string
		wantCaps    bool
	}
	DescribeTable("LIR", func(c lirCase) {
		if c.impi != "" {
			prepare(h, c.impi, c.st)
		}
		a, err := h.icscf.LocationInfo(ctx(), &cx.LIR{PublicIdentity: c.impu, Originating: c.originating, AuthorizationType: c.uat})
		if !c.want.IsSuccess() {
			res, ok := cx.ResultOf(err)
			Expect(ok).To(BeTrue(), "want a Diameter answer, got %v", err)
			Expect(res).To(Equal(c.want))
			return
		}
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Result).To(Equal(c.want))
		Expect(a.ServerName).To(Equal(c.wantName))
		Expect(a.ServerCapabilities != nil).To(Equal(c.wantCaps))
	},
		Entry("unknown → 5001", lirCase{impu: "sip:nobody@ims.test", want: cx.ErrorUserUnknown}),
		Entry("registered → 2001 + Server-Name",
			lirCase{impu: "sip:alice@ims.test", impi: "alice@ims.test", st: registered, want: cx.Success, wantName: scscf1}),
		Entry("registered, by its tel URI → 2001 + Server-Name",
			lirCase{impu: "tel:+15550001", impi: "alice@ims.test", st: registered, want: cx.Success, wantName: scscf1}),
		Entry("registered, UAT 2 (takeover query) → 2001 + Server-Name + capabilities",
			lirCase{impu: "sip:alice@ims.test", impi: "alice@ims.test", st: registered, uat: uat(cx.UATRegistrationAndCapabilities), want: cx.Success, wantName: scscf1, wantCaps: true}),
		Entry("registered, UAT 2 + Originating-Request → 2001 + Server-Name + capabilities",
			lirCase{impu: "sip:alice@ims.test", impi: "alice@ims.test", st: registered, originating: true, uat: uat(cx.UATRegistrationAndCapabilities), want: cx.Success, wantName: scscf1, wantCaps: true}),
		Entry("not registered, no unregistered services → 5003",
			lirCase{impu: "sip:alice@ims.test", want: cx.ErrorIdentityNotRegistered}),
		Entry("not registered, unregistered services → 2003 + capabilities",
			lirCase{impu: "sip:bob@ims.test", want: cx.UnregisteredService, wantCaps: true}),
		Entry("not registered, Originating-Request → 2003 + capabilities",
			lirCase{impu: "sip:alice@ims.test", originating: true, want: cx.UnregisteredService, wantCaps: true}),
		Entry("unregistered state → 2001 + Server-Name",
			lirCase{impu: "sip:bob@ims.test", impi: "bob@ims.test", st: unregistered, want: cx.Success, wantName: scscf1}),
	)

	Describe("MAR", func() {
		It("returns SIP Digest credentials and records the S-CSCF as authentication-pending", SpecTimeout(10*time.Second), func(_ SpecContext) {
			a, err := mar(h.scscf(scscf2), "user0001@ims.test", scscf2)
			Expect(err).NotTo(HaveOccurred())
			Expect(a.Result).To(Equal(cx.Success))
			Expect(a.UserName).To(Equal("user0001@ims.test"))
			Expect(a.AuthItems).To(HaveLen(1))
			it := a.AuthItems[0]
			Expect(it.Scheme).To(Equal(cx.SchemeSIPDigest))
			sum := md5.Sum([]byte("user0001@ims.test:ims.test:pass0001"))
			Expect(it.Digest).To(Equal(&cx.DigestAuthenticate{Realm: "ims.test", Algorithm: "MD5", QoP: "auth", HA1: hex.EncodeToString(sum[:])}))
			reg := h.registration("user0001@ims.test")
			Expect(reg).To(HaveKeyWithValue("auth_pending", scscf2))
			Expect(reg).To(HaveKeyWithValue("state", "not_registered"))
		})
		DescribeTable("errors", func(impi, impu, scheme string, want cx.Result) {
			_, err := h.client.MultimediaAuth(ctx(), &cx.MAR{UserName: impi, PublicIdentity: impu, ServerName: scscf1,
				NumberAuthItems: 1, AuthItem: cx.AuthItem{Scheme: scheme}})
			res, ok := cx.ResultOf(err)
			Expect(ok).To(BeTrue(), "%v", err)
			Expect(res).To(Equal(want))
		},
			Entry("AKA requested → 5006", "alice@ims.test", "sip:alice@ims.test", cx.SchemeAKAv1MD5, cx.ErrorAuthSchemeNotSupported),
			Entry("subscriber provisioned for AKA → 5006", "dave@ims.test", "sip:dave@ims.test", cx.SchemeUnknown, cx.ErrorAuthSchemeNotSupported),
			Entry("unknown user → 5001", "nobody@ims.test", "sip:nobody@ims.test", cx.SchemeSIPDigest, cx.ErrorUserUnknown),
			Entry("identities of two users → 5002", "bob@ims.test", "sip:alice@ims.test", cx.SchemeSIPDigest, cx.ErrorIdentitiesDontMatch),
		)
		// Scheme names are compared regardless of case: Kamailio's "HSS-Selected" algorithm sends "unknown".
		DescribeTable("serves SIP Digest whatever the case of the scheme's name", func(scheme string) {
			a, err := h.client.MultimediaAuth(ctx(), &cx.MAR{UserName: "alice@ims.test", PublicIdentity: "sip:alice@ims.test",
				ServerName: scscf1, NumberAuthItems: 1, AuthItem: cx.AuthItem{Scheme: scheme}})
			Expect(err).NotTo(HaveOccurred())
			Expect(a.Result).To(Equal(cx.Success))
			Expect(a.AuthItems).To(HaveLen(1))
			Expect(a.AuthItems[0].Scheme).To(Equal(cx.SchemeSIPDigest))
			Expect(a.AuthItems[0].Digest).NotTo(BeNil())
			Expect(a.AuthItems[0].Digest.HA1).To(HaveLen(32))
		},
			Entry("Unknown (the HSS chooses)", cx.SchemeUnknown),
			Entry("unknown (Kamailio's HSS-Selected)", "unknown"),
			Entry("UNKNOWN", "UNKNOWN"),
			Entry("no scheme at all", ""),
			Entry("SIP Digest", cx.SchemeSIPDigest),
			Entry("sip digest", "sip digest"),
			Entry("SIP DIGEST", "SIP DIGEST"),
		)
		DescribeTable("refuses the schemes it cannot serve with 5006", func(scheme string) {
			_, err := h.client.MultimediaAuth(ctx(), &cx.MAR{UserName: "alice@ims.test", PublicIdentity: "sip:alice@ims.test",
				ServerName: scscf1, NumberAuthItems: 1, AuthItem: cx.AuthItem{Scheme: scheme}})
			res, ok := cx.ResultOf(err)
			Expect(ok).To(BeTrue(), "want a Diameter answer, got %v", err)
			Expect(res).To(Equal(cx.ErrorAuthSchemeNotSupported))
			Expect(h.registration("alice@ims.test")).NotTo(HaveKeyWithValue("auth_pending", scscf1),
				"a refused MAR must not record the S-CSCF")
		},
			Entry("Digest-MD5 (Kamailio's default: needs a cleartext password)", "Digest-MD5"),
			Entry("digest-md5", "digest-md5"),
			Entry("digest-akav1-md5", "digest-akav1-md5"),
			Entry("Digest-AKAv1-MD5", cx.SchemeAKAv1MD5),
			Entry("SIP Digest with a trailing space", "SIP Digest "),
		)
	})

	type sarCase struct {
		st         state
		server     string
		sat        cx.ServerAssignmentType
		rest       bool // send restoration info (pcscf2)
		udaa       bool
		want       cx.Result
		wantState  string
		wantName   string // stored S-CSCF afterwards ("" = none)
		wantRest   string // P-CSCF in stored restoration info afterwards ("" = none stored)
		returnRest string // P-CSCF in the restoration info the SAA returns ("" = none)
		wantData   bool
	}
	DescribeTable("SAR", func(c sarCase) {
		const impi = "alice@ims.test"
		prepare(h, impi, c.st)
		var rest *cx.SCSCFRestorationInfo
		if c.rest {
			rest = restorationFor(impi, "pcscf2.ims.test")
		}
		a, err := h.scscf(c.server).ServerAssignment(ctx(), &cx.SAR{UserName: impi, PublicIdentities: []string{"sip:alice@ims.test"},
			ServerName: c.server, AssignmentType: c.sat, Restoration: rest, UserDataAlreadyAvailable: c.udaa})
		if !c.want.IsSuccess() {
			res, ok := cx.ResultOf(err)
			Expect(ok).To(BeTrue(), "want a Diameter answer, got %v", err)
			Expect(res).To(Equal(c.want))
		} else {
			Expect(err).NotTo(HaveOccurred())
			Expect(a.Result).To(Equal(c.want))
			if c.returnRest == "" {
				Expect(a.Restoration).To(BeEmpty())
			} else {
				Expect(a.Restoration).To(HaveLen(1))
				Expect(a.Restoration[0].UserName).To(Equal(impi))
				Expect(a.Restoration[0].Registrations[0].Path).To(ContainSubstring(c.returnRest))
				Expect(a.Restoration[0].AuthScheme).To(Equal(cx.SchemeSIPDigest))
			}
			if c.wantData {
				var doc struct {
					PrivateID string   `xml:"PrivateID"`
					IMPUs     []string `xml:"ServiceProfile>PublicIdentity>Identity"`
				}
				Expect(xml.Unmarshal(a.UserData, &doc)).To(Succeed())
				Expect(doc.PrivateID).To(Equal(impi))
				Expect(doc.IMPUs).To(ConsistOf("sip:alice@ims.test", "tel:+15550001"))
			} else {
				Expect(a.UserData).To(BeEmpty())
			}
		}
		reg := h.registration(impi)
		Expect(reg["state"]).To(Equal(c.wantState))
		Expect(reg["server_name"]).To(Or(BeNil(), BeEmpty(), Equal(c.wantName)))
		if c.wantName != "" {
			Expect(reg["server_name"]).To(Equal(c.wantName))
		}
		if c.wantRest == "" {
			Expect(reg["restoration"]).To(BeNil())
		} else {
			Expect(reg["restoration"]).To(HaveKeyWithValue("restoration_info",
				ContainElement(HaveKeyWithValue("path", ContainSubstring(c.wantRest)))))
		}
	},
		Entry("0 NO_ASSIGNMENT, registered, same S-CSCF → profile + restoration, nothing changes",
			sarCase{st: registered, server: scscf1, sat: cx.SATNoAssignment, want: cx.Success, wantState: "registered", wantName: scscf1, wantRest: "pcscf1", returnRest: "pcscf1", wantData: true}),
		Entry("0 NO_ASSIGNMENT, registered, another S-CSCF → 5012 unable to comply",
			sarCase{st: registered, server: scscf2, sat: cx.SATNoAssignment, want: cx.UnableToComply, wantState: "registered", wantName: scscf1, wantRest: "pcscf1"}),
		Entry("0 NO_ASSIGNMENT, not registered → profile only",
			sarCase{server: scscf1, sat: cx.SATNoAssignment, want: cx.Success, wantState: "not_registered", wantData: true}),
		Entry("1 REGISTRATION after MAR → registered, restoration stored",
			sarCase{st: authPending, server: scscf1, sat: cx.SATRegistration, rest: true, want: cx.Success, wantState: "registered", wantName: scscf1, wantRest: "pcscf2", wantData: true}),
		Entry("1 REGISTRATION with User-Data-Already-Available → no User-Data",
			sarCase{st: authPending, server: scscf1, sat: cx.SATRegistration, rest: true, udaa: true, want: cx.Success, wantState: "registered", wantName: scscf1, wantRest: "pcscf2"}),
		Entry("1 REGISTRATION from a new S-CSCF → name overwritten, old restoration returned",
			sarCase{st: registered, server: scscf2, sat: cx.SATRegistration, rest: true, want: cx.Success, wantState: "registered", wantName: scscf2, wantRest: "pcscf2", returnRest: "pcscf1", wantData: true}),
		Entry("2 RE_REGISTRATION → restoration updated",
			sarCase{st: registered, server: scscf1, sat: cx.SATReRegistration, rest: true, want: cx.Success, wantState: "registered", wantName: scscf1, wantRest: "pcscf2", wantData: true}),
		Entry("2 RE_REGISTRATION without restoration → previous restoration kept",
			sarCase{st: registered, server: scscf1, sat: cx.SATReRegistration, want: cx.Success, wantState: "registered", wantName: scscf1, wantRest: "pcscf1", wantData: true}),
		Entry("3 UNREGISTERED_USER, registered, another S-CSCF (takeover) → stays registered, new name, restoration returned",
			sarCase{st: registered, server: scscf2, sat: cx.SATUnregisteredUser, want: cx.Success, wantState: "registered", wantName: scscf2, wantRest: "pcscf1", returnRest: "pcscf1", wantData: true}),
		Entry("3 UNREGISTERED_USER, not registered → unregistered state, name stored",
			sarCase{server: scscf2, sat: cx.SATUnregisteredUser, want: cx.Success, wantState: "unregistered", wantName: scscf2, wantData: true}),
		Entry("4 TIMEOUT_DEREGISTRATION → not registered, restoration deleted",
			sarCase{st: registered, server: scscf1, sat: cx.SATTimeoutDeregistration, want: cx.Success, wantState: "not_registered"}),
		Entry("4 TIMEOUT_DEREGISTRATION from an S-CSCF that lost the user → ignored",
			sarCase{st: registered, server: scscf2, sat: cx.SATTimeoutDeregistration, want: cx.Success, wantState: "registered", wantName: scscf1, wantRest: "pcscf1"}),
		Entry("5 USER_DEREGISTRATION → not registered, restoration deleted",
			sarCase{st: registered, server: scscf1, sat: cx.SATUserDeregistration, want: cx.Success, wantState: "not_registered"}),
		Entry("6 TIMEOUT_DEREGISTRATION_STORE_SERVER_NAME → not registered, name kept, restoration deleted",
			sarCase{st: registered, server: scscf1, sat: cx.SATTimeoutDeregistrationStoreName, want: cx.Success, wantState: "not_registered", wantName: scscf1}),
		Entry("7 USER_DEREGISTRATION_STORE_SERVER_NAME → not registered, name kept",
			sarCase{st: registered, server: scscf1, sat: cx.SATUserDeregistrationStoreName, want: cx.Success, wantState: "not_registered", wantName: scscf1}),
		Entry("8 ADMINISTRATIVE_DEREGISTRATION → not registered",
			sarCase{st: registered, server: scscf1, sat: cx.SATAdministrativeDeregistration, want: cx.Success, wantState: "not_registered"}),
		Entry("9 AUTHENTICATION_FAILURE while pending → pending name dropped",
			sarCase{st: authPending, server: scscf1, sat: cx.SATAuthenticationFailure, want: cx.Success, wantState: "not_registered"}),
		Entry("9 AUTHENTICATION_FAILURE while registered → stays registered",
			sarCase{st: registered, server: scscf1, sat: cx.SATAuthenticationFailure, want: cx.Success, wantState: "registered", wantName: scscf1, wantRest: "pcscf1"}),
		Entry("10 AUTHENTICATION_TIMEOUT while pending → pending name dropped",
			sarCase{st: authPending, server: scscf1, sat: cx.SATAuthenticationTimeout, want: cx.Success, wantState: "not_registered"}),
		Entry("11 DEREGISTRATION_TOO_MUCH_DATA → not registered",
			sarCase{st: registered, server: scscf1, sat: cx.SATDeregistrationTooMuchData, want: cx.Success, wantState: "not_registered"}),
		Entry("12 AAA_USER_DATA_REQUEST (SWx only) → 5007",
			sarCase{st: registered, server: scscf1, sat: cx.SATAAAUserDataRequest, want: cx.ErrorInAssignmentType, wantState: "registered", wantName: scscf1, wantRest: "pcscf1"}),
		Entry("14 RESTORATION (SWx only) → 5007",
			sarCase{server: scscf1, sat: cx.SATRestoration, want: cx.ErrorInAssignmentType, wantState: "not_registered"}),
		Entry("15 (undefined) → 5004 invalid AVP value",
			sarCase{server: scscf1, sat: 15, want: cx.InvalidAVPValue, wantState: "not_registered"}),
	)

	It("refuses restoration info that belongs to another user", func() {
		_, err := sar(h.client, "alice@ims.test", scscf1, cx.SATRegistration, restorationFor("bob@ims.test", "pcscf1.ims.test"))
		res, ok := cx.ResultOf(err)
		Expect(ok).To(BeTrue())
		Expect(res).To(Equal(cx.ErrorIdentitiesDontMatch))
		Expect(h.registration("alice@ims.test")).To(HaveKeyWithValue("state", "not_registered"))
	})

	It("takes a user over: UAR UAT 2, MAR and SAR from a new S-CSCF, then LIR points at it", func() {
		register(h.client, "user0002@ims.test", scscf1, "pcscf1.ims.test")
		other := h.scscf(scscf2)
		a, err := h.icscf.UserAuthorization(ctx(), &cx.UAR{UserName: "user0002@ims.test", PublicIdentity: "sip:user0002@ims.test",
			VisitedNetworkIdentifier: "ims.test", AuthorizationType: cx.UATRegistrationAndCapabilities})
		Expect(err).NotTo(HaveOccurred())
		Expect(a.ServerName).To(BeEmpty())
		saa, err := sar(other, "user0002@ims.test", scscf2, cx.SATUnregisteredUser, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(saa.Restoration).To(HaveLen(1))
		Expect(saa.Restoration[0].Registrations[0].Contact).To(ContainSubstring("bac.ims.test"))
		lia, err := h.icscf.LocationInfo(ctx(), &cx.LIR{PublicIdentity: "sip:user0002@ims.test"})
		Expect(err).NotTo(HaveOccurred())
		Expect(lia.ServerName).To(Equal(scscf2))
	})

	Describe("bad input", func() {
		var p *rawPeer
		BeforeEach(func() { p = dialRaw(h.node.DiameterAddr()) })

		It("answers a SAR without Server-Assignment-Type with 5005 and the missing AVP in Failed-AVP", func() {
			p := dialRawAs(h.node.DiameterAddr(), rawSCSCF)
			ans := p.roundTrip(cxRequestAs(rawSCSCF, cx.CmdSA,
				diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("alice@ims.test")),
				cxAVP(602, datatype.UTF8String(scscf1)),
				cxAVP(624, datatype.Enumerated(0))))
			Expect(resultCode(ans)).To(Equal(uint32(5005)))
			Expect(failedAVPCodes(ans)).To(ConsistOf(uint32(614)))
		})
		It("answers a UAR without Public-Identity with 5005", func() {
			ans := p.roundTrip(cxRequest(cx.CmdUA,
				diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("alice@ims.test")),
				cxAVP(600, datatype.OctetString("ims.test"))))
			Expect(resultCode(ans)).To(Equal(uint32(5005)))
			Expect(failedAVPCodes(ans)).To(ConsistOf(uint32(601)))
		})
		It("answers an unknown Cx command with 3001 and the E bit, and keeps serving the connection", func() {
			ans := p.roundTrip(cxRequest(399))
			Expect(resultCode(ans)).To(Equal(uint32(3001)))
			Expect(ans.Header.CommandFlags & diam.ErrorFlag).NotTo(BeZero())
			ans = p.roundTrip(cxRequest(cx.CmdLI, cxAVP(601, datatype.UTF8String("sip:nobody@ims.test"))))
			Expect(ans.Header.CommandCode).To(Equal(cx.CmdLI))
		})
		It("answers a request of an unknown application with 3007", func() {
			m := cxRequest(cx.CmdLI)
			m.Header.ApplicationID = 16777217 // Sh
			Expect(resultCode(p.roundTrip(m))).To(Equal(uint32(3007)))
		})
		It("answers an AVP whose value does not fit its type with 5004/5014 and keeps the connection", func() {
			// User-Authorization-Type is Enumerated (4 bytes); send 2 bytes.
			m := cxRequest(cx.CmdUA, diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("alice@ims.test")),
				cxAVP(601, datatype.UTF8String("sip:alice@ims.test")), cxAVP(600, datatype.OctetString("ims.test")))
			b, err := m.Serialize()
			Expect(err).NotTo(HaveOccurred())
			bad := []byte{0, 0, 2, 0x6f, 0xc0, 0, 0, 14, 0, 0, 0x28, 0xaf, 0, 1, 0, 0} // 623, V+M, len 14, vendor 10415, 2 bytes + pad
			b = append(b, bad...)
			l := len(b)
			b[1], b[2], b[3] = byte(l>>16), byte(l>>8), byte(l)
			p.send(b)
			ans, err := p.recv()
			Expect(err).NotTo(HaveOccurred())
			Expect(resultCode(ans)).To(BeElementOf(uint32(5004), uint32(5014)))
			Expect(p.roundTrip(cxRequest(cx.CmdLI, cxAVP(601, datatype.UTF8String("sip:alice@ims.test")))).Header.CommandCode).To(Equal(cx.CmdLI))
		})
		It("closes only the connection that sends garbage; other peers keep being served", func() {
			p.send([]byte("INVITE sip:bob@ims.test SIP/2.0\r\n\r\n"))
			_, err := p.recv()
			Expect(err).To(HaveOccurred())
			a, err := h.icscf.LocationInfo(ctx(), &cx.LIR{PublicIdentity: "sip:bob@ims.test"})
			Expect(err).NotTo(HaveOccurred())
			Expect(a.Result).To(Equal(cx.UnregisteredService))
			q := dialRaw(h.node.DiameterAddr())
			Expect(q.roundTrip(cxRequest(cx.CmdLI, cxAVP(601, datatype.UTF8String("sip:bob@ims.test")))).Header.CommandCode).To(Equal(cx.CmdLI))
		})
		It("survives a peer that disconnects mid-message", func() {
			conn, err := net.Dial("tcp", h.node.DiameterAddr())
			Expect(err).NotTo(HaveOccurred())
			_, _ = conn.Write([]byte{1, 0, 1, 0, 0x80})
			conn.Close()
			_, err = h.icscf.LocationInfo(ctx(), &cx.LIR{PublicIdentity: "sip:bob@ims.test"})
			Expect(err).NotTo(HaveOccurred())
		})
	})
})
