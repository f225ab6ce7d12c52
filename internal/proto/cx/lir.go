package cx

import (
	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// Location-Info (LIR/LIA, TS 29.229 §6.1.5): the I-CSCF asks which S-CSCF serves a user.

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

func decodeLIA(m *diam.Message) *LIA {
	r := &avpReader{list: m.AVP}
	return &LIA{
		ServerName:         r.str("Server-Name", avpServerName, Vendor3GPP, false),
		ServerCapabilities: decodeServerCapabilities(r),
		SupportedFeatures:  decodeSupportedFeatures(r),
	}
}
