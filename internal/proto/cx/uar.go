package cx

import (
	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// User-Authorization (UAR/UAA, TS 29.229 §6.1.1): the I-CSCF asks whether a user may register and where.

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

func decodeUAA(m *diam.Message) *UAA {
	r := &avpReader{list: m.AVP}
	return &UAA{
		ServerName:         r.str("Server-Name", avpServerName, Vendor3GPP, false),
		ServerCapabilities: decodeServerCapabilities(r),
		SupportedFeatures:  decodeSupportedFeatures(r),
	}
}
