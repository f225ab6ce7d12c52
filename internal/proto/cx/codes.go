package cx

import (
	"fmt"
	"strings"
)

// Application and vendor identifiers.
const (
	AppID         uint32 = 16777216 // 3GPP Cx/Dx
	Vendor3GPP    uint32 = 10415
	VendorNone    uint32 = 0
	AuthStateless        = 1 // Auth-Session-State NO_STATE_MAINTAINED
)

// Command codes.
const (
	CmdUA uint32 = 300 // User-Authorization
	CmdSA uint32 = 301 // Server-Assignment
	CmdLI uint32 = 302 // Location-Info
	CmdMA uint32 = 303 // Multimedia-Auth
	CmdRT uint32 = 304 // Registration-Termination (HSS → S-CSCF)
	CmdPP uint32 = 305 // Push-Profile (HSS → S-CSCF)
)

// CommandName returns the request abbreviation of a Cx command code ("UAR", …).
func CommandName(code uint32) string {
	switch code {
	case CmdUA:
		return "UAR"
	case CmdSA:
		return "SAR"
	case CmdLI:
		return "LIR"
	case CmdMA:
		return "MAR"
	case CmdRT:
		return "RTR"
	case CmdPP:
		return "PPR"
	}
	return fmt.Sprintf("cmd-%d", code)
}

// AVP codes of the base protocol used here (vendor 0).
const (
	avpUserName                    uint32 = 1
	avpDigestRealm                 uint32 = 104
	avpDigestQoP                   uint32 = 110
	avpDigestAlgorithm             uint32 = 111
	avpDigestHA1                   uint32 = 121
	avpHostIPAddress               uint32 = 257
	avpAuthApplicationID           uint32 = 258
	avpAcctApplicationID           uint32 = 259
	avpVendorSpecificApplicationID uint32 = 260
	avpSessionID                   uint32 = 263
	avpOriginHost                  uint32 = 264
	avpSupportedVendorID           uint32 = 265
	avpVendorID                    uint32 = 266
	avpResultCode                  uint32 = 268
	avpProductName                 uint32 = 269
	avpAuthSessionState            uint32 = 277
	avpFailedAVP                   uint32 = 279
	avpErrorMessage                uint32 = 281
	avpDestinationRealm            uint32 = 283
	avpDestinationHost             uint32 = 293
	avpOriginRealm                 uint32 = 296
	avpExperimentalResult          uint32 = 297
	avpExperimentalResultCode      uint32 = 298
)

// AVP codes of Cx (vendor 10415).
const (
	avpVisitedNetworkIdentifier  uint32 = 600
	avpPublicIdentity            uint32 = 601
	avpServerName                uint32 = 602
	avpServerCapabilities        uint32 = 603
	avpMandatoryCapability       uint32 = 604
	avpOptionalCapability        uint32 = 605
	avpUserData                  uint32 = 606
	avpSIPNumberAuthItems        uint32 = 607
	avpSIPAuthenticationScheme   uint32 = 608
	avpSIPAuthenticate           uint32 = 609
	avpSIPAuthorization          uint32 = 610
	avpSIPAuthDataItem           uint32 = 612
	avpSIPItemNumber             uint32 = 613
	avpServerAssignmentType      uint32 = 614
	avpDeregistrationReason      uint32 = 615
	avpReasonCode                uint32 = 616
	avpReasonInfo                uint32 = 617
	avpUserAuthorizationType     uint32 = 623
	avpUserDataAlreadyAvailable  uint32 = 624
	avpSupportedFeatures         uint32 = 628
	avpFeatureListID             uint32 = 629
	avpFeatureList               uint32 = 630
	avpAssociatedIdentities      uint32 = 632
	avpOriginatingRequest        uint32 = 633
	avpSIPDigestAuthenticate     uint32 = 635
	avpUARFlags                  uint32 = 637
	avpSCSCFRestorationInfo      uint32 = 639
	avpPath                      uint32 = 640
	avpContact                   uint32 = 641
	avpSubscriptionInfo          uint32 = 642
	avpCallIDSIPHeader           uint32 = 643
	avpFromSIPHeader             uint32 = 644
	avpToSIPHeader               uint32 = 645
	avpRecordRoute               uint32 = 646
	avpMultipleRegistrationInd   uint32 = 648
	avpRestorationInfo           uint32 = 649
	avpInitialCSeqSequenceNumber uint32 = 654
	avpSARFlags                  uint32 = 655
	avpPCSCFSubscriptionInfo     uint32 = 660
	avpRegistrationTimeOut       uint32 = 661
)

