package cx

import (
	"fmt"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// SCSCFRestorationInfo is the SCSCF-Restoration-Info AVP (639): what an S-CSCF needs to serve a user registered at
// another S-CSCF, kept by the HSS as transparent data per private identity (TS 23.380 §4, TS 29.229 §6.3.60).
type SCSCFRestorationInfo struct {
	UserName            string            `json:"user_name"`
	Registrations       []RestorationInfo `json:"restoration_info"`
	RegistrationTimeOut time.Time         `json:"registration_time_out,omitzero"`
	AuthScheme          string            `json:"sip_authentication_scheme,omitempty"`
}

// RestorationInfo is one Restoration-Info AVP (649): one registration flow of the user.
type RestorationInfo struct {
	Path              string                 `json:"path"`
	Contact           string                 `json:"contact"`
	InitialCSeq       uint32                 `json:"initial_cseq,omitempty"`
	CallID            string                 `json:"call_id,omitempty"`
	Subscription      *SubscriptionInfo      `json:"subscription_info,omitempty"`
	PCSCFSubscription *PCSCFSubscriptionInfo `json:"pcscf_subscription_info,omitempty"`
}

// SubscriptionInfo is the UE's reg-event subscription dialog (642).
type SubscriptionInfo struct {
	CallID      string `json:"call_id"`
	From        string `json:"from"`
	To          string `json:"to"`
	RecordRoute string `json:"record_route"`
	Contact     string `json:"contact"`
}

// PCSCFSubscriptionInfo is the P-CSCF's reg-event subscription dialog (660).
type PCSCFSubscriptionInfo struct {
	CallID  string `json:"call_id"`
	From    string `json:"from"`
	To      string `json:"to"`
	Contact string `json:"contact"`
}

// AVP encodes the restoration info as an SCSCF-Restoration-Info AVP.
func (s *SCSCFRestorationInfo) AVP() *diam.AVP {
	g := grp(m0(avpUserName, datatype.UTF8String(s.UserName)))
	for _, ri := range s.Registrations {
		rg := grp(v(avpPath, datatype.OctetString(ri.Path)), v(avpContact, datatype.OctetString(ri.Contact)))
		if ri.InitialCSeq != 0 {
			rg.AVP = append(rg.AVP, v(avpInitialCSeqSequenceNumber, datatype.Unsigned32(ri.InitialCSeq)))
		}
		if ri.CallID != "" {
			rg.AVP = append(rg.AVP, v(avpCallIDSIPHeader, datatype.OctetString(ri.CallID)))
		}
		if si := ri.Subscription; si != nil {
			rg.AVP = append(rg.AVP, v(avpSubscriptionInfo, grp(
				v(avpCallIDSIPHeader, datatype.OctetString(si.CallID)),
				v(avpFromSIPHeader, datatype.OctetString(si.From)),
				v(avpToSIPHeader, datatype.OctetString(si.To)),
				v(avpRecordRoute, datatype.OctetString(si.RecordRoute)),
				v(avpContact, datatype.OctetString(si.Contact)))))
		}
		if pi := ri.PCSCFSubscription; pi != nil {
			rg.AVP = append(rg.AVP, v(avpPCSCFSubscriptionInfo, grp(
				v(avpCallIDSIPHeader, datatype.OctetString(pi.CallID)),
				v(avpFromSIPHeader, datatype.OctetString(pi.From)),
				v(avpToSIPHeader, datatype.OctetString(pi.To)),
				v(avpContact, datatype.OctetString(pi.Contact)))))
		}
		g.AVP = append(g.AVP, v(avpRestorationInfo, rg))
	}
	if !s.RegistrationTimeOut.IsZero() {
		g.AVP = append(g.AVP, v(avpRegistrationTimeOut, datatype.Time(s.RegistrationTimeOut)))
	}
	if s.AuthScheme != "" {
		g.AVP = append(g.AVP, mv(avpSIPAuthenticationScheme, datatype.UTF8String(s.AuthScheme)))
	}
	return v(avpSCSCFRestorationInfo, g)
}

func decodeRestorationAVP(a *diam.AVP) (*SCSCFRestorationInfo, *RequestError) {
	list, ok := groupOf(a)
	if !ok {
		return nil, &RequestError{Result: InvalidAVPValue, Message: "SCSCF-Restoration-Info is not grouped", Failed: []*diam.AVP{a}}
	}
	r := &avpReader{list: list}
	s := &SCSCFRestorationInfo{
		UserName:            r.str("User-Name", avpUserName, 0, true),
		RegistrationTimeOut: r.time("Registration-Time-Out", avpRegistrationTimeOut, Vendor3GPP),
		AuthScheme:          r.str("SIP-Authentication-Scheme", avpSIPAuthenticationScheme, Vendor3GPP, false),
	}
	ris := findAVPs(list, avpRestorationInfo, Vendor3GPP)
	if len(ris) == 0 {
		r.missing("Restoration-Info", avpRestorationInfo, Vendor3GPP, &diam.GroupedAVP{})
	}
	for _, ria := range ris {
		rl, ok := groupOf(ria)
		if !ok {
			r.fail(InvalidAVPValue, ria, "Restoration-Info is not grouped")
			continue
		}
		rr := r.sub(rl)
		ri := RestorationInfo{
			Path:    rr.str("Path", avpPath, Vendor3GPP, true),
			Contact: rr.str("Contact", avpContact, Vendor3GPP, true),
			CallID:  rr.str("Call-ID-SIP-Header", avpCallIDSIPHeader, Vendor3GPP, false),
		}
		ri.InitialCSeq, _ = rr.u32("Initial-CSeq-Sequence-Number", avpInitialCSeqSequenceNumber, Vendor3GPP, false)
		if sl, sa := rr.group("Subscription-Info", avpSubscriptionInfo, Vendor3GPP, false); sa != nil {
			sr := rr.sub(sl)
			ri.Subscription = &SubscriptionInfo{
				CallID:      sr.str("Call-ID-SIP-Header", avpCallIDSIPHeader, Vendor3GPP, true),
				From:        sr.str("From-SIP-Header", avpFromSIPHeader, Vendor3GPP, true),
				To:          sr.str("To-SIP-Header", avpToSIPHeader, Vendor3GPP, true),
				RecordRoute: sr.str("Record-Route", avpRecordRoute, Vendor3GPP, true),
				Contact:     sr.str("Contact", avpContact, Vendor3GPP, true),
			}
			rr.merge(sr)
		}
		if pl, pa := rr.group("P-CSCF-Subscription-Info", avpPCSCFSubscriptionInfo, Vendor3GPP, false); pa != nil {
			pr := rr.sub(pl)
			ri.PCSCFSubscription = &PCSCFSubscriptionInfo{
				CallID:  pr.str("Call-ID-SIP-Header", avpCallIDSIPHeader, Vendor3GPP, true),
				From:    pr.str("From-SIP-Header", avpFromSIPHeader, Vendor3GPP, true),
				To:      pr.str("To-SIP-Header", avpToSIPHeader, Vendor3GPP, true),
				Contact: pr.str("Contact", avpContact, Vendor3GPP, true),
			}
			rr.merge(pr)
		}
		r.merge(rr)
		s.Registrations = append(s.Registrations, ri)
	}
	if r.err != nil {
		// A problem inside the group is reported against the whole grouped AVP.
		r.err.Message = "SCSCF-Restoration-Info: " + r.err.Message
		r.err.Failed = []*diam.AVP{a}
		return nil, r.err
	}
	return s, nil
}

// ParseRestorationRaw decodes the wire bytes of an SCSCF-Restoration-Info AVP, as the HSS stores them, back into an
// AVP that can be put into an answer unchanged.
func ParseRestorationRaw(raw []byte) (a *diam.AVP, err error) {
	defer func() {
		// go-diameter v4.3.0 can panic on some malformed AVPs (fixed upstream after v4.3.0).
		if p := recover(); p != nil {
			a, err = nil, fmt.Errorf("cx: stored restoration info: undecodable AVP: %v", p)
		}
	}()
	a, err = diam.DecodeAVP(raw, AppID, Dict())
	if err != nil {
		return nil, fmt.Errorf("cx: stored restoration info: %w", err)
	}
	if a.Code != avpSCSCFRestorationInfo || a.VendorID != Vendor3GPP {
		return nil, fmt.Errorf("cx: stored restoration info: AVP %d/%d is not SCSCF-Restoration-Info", a.Code, a.VendorID)
	}
	return a, nil
}

// DecodeRestorationRaw turns stored restoration bytes into the typed view (for inspection APIs and tests).
func DecodeRestorationRaw(raw []byte) (*SCSCFRestorationInfo, error) {
	a, err := ParseRestorationRaw(raw)
	if err != nil {
		return nil, err
	}
	info, rerr := decodeRestorationAVP(a)
	if rerr != nil {
		return nil, rerr
	}
	return info, nil
}

// RestorationUserName returns the User-Name inside stored restoration bytes: the private identity it belongs to.
func RestorationUserName(raw []byte) (string, error) {
	info, err := DecodeRestorationRaw(raw)
	if err != nil {
		return "", err
	}
	return info.UserName, nil
}

// String summarises the restoration info for logs.
func (s *SCSCFRestorationInfo) String() string {
	if s == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s: %d registration(s), expires %s, %s", s.UserName, len(s.Registrations),
		s.RegistrationTimeOut.UTC().Format(time.RFC3339), s.AuthScheme)
}
