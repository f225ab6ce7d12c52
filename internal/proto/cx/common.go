package cx

import (
	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// The AVPs more than one Cx procedure carries: the session envelope, Supported-Features, Server-Capabilities.
// Each procedure's typed request and answer, with their encoding and decoding, is in its own file (uar.go, lir.go,
// mar.go, sar.go, rtr.go).

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