// UserAuthorizationType is the User-Authorization-Type AVP (623), used in UAR and, in the quasi-pool takeover, in LIR.
type UserAuthorizationType uint32

const (
	UATRegistration                UserAuthorizationType = 0
	UATDeRegistration              UserAuthorizationType = 1
	UATRegistrationAndCapabilities UserAuthorizationType = 2
)

func (t UserAuthorizationType) String() string {
	switch t {
	case UATRegistration:
		return "REGISTRATION"
	case UATDeRegistration:
		return "DE_REGISTRATION"
	case UATRegistrationAndCapabilities:
		return "REGISTRATION_AND_CAPABILITIES"
	}
	return fmt.Sprintf("UAT(%d)", uint32(t))
}

// ServerAssignmentType is the Server-Assignment-Type AVP (614).
type ServerAssignmentType uint32

const (
	SATNoAssignment                   ServerAssignmentType = 0
	SATRegistration                   ServerAssignmentType = 1
	SATReRegistration                 ServerAssignmentType = 2
	SATUnregisteredUser               ServerAssignmentType = 3
	SATTimeoutDeregistration          ServerAssignmentType = 4
	SATUserDeregistration             ServerAssignmentType = 5
	SATTimeoutDeregistrationStoreName ServerAssignmentType = 6
	SATUserDeregistrationStoreName    ServerAssignmentType = 7
	SATAdministrativeDeregistration   ServerAssignmentType = 8
	SATAuthenticationFailure          ServerAssignmentType = 9
	SATAuthenticationTimeout          ServerAssignmentType = 10
	SATDeregistrationTooMuchData      ServerAssignmentType = 11
	SATAAAUserDataRequest             ServerAssignmentType = 12 // SWx only
	SATPGWUpdate                      ServerAssignmentType = 13 // SWx only
	SATRestoration                    ServerAssignmentType = 14 // SWx only
)

var satNames = [...]string{"NO_ASSIGNMENT", "REGISTRATION", "RE_REGISTRATION", "UNREGISTERED_USER",
	"TIMEOUT_DEREGISTRATION", "USER_DEREGISTRATION", "TIMEOUT_DEREGISTRATION_STORE_SERVER_NAME",
	"USER_DEREGISTRATION_STORE_SERVER_NAME", "ADMINISTRATIVE_DEREGISTRATION", "AUTHENTICATION_FAILURE",
	"AUTHENTICATION_TIMEOUT", "DEREGISTRATION_TOO_MUCH_DATA", "AAA_USER_DATA_REQUEST", "PGW_UPDATE", "RESTORATION"}

func (t ServerAssignmentType) String() string {
	if int(t) < len(satNames) {
		return satNames[t]
	}
	return fmt.Sprintf("SAT(%d)", uint32(t))
}

// Deregistration reason codes (Reason-Code AVP 616) for RTR.
const (
	ReasonPermanentTermination uint32 = 0
	ReasonNewServerAssigned    uint32 = 1
	ReasonServerChange         uint32 = 2
	ReasonRemoveSCSCF          uint32 = 3
)

// Authentication schemes (SIP-Authentication-Scheme AVP 608). Compare them with SameScheme: peers differ in case
// (Kamailio's "HSS-Selected" algorithm sends "unknown").
const (
	SchemeSIPDigest = "SIP Digest"
	SchemeAKAv1MD5  = "Digest-AKAv1-MD5"
	SchemeUnknown   = "Unknown"
)

// SameScheme reports whether two SIP-Authentication-Scheme values name the same scheme, regardless of case.
func SameScheme(a, b string) bool { return strings.EqualFold(a, b) }

// Feature bits of Supported-Features, Feature-List-ID 1 (TS 29.229 §7.1.1).
const (
	FeatureSiFC              uint32 = 1 << 0
	FeatureAliasInd          uint32 = 1 << 1
	FeatureIMSRestorationInd uint32 = 1 << 2
)
