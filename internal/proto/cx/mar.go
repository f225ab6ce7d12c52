package cx

import (
	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// Multimedia-Auth (MAR/MAA, TS 29.229 §6.1.7): the S-CSCF fetches authentication vectors.

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
