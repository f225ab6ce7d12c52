package sipx

import (
	"encoding/xml"
	"strings"

	"github.com/emiago/sipgo/sip"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// ContentType3GPPIMS is the MIME type of the 3GPP IM CN subsystem XML body (TS 24.229 §7.6).
const ContentType3GPPIMS = "application/3gpp-ims+xml"

// Restoration reasons the network functions put in the body of a 504 that asks the phone to register again.
const (
	ReasonNotRegisteredHere = "not registered here"  // a P-CSCF or S-CSCF without the user's state
	ReasonSCSCFUnreachable  = "S-CSCF unreachable"   // the P-CSCF could not reach the user's S-CSCF
	ActionInitialRegister   = "initial-registration" // the only <action> TS 24.229 defines for restoration
	typeRestoration         = "restoration"
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

// RespondRestoration answers 504 Server Time-out with the restoration body (TS 24.229 §5.2.6.3.x / §5.4.3.2:
// the node cannot serve the user without a new registration).
func (p *Proxy) RespondRestoration(stx sip.ServerTransaction, req *sip.Request, reason string) {
	res := sip.NewResponseFromRequest(req, 504, "Server Time-out", RestorationBody(reason))
	ct := sip.ContentTypeHeader(ContentType3GPPIMS)
	res.AppendHeader(&ct)
	p.Rec.Emit(obs.Restoration504{CallID: CallID(req), Method: string(req.Method), Reason: reason})
	if err := stx.Respond(res); err != nil {
		p.Log.Debug("respond", "call_id", CallID(req), "method", string(req.Method), "status", 504, "err", err)
	}
}

// IsRestoration reports a response carrying the restoration body with action initial-registration.
func IsRestoration(res *sip.Response) bool {
	if res == nil || res.StatusCode != 504 {
		return false
	}
	ct := res.GetHeader("Content-Type")
	if ct == nil || !strings.EqualFold(strings.TrimSpace(strings.Split(ct.Value(), ";")[0]), ContentType3GPPIMS) {
		return false
	}
	var doc struct {
		Type   string `xml:"alternative-service>type"`
		Action string `xml:"alternative-service>action"`
	}
	if err := xml.Unmarshal(res.Body(), &doc); err != nil {
		return false
	}
	return strings.TrimSpace(doc.Type) == typeRestoration && strings.TrimSpace(doc.Action) == ActionInitialRegister
}
