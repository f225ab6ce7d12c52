package cx

import (
	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// Envelope holds the session and routing AVPs every Cx request carries. The client fills it; handlers read the
// peer's Origin-Host from it.
type Envelope struct {
	SessionID        string `json:"session_id"`
	OriginHost       string `json:"origin_host"`
	OriginRealm      string `json:"origin_realm"`
	DestinationHost  string `json:"destination_host,omitempty"`
	DestinationRealm string `json:"destination_realm"`
}

func decodeEnvelope(r *avpReader) Envelope {
	return Envelope{
		SessionID:        r.str("Session-Id", avpSessionID, 0, true),
		OriginHost:       r.str("Origin-Host", avpOriginHost, 0, true),
		OriginRealm:      r.str("Origin-Realm", avpOriginRealm, 0, true),
		DestinationHost:  r.str("Destination-Host", avpDestinationHost, 0, false),
		DestinationRealm: r.str("Destination-Realm", avpDestinationRealm, 0, true),
	}
}

// SupportedFeatures is one Supported-Features AVP (628).
type SupportedFeatures struct {
	VendorID    uint32 `json:"vendor_id"`
	FeatureList uint32 `json:"feature_list"`
	ListID      uint32 `json:"feature_list_id"`
}

func decodeSupportedFeatures(r *avpReader) []SupportedFeatures {
	var out []SupportedFeatures
	for _, a := range findAVPs(r.list, avpSupportedFeatures, Vendor3GPP) {
		g, ok := groupOf(a)
		if !ok {
			r.fail(InvalidAVPValue, a, "Supported-Features is not grouped")
			continue
		}
		s := r.sub(g)
		var sf SupportedFeatures
		sf.VendorID, _ = s.u32("Vendor-Id", avpVendorID, 0, true)
		sf.ListID, _ = s.u32("Feature-List-ID", avpFeatureListID, Vendor3GPP, true)
		sf.FeatureList, _ = s.u32("Feature-List", avpFeatureList, Vendor3GPP, true)
		r.merge(s)
		out = append(out, sf)
	}
	return out
}

func encodeSupportedFeatures(list []SupportedFeatures) []*diam.AVP {
	var out []*diam.AVP
	for _, sf := range list {
		out = append(out, v(avpSupportedFeatures, grp(
			m0(avpVendorID, datatype.Unsigned32(sf.VendorID)),
			v(avpFeatureListID, datatype.Unsigned32(sf.ListID)),
			v(avpFeatureList, datatype.Unsigned32(sf.FeatureList)),
		)))
	}
	return out
}

// ServerCapabilities is the Server-Capabilities AVP (603): capability numbers the S-CSCF must or should have and an
// ordered list of preferred S-CSCF names.
type ServerCapabilities struct {
	Mandatory   []uint32 `json:"mandatory,omitempty" yaml:"mandatory,omitempty"`
	Optional    []uint32 `json:"optional,omitempty" yaml:"optional,omitempty"`
	ServerNames []string `json:"server_names,omitempty" yaml:"server_names,omitempty"`
}

func (c *ServerCapabilities) avp() *diam.AVP {
	g := grp()
	for _, m := range c.Mandatory {
		g.AVP = append(g.AVP, mv(avpMandatoryCapability, datatype.Unsigned32(m)))
	}
	for _, o := range c.Optional {
		g.AVP = append(g.AVP, mv(avpOptionalCapability, datatype.Unsigned32(o)))
	}
	for _, n := range c.ServerNames {
		g.AVP = append(g.AVP, mv(avpServerName, datatype.UTF8String(n)))
	}
	return mv(avpServerCapabilities, g)
}

func decodeServerCapabilities(r *avpReader) *ServerCapabilities {
	list, a := r.group("Server-Capabilities", avpServerCapabilities, Vendor3GPP, false)
	if a == nil {
		return nil
	}
	s := r.sub(list)
	c := &ServerCapabilities{ServerNames: s.strs("Server-Name", avpServerName, Vendor3GPP)}
	for _, m := range findAVPs(list, avpMandatoryCapability, Vendor3GPP) {
		if x, ok := uint32Of(m); ok {
			c.Mandatory = append(c.Mandatory, x)
		}
	}
	for _, o := range findAVPs(list, avpOptionalCapability, Vendor3GPP) {
		if x, ok := uint32Of(o); ok {
			c.Optional = append(c.Optional, x)
		}
	}
	r.merge(s)
	return c
}

// UAR is a User-Authorization-Request (I-CSCF → HSS).
type UAR struct {
	Envelope
	UserName                 string                `json:"user_name"`
	PublicIdentity           string                `json:"public_identity"`
	VisitedNetworkIdentifier string                `json:"visited_network_identifier"`
	AuthorizationType        UserAuthorizationType `json:"user_authorization_type"`
	UARFlags                 uint32                `json:"uar_flags,omitempty"`
	SupportedFeatures        []SupportedFeatures   `json:"supported_features,omitempty"`
}

// UAA is a User-Authorization-Answer.
type UAA struct {
	Result             Result              `json:"result"`
	ServerName         string              `json:"server_name,omitempty"`
	ServerCapabilities *ServerCapabilities `json:"server_capabilities,omitempty"`
	SupportedFeatures  []SupportedFeatures `json:"supported_features,omitempty"`
}

// LIR is a Location-Info-Request (I-CSCF → HSS). In the quasi-pool takeover the I-CSCF sets AuthorizationType to
// REGISTRATION_AND_CAPABILITIES to get the stored S-CSCF name and the capabilities to choose another one.
type LIR struct {
	Envelope
	PublicIdentity    string                 `json:"public_identity"`
	Originating       bool                   `json:"originating_request,omitempty"`
	AuthorizationType *UserAuthorizationType `json:"user_authorization_type,omitempty"`
	SupportedFeatures []SupportedFeatures    `json:"supported_features,omitempty"`
}

// LIA is a Location-Info-Answer.
type LIA struct {
	Result             Result              `json:"result"`
	ServerName         string              `json:"server_name,omitempty"`
	ServerCapabilities *ServerCapabilities `json:"server_capabilities,omitempty"`
	SupportedFeatures  []SupportedFeatures `json:"supported_features,omitempty"`
}

// DigestAuthenticate is the SIP-Digest-Authenticate AVP (635) with the RFC 4740 digest AVPs (vendor 0).
type DigestAuthenticate struct {
	Realm     string `json:"realm"`
	Algorithm string `json:"algorithm,omitempty"`
	QoP       string `json:"qop"`
	HA1       string `json:"ha1"`
}

// AuthItem is one SIP-Auth-Data-Item (612).
type AuthItem struct {
	ItemNumber    uint32              `json:"item_number,omitempty"`
	Scheme        string              `json:"scheme"`
	Authenticate  []byte              `json:"authenticate,omitempty"`
	Authorization []byte              `json:"authorization,omitempty"`
	Digest        *DigestAuthenticate `json:"digest,omitempty"`
}

func (it *AuthItem) avp() *diam.AVP {
	g := grp()
	if it.ItemNumber != 0 {
		g.AVP = append(g.AVP, mv(avpSIPItemNumber, datatype.Unsigned32(it.ItemNumber)))
	}
	g.AVP = append(g.AVP, mv(avpSIPAuthenticationScheme, datatype.UTF8String(it.Scheme)))
	if len(it.Authenticate) > 0 {
		g.AVP = append(g.AVP, mv(avpSIPAuthenticate, datatype.OctetString(it.Authenticate)))
	}
	if len(it.Authorization) > 0 {
		g.AVP = append(g.AVP, mv(avpSIPAuthorization, datatype.OctetString(it.Authorization)))
	}
	if d := it.Digest; d != nil {
		dg := grp(m0(avpDigestRealm, datatype.UTF8String(d.Realm)))
		if d.Algorithm != "" {
			dg.AVP = append(dg.AVP, m0(avpDigestAlgorithm, datatype.UTF8String(d.Algorithm)))
		}
		dg.AVP = append(dg.AVP, m0(avpDigestQoP, datatype.UTF8String(d.QoP)), m0(avpDigestHA1, datatype.UTF8String(d.HA1)))
		g.AVP = append(g.AVP, v(avpSIPDigestAuthenticate, dg))
	}
	return mv(avpSIPAuthDataItem, g)
}

func decodeAuthItem(r *avpReader, a *diam.AVP) AuthItem {
	var it AuthItem
	list, ok := groupOf(a)
	if !ok {
		r.fail(InvalidAVPValue, a, "SIP-Auth-Data-Item is not grouped")
		return it
	}
	s := r.sub(list)
	it.ItemNumber, _ = s.u32("SIP-Item-Number", avpSIPItemNumber, Vendor3GPP, false)
	it.Scheme = s.str("SIP-Authentication-Scheme", avpSIPAuthenticationScheme, Vendor3GPP, false)
	it.Authenticate = []byte(s.str("SIP-Authenticate", avpSIPAuthenticate, Vendor3GPP, false))
	it.Authorization = []byte(s.str("SIP-Authorization", avpSIPAuthorization, Vendor3GPP, false))
	if dl, da := s.group("SIP-Digest-Authenticate", avpSIPDigestAuthenticate, Vendor3GPP, false); da != nil {
		ds := s.sub(dl)
		it.Digest = &DigestAuthenticate{
			Realm:     ds.str("Digest-Realm", avpDigestRealm, 0, true),
			Algorithm: ds.str("Digest-Algorithm", avpDigestAlgorithm, 0, false),
			QoP:       ds.str("Digest-QoP", avpDigestQoP, 0, true),
			HA1:       ds.str("Digest-HA1", avpDigestHA1, 0, true),
		}
		s.merge(ds)
	}
	r.merge(s)
	return it
}

// MAR is a Multimedia-Auth-Request (S-CSCF → HSS).
type MAR struct {
	Envelope
	UserName          string              `json:"user_name"`
	PublicIdentity    string              `json:"public_identity"`
	ServerName        string              `json:"server_name"`
	NumberAuthItems   uint32              `json:"sip_number_auth_items"`
	AuthItem          AuthItem            `json:"sip_auth_data_item"`
	SupportedFeatures []SupportedFeatures `json:"supported_features,omitempty"`
}

// MAA is a Multimedia-Auth-Answer.
type MAA struct {
	Result            Result              `json:"result"`
	UserName          string              `json:"user_name,omitempty"`
	PublicIdentity    string              `json:"public_identity,omitempty"`
	NumberAuthItems   uint32              `json:"sip_number_auth_items,omitempty"`
	AuthItems         []AuthItem          `json:"sip_auth_data_items,omitempty"`
	SupportedFeatures []SupportedFeatures `json:"supported_features,omitempty"`
}

// SAR is a Server-Assignment-Request (S-CSCF → HSS). Restoration carries the S-CSCF's registration state that the
// HSS keeps as transparent data; RestorationRaw is the same AVP as received on the wire.
type SAR struct {
	Envelope
	UserName                 string                `json:"user_name,omitempty"`
	PublicIdentities         []string              `json:"public_identities,omitempty"`
	ServerName               string                `json:"server_name"`
	AssignmentType           ServerAssignmentType  `json:"server_assignment_type"`
	UserDataAlreadyAvailable bool                  `json:"user_data_already_available"`
	Restoration              *SCSCFRestorationInfo `json:"scscf_restoration_info,omitempty"`
	RestorationRaw           []byte                `json:"-"`
	MultipleRegistration     bool                  `json:"multiple_registration_indication,omitempty"`
	SARFlags                 uint32                `json:"sar_flags,omitempty"`
	SupportedFeatures        []SupportedFeatures   `json:"supported_features,omitempty"`
}

// SAA is a Server-Assignment-Answer. A server fills RestorationRaw (the stored opaque AVPs); a client reads
// Restoration.
type SAA struct {
	Result               Result                  `json:"result"`
	UserName             string                  `json:"user_name,omitempty"`
	UserData             []byte                  `json:"user_data,omitempty"`
	ServerName           string                  `json:"server_name,omitempty"`
	AssociatedIdentities []string                `json:"associated_identities,omitempty"`
	Restoration          []*SCSCFRestorationInfo `json:"scscf_restoration_info,omitempty"`
	RestorationRaw       [][]byte                `json:"-"`
	SupportedFeatures    []SupportedFeatures     `json:"supported_features,omitempty"`
}

// RTR is a Registration-Termination-Request (HSS → S-CSCF).
type RTR struct {
	Envelope
	UserName         string   `json:"user_name"`
	PublicIdentities []string `json:"public_identities,omitempty"`
	ReasonCode       uint32   `json:"reason_code"`
	ReasonInfo       string   `json:"reason_info,omitempty"`
}

// RTA is a Registration-Termination-Answer.
type RTA struct {
	Result Result `json:"result"`
}

// --- request decoding (server side) ---

func decodeUAR(m *diam.Message) (*UAR, *RequestError) {
	r := &avpReader{list: m.AVP}
	q := &UAR{Envelope: decodeEnvelope(r)}
	q.UserName = r.str("User-Name", avpUserName, 0, true)
	q.PublicIdentity = r.str("Public-Identity", avpPublicIdentity, Vendor3GPP, true)
	q.VisitedNetworkIdentifier = r.str("Visited-Network-Identifier", avpVisitedNetworkIdentifier, Vendor3GPP, true)
	uat, _ := r.enum("User-Authorization-Type", avpUserAuthorizationType, Vendor3GPP, false, 2)
	q.AuthorizationType = UserAuthorizationType(uat)
	q.UARFlags, _ = r.u32("UAR-Flags", avpUARFlags, Vendor3GPP, false)
	q.SupportedFeatures = decodeSupportedFeatures(r)
	return q, r.err
}

func decodeLIR(m *diam.Message) (*LIR, *RequestError) {
	r := &avpReader{list: m.AVP}
	q := &LIR{Envelope: decodeEnvelope(r)}
	q.PublicIdentity = r.str("Public-Identity", avpPublicIdentity, Vendor3GPP, true)
	if _, ok := r.enum("Originating-Request", avpOriginatingRequest, Vendor3GPP, false, 0); ok {
		q.Originating = true
	}
	if uat, ok := r.enum("User-Authorization-Type", avpUserAuthorizationType, Vendor3GPP, false, 2); ok {
		t := UserAuthorizationType(uat)
		q.AuthorizationType = &t
	}
	q.SupportedFeatures = decodeSupportedFeatures(r)
	return q, r.err
}

func decodeMAR(m *diam.Message) (*MAR, *RequestError) {
	r := &avpReader{list: m.AVP}
	q := &MAR{Envelope: decodeEnvelope(r)}
	q.UserName = r.str("User-Name", avpUserName, 0, true)
	q.PublicIdentity = r.str("Public-Identity", avpPublicIdentity, Vendor3GPP, true)
	q.ServerName = r.str("Server-Name", avpServerName, Vendor3GPP, true)
	q.NumberAuthItems, _ = r.u32("SIP-Number-Auth-Items", avpSIPNumberAuthItems, Vendor3GPP, true)
	if _, a := r.group("SIP-Auth-Data-Item", avpSIPAuthDataItem, Vendor3GPP, true); a != nil {
		q.AuthItem = decodeAuthItem(r, a)
	}
	q.SupportedFeatures = decodeSupportedFeatures(r)
	return q, r.err
}

func decodeSAR(m *diam.Message) (*SAR, *RequestError) {
	r := &avpReader{list: m.AVP}
	q := &SAR{Envelope: decodeEnvelope(r)}
	q.UserName = r.str("User-Name", avpUserName, 0, false)
	q.PublicIdentities = r.strs("Public-Identity", avpPublicIdentity, Vendor3GPP)
	q.ServerName = r.str("Server-Name", avpServerName, Vendor3GPP, true)
	sat, _ := r.enum("Server-Assignment-Type", avpServerAssignmentType, Vendor3GPP, true, uint32(SATRestoration))
	q.AssignmentType = ServerAssignmentType(sat)
	udaa, _ := r.enum("User-Data-Already-Available", avpUserDataAlreadyAvailable, Vendor3GPP, true, 1)
	q.UserDataAlreadyAvailable = udaa == 1
	if mri, ok := r.enum("Multiple-Registration-Indication", avpMultipleRegistrationInd, Vendor3GPP, false, 1); ok {
		q.MultipleRegistration = mri == 1
	}
	q.SARFlags, _ = r.u32("SAR-Flags", avpSARFlags, Vendor3GPP, false)
	if a := findAVP(r.list, avpSCSCFRestorationInfo, Vendor3GPP); a != nil {
		info, err := decodeRestorationAVP(a)
		if err != nil {
			r.fail(err.Result, err.Failed[0], "%s", err.Message)
		} else {
			q.Restoration = info
			raw, serr := a.Serialize()
			if serr != nil {
				r.fail(InvalidAVPValue, a, "SCSCF-Restoration-Info: %v", serr)
			}
			q.RestorationRaw = raw
		}
	}
	q.SupportedFeatures = decodeSupportedFeatures(r)
	if r.err == nil && q.UserName == "" && len(q.PublicIdentities) == 0 {
		r.missing("User-Name", avpUserName, 0, datatype.UTF8String(""))
	}
	return q, r.err
}

func decodeRTR(m *diam.Message) (*RTR, *RequestError) {
	r := &avpReader{list: m.AVP}
	q := &RTR{Envelope: decodeEnvelope(r)}
	q.UserName = r.str("User-Name", avpUserName, 0, true)
	q.PublicIdentities = r.strs("Public-Identity", avpPublicIdentity, Vendor3GPP)
	if list, a := r.group("Deregistration-Reason", avpDeregistrationReason, Vendor3GPP, true); a != nil {
		s := r.sub(list)
		q.ReasonCode, _ = s.enum("Reason-Code", avpReasonCode, Vendor3GPP, true, 3)
		q.ReasonInfo = s.str("Reason-Info", avpReasonInfo, Vendor3GPP, false)
		r.merge(s)
	}
	return q, r.err
}

// --- answer encoding (server side): the payload AVPs after the envelope ---

func (a *UAA) avps() []*diam.AVP {
	var out []*diam.AVP
	out = append(out, encodeSupportedFeatures(a.SupportedFeatures)...)
	if a.ServerName != "" {
		out = append(out, mv(avpServerName, datatype.UTF8String(a.ServerName)))
	}
	if a.ServerCapabilities != nil {
		out = append(out, a.ServerCapabilities.avp())
	}
	return out
}

func (a *LIA) avps() []*diam.AVP {
	var out []*diam.AVP
	out = append(out, encodeSupportedFeatures(a.SupportedFeatures)...)
	if a.ServerName != "" {
		out = append(out, mv(avpServerName, datatype.UTF8String(a.ServerName)))
	}
	if a.ServerCapabilities != nil {
		out = append(out, a.ServerCapabilities.avp())
	}
	return out
}

func (a *MAA) avps() []*diam.AVP {
	var out []*diam.AVP
	if a.UserName != "" {
		out = append(out, m0(avpUserName, datatype.UTF8String(a.UserName)))
	}
	out = append(out, encodeSupportedFeatures(a.SupportedFeatures)...)
	if a.PublicIdentity != "" {
		out = append(out, mv(avpPublicIdentity, datatype.UTF8String(a.PublicIdentity)))
	}
	if len(a.AuthItems) > 0 || a.NumberAuthItems > 0 {
		out = append(out, mv(avpSIPNumberAuthItems, datatype.Unsigned32(a.NumberAuthItems)))
	}
	for i := range a.AuthItems {
		out = append(out, a.AuthItems[i].avp())
	}
	return out
}

func (a *SAA) avps() ([]*diam.AVP, error) {
	var out []*diam.AVP
	if a.UserName != "" {
		out = append(out, m0(avpUserName, datatype.UTF8String(a.UserName)))
	}
	out = append(out, encodeSupportedFeatures(a.SupportedFeatures)...)
	if len(a.UserData) > 0 {
		out = append(out, mv(avpUserData, datatype.OctetString(a.UserData)))
	}
	if len(a.AssociatedIdentities) > 0 {
		g := grp()
		for _, id := range a.AssociatedIdentities {
			g.AVP = append(g.AVP, m0(avpUserName, datatype.UTF8String(id)))
		}
		out = append(out, v(avpAssociatedIdentities, g))
	}
	for _, raw := range a.RestorationRaw {
		ra, err := ParseRestorationRaw(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, ra)
	}
	for _, info := range a.Restoration {
		out = append(out, info.AVP())
	}
	if a.ServerName != "" {
		out = append(out, mv(avpServerName, datatype.UTF8String(a.ServerName)))
	}
	return out, nil
}

// --- request encoding (client side) ---

func (e *Envelope) avps() []*diam.AVP {
	out := []*diam.AVP{
		m0(avpOriginHost, datatype.DiameterIdentity(e.OriginHost)),
		m0(avpOriginRealm, datatype.DiameterIdentity(e.OriginRealm)),
	}
	if e.DestinationHost != "" {
		out = append(out, m0(avpDestinationHost, datatype.DiameterIdentity(e.DestinationHost)))
	}
	return append(out, m0(avpDestinationRealm, datatype.DiameterIdentity(e.DestinationRealm)))
}

func (q *UAR) avps() []*diam.AVP {
	out := []*diam.AVP{m0(avpUserName, datatype.UTF8String(q.UserName))}
	out = append(out, encodeSupportedFeatures(q.SupportedFeatures)...)
	out = append(out,
		mv(avpPublicIdentity, datatype.UTF8String(q.PublicIdentity)),
		mv(avpVisitedNetworkIdentifier, datatype.OctetString(q.VisitedNetworkIdentifier)),
		mv(avpUserAuthorizationType, datatype.Enumerated(q.AuthorizationType)))
	if q.UARFlags != 0 {
		out = append(out, v(avpUARFlags, datatype.Unsigned32(q.UARFlags)))
	}
	return out
}

func (q *LIR) avps() []*diam.AVP {
	var out []*diam.AVP
	if q.Originating {
		out = append(out, mv(avpOriginatingRequest, datatype.Enumerated(0)))
	}
	out = append(out, encodeSupportedFeatures(q.SupportedFeatures)...)
	out = append(out, mv(avpPublicIdentity, datatype.UTF8String(q.PublicIdentity)))
	if q.AuthorizationType != nil {
		out = append(out, mv(avpUserAuthorizationType, datatype.Enumerated(*q.AuthorizationType)))
	}
	return out
}

func (q *MAR) avps() []*diam.AVP {
	out := []*diam.AVP{m0(avpUserName, datatype.UTF8String(q.UserName))}
	out = append(out, encodeSupportedFeatures(q.SupportedFeatures)...)
	n := q.NumberAuthItems
	if n == 0 {
		n = 1
	}
	return append(out,
		mv(avpPublicIdentity, datatype.UTF8String(q.PublicIdentity)),
		q.AuthItem.avp(),
		mv(avpSIPNumberAuthItems, datatype.Unsigned32(n)),
		mv(avpServerName, datatype.UTF8String(q.ServerName)))
}

func (q *SAR) avps() []*diam.AVP {
	var out []*diam.AVP
	if q.UserName != "" {
		out = append(out, m0(avpUserName, datatype.UTF8String(q.UserName)))
	}
	out = append(out, encodeSupportedFeatures(q.SupportedFeatures)...)
	for _, p := range q.PublicIdentities {
		out = append(out, mv(avpPublicIdentity, datatype.UTF8String(p)))
	}
	udaa := 0
	if q.UserDataAlreadyAvailable {
		udaa = 1
	}
	out = append(out,
		mv(avpServerName, datatype.UTF8String(q.ServerName)),
		mv(avpServerAssignmentType, datatype.Enumerated(q.AssignmentType)),
		mv(avpUserDataAlreadyAvailable, datatype.Enumerated(udaa)))
	if q.Restoration != nil {
		out = append(out, q.Restoration.AVP())
	}
	if q.MultipleRegistration {
		out = append(out, v(avpMultipleRegistrationInd, datatype.Enumerated(1)))
	}
	if q.SARFlags != 0 {
		out = append(out, v(avpSARFlags, datatype.Unsigned32(q.SARFlags)))
	}
	return out
}

// --- answer decoding (client side) ---

func decodeUAA(m *diam.Message) *UAA {
	r := &avpReader{list: m.AVP}
	return &UAA{
		ServerName:         r.str("Server-Name", avpServerName, Vendor3GPP, false),
		ServerCapabilities: decodeServerCapabilities(r),
		SupportedFeatures:  decodeSupportedFeatures(r),
	}
}

func decodeLIA(m *diam.Message) *LIA {
	r := &avpReader{list: m.AVP}
	return &LIA{
		ServerName:         r.str("Server-Name", avpServerName, Vendor3GPP, false),
		ServerCapabilities: decodeServerCapabilities(r),
		SupportedFeatures:  decodeSupportedFeatures(r),
	}
}

func decodeMAA(m *diam.Message) *MAA {
	r := &avpReader{list: m.AVP}
	a := &MAA{
		UserName:          r.str("User-Name", avpUserName, 0, false),
		PublicIdentity:    r.str("Public-Identity", avpPublicIdentity, Vendor3GPP, false),
		SupportedFeatures: decodeSupportedFeatures(r),
	}
	a.NumberAuthItems, _ = r.u32("SIP-Number-Auth-Items", avpSIPNumberAuthItems, Vendor3GPP, false)
	for _, it := range findAVPs(m.AVP, avpSIPAuthDataItem, Vendor3GPP) {
		a.AuthItems = append(a.AuthItems, decodeAuthItem(r, it))
	}
	return a
}

func decodeSAA(m *diam.Message) (*SAA, error) {
	r := &avpReader{list: m.AVP}
	a := &SAA{
		UserName:          r.str("User-Name", avpUserName, 0, false),
		UserData:          []byte(r.str("User-Data", avpUserData, Vendor3GPP, false)),
		ServerName:        r.str("Server-Name", avpServerName, Vendor3GPP, false),
		SupportedFeatures: decodeSupportedFeatures(r),
	}
	if list, g := r.group("Associated-Identities", avpAssociatedIdentities, Vendor3GPP, false); g != nil {
		a.AssociatedIdentities = r.sub(list).strs("User-Name", avpUserName, 0)
	}
	for _, ra := range findAVPs(m.AVP, avpSCSCFRestorationInfo, Vendor3GPP) {
		info, err := decodeRestorationAVP(ra)
		if err != nil {
			return nil, err
		}
		a.Restoration = append(a.Restoration, info)
	}
	if r.err != nil {
		return a, r.err
	}
	return a, nil
}
