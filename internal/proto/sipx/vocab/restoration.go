package vocab

import (
	"encoding/xml"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// ContentType3GPPIMS is the MIME type of the 3GPP IM CN subsystem XML body (TS 24.229 §7.6).
const ContentType3GPPIMS = "application/3gpp-ims+xml"

// Restoration reasons the network functions put in the body of a 504 that asks the phone to register again.
const (
	ReasonNotRegisteredHere = "not registered here"  // a P-CSCF or S-CSCF without the user's state
	ReasonSCSCFUnreachable  = "S-CSCF unreachable"   // the P-CSCF could not reach the user's S-CSCF
	ReasonNoRestorationData = "no restoration data"  // an S-CSCF's takeover found no SCSCF-Restoration-Info in the HSS
	ActionInitialRegister   = "initial-registration" // the only <action> TS 24.229 defines for restoration
	TypeRestoration         = "restoration"
)

// RestorationBody is the 3GPP IM CN subsystem XML body of TS 24.229 §7.6 that asks the UE to do an initial
// registration: <alternative-service> with type restoration and action initial-registration.
func RestorationBody(reason string) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><ims-3gpp version="1"><alternative-service><type>restoration</type><reason>`)
	_ = xml.EscapeText(&b, []byte(reason))
	b.WriteString(`</reason><action>initial-registration</action></alternative-service></ims-3gpp>`)
	return []byte(b.String())
}

// IsRestoration reports a 504 Server Time-out carrying the 3GPP IM CN subsystem XML body (Content-Type
// application/3gpp-ims+xml, root <ims-3gpp>) with <alternative-service><type>restoration</type> and
// <action>initial-registration</action>: the network asks the UE to register again (TS 24.229 §5.1.2A.1.1), and a
// proxy does not retry it elsewhere.
func IsRestoration(res *sip.Response) bool {
	if res == nil || res.StatusCode != 504 {
		return false
	}
	ct := res.GetHeader("Content-Type")
	if ct == nil {
		return false
	}
	mt, _, _ := strings.Cut(ct.Value(), ";")
	if !strings.EqualFold(strings.TrimSpace(mt), ContentType3GPPIMS) {
		return false
	}
	var doc struct {
		XMLName xml.Name `xml:"ims-3gpp"`
		Type    string   `xml:"alternative-service>type"`
		Action  string   `xml:"alternative-service>action"`
	}
	if xml.Unmarshal(res.Body(), &doc) != nil {
		return false
	}
	return strings.TrimSpace(doc.Type) == TypeRestoration && strings.TrimSpace(doc.Action) == ActionInitialRegister
}

// NewRestoration504 builds the 504 Server Time-out with the restoration body that answers req.
func NewRestoration504(req *sip.Request, reason string) *sip.Response {
	res := sip.NewResponseFromRequest(req, 504, "Server Time-out", RestorationBody(reason))
	ct := sip.ContentTypeHeader(ContentType3GPPIMS)
	res.AppendHeader(&ct)
	return res
}
