package cx

import (
	"github.com/fiorix/go-diameter/v4/diam"
)

// Registration-Termination (RTR/RTA, TS 29.229 §6.1.9): the HSS de-registers a user at its S-CSCF.

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
