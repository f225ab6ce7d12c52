package cx

import (
	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// Server-Assignment (SAR/SAA, TS 29.229 §6.1.3): the S-CSCF records itself and the registration state in the HSS.

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
