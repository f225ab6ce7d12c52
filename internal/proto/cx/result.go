package cx

import (
	"errors"
	"fmt"

	"github.com/fiorix/go-diameter/v4/diam"
)

// Result is the outcome of a Cx request. Cx-specific results travel in Experimental-Result with Vendor-Id 10415
// (and then Result-Code is absent); base protocol results, including plain success, travel in Result-Code. The two
// name spaces overlap (2001 is DIAMETER_SUCCESS as a Result-Code and DIAMETER_FIRST_REGISTRATION as an
// Experimental-Result-Code), so a Result always says which AVP its code came in.
type Result struct {
	Code         uint32 `json:"code"`
	Experimental bool   `json:"experimental,omitempty"` // true: Experimental-Result, vendor 10415
}

// Base protocol Result-Code values (RFC 6733).
var (
	Success               = Result{Code: 2001}
	CommandUnsupported    = Result{Code: 3001}
	UnableToDeliver       = Result{Code: 3002}
	TooBusy               = Result{Code: 3004}
	ApplicationUnsupport  = Result{Code: 3007}
	InvalidHdrBits        = Result{Code: 3008}
	InvalidAVPBits        = Result{Code: 3009}
	UnknownPeer           = Result{Code: 3010}
	AVPUnsupported        = Result{Code: 5001}
	AuthorizationRejected = Result{Code: 5003}
	InvalidAVPValue       = Result{Code: 5004}
	MissingAVP            = Result{Code: 5005}
	UnableToComply        = Result{Code: 5012}
	InvalidAVPLength      = Result{Code: 5014}
)

// Cx Experimental-Result-Code values (TS 29.229 §6.2).
var (
	FirstRegistration             = Result{Code: 2001, Experimental: true}
	SubsequentRegistration        = Result{Code: 2002, Experimental: true}
	UnregisteredService           = Result{Code: 2003, Experimental: true}
	SuccessServerNameNotStored    = Result{Code: 2004, Experimental: true}
	ErrorUserUnknown              = Result{Code: 5001, Experimental: true}
	ErrorIdentitiesDontMatch      = Result{Code: 5002, Experimental: true}
	ErrorIdentityNotRegistered    = Result{Code: 5003, Experimental: true}
	ErrorRoamingNotAllowed        = Result{Code: 5004, Experimental: true}
	ErrorIdentityAlreadyRegistred = Result{Code: 5005, Experimental: true}
	ErrorAuthSchemeNotSupported   = Result{Code: 5006, Experimental: true}
	ErrorInAssignmentType         = Result{Code: 5007, Experimental: true}
	ErrorTooMuchData              = Result{Code: 5008, Experimental: true}
	ErrorNotSupportedUserData     = Result{Code: 5009, Experimental: true}
	ErrorFeatureUnsupported       = Result{Code: 5011, Experimental: true}
)

var resultNames = map[Result]string{
	Success: "DIAMETER_SUCCESS", CommandUnsupported: "DIAMETER_COMMAND_UNSUPPORTED",
	UnableToDeliver: "DIAMETER_UNABLE_TO_DELIVER", TooBusy: "DIAMETER_TOO_BUSY", ApplicationUnsupport: "DIAMETER_APPLICATION_UNSUPPORTED",
	InvalidHdrBits: "DIAMETER_INVALID_HDR_BITS", InvalidAVPBits: "DIAMETER_INVALID_AVP_BITS",
	UnknownPeer: "DIAMETER_UNKNOWN_PEER", AuthorizationRejected: "DIAMETER_AUTHORIZATION_REJECTED",
	AVPUnsupported: "DIAMETER_AVP_UNSUPPORTED", InvalidAVPValue: "DIAMETER_INVALID_AVP_VALUE",
	MissingAVP: "DIAMETER_MISSING_AVP", UnableToComply: "DIAMETER_UNABLE_TO_COMPLY",
	InvalidAVPLength:  "DIAMETER_INVALID_AVP_LENGTH",
	FirstRegistration: "DIAMETER_FIRST_REGISTRATION", SubsequentRegistration: "DIAMETER_SUBSEQUENT_REGISTRATION",
	UnregisteredService: "DIAMETER_UNREGISTERED_SERVICE", SuccessServerNameNotStored: "DIAMETER_SUCCESS_SERVER_NAME_NOT_STORED",
	ErrorUserUnknown: "DIAMETER_ERROR_USER_UNKNOWN", ErrorIdentitiesDontMatch: "DIAMETER_ERROR_IDENTITIES_DONT_MATCH",
	ErrorIdentityNotRegistered: "DIAMETER_ERROR_IDENTITY_NOT_REGISTERED", ErrorRoamingNotAllowed: "DIAMETER_ERROR_ROAMING_NOT_ALLOWED",
	ErrorIdentityAlreadyRegistred: "DIAMETER_ERROR_IDENTITY_ALREADY_REGISTERED", ErrorAuthSchemeNotSupported: "DIAMETER_ERROR_AUTH_SCHEME_NOT_SUPPORTED",
	ErrorInAssignmentType: "DIAMETER_ERROR_IN_ASSIGNMENT_TYPE", ErrorTooMuchData: "DIAMETER_ERROR_TOO_MUCH_DATA",
	ErrorNotSupportedUserData: "DIAMETER_ERROR_NOT_SUPPORTED_USER_DATA", ErrorFeatureUnsupported: "DIAMETER_ERROR_FEATURE_UNSUPPORTED",
}

// String names the result, e.g. "DIAMETER_FIRST_REGISTRATION (exp 2001)".
func (r Result) String() string {
	kind := "rc"
	if r.Experimental {
		kind = "exp"
	}
	if n, ok := resultNames[r]; ok {
		return fmt.Sprintf("%s (%s %d)", n, kind, r.Code)
	}
	return fmt.Sprintf("%s %d", kind, r.Code)
}

// Label is a short stable label for metrics and events: "2001", "exp2002".
func (r Result) Label() string {
	if r.Experimental {
		return fmt.Sprintf("exp%d", r.Code)
	}
	return fmt.Sprintf("%d", r.Code)
}

// IsSuccess reports a 2xxx result in either AVP.
func (r Result) IsSuccess() bool { return r.Code >= 2000 && r.Code < 3000 }

// Error is the answer of a request that did not succeed: a Diameter error answer, carried as a Go error so callers
// can check it with errors.As and branch on the result.
type Error struct {
	Command string // "UAR", …
	Result  Result
	Message string // Error-Message, if any
}

func (e *Error) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("cx: %s answered %s: %s", e.Command, e.Result, e.Message)
	}
	return fmt.Sprintf("cx: %s answered %s", e.Command, e.Result)
}

// ResultOf returns the Result of an error returned by a Client call, and whether it was a Diameter answer at all
// (false for timeouts, transport errors and cancellation).
func ResultOf(err error) (Result, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Result, true
	}
	return Result{}, false
}

// RequestError is what decoding a request yields when it cannot be served: the result to answer with and the
// AVPs to echo in Failed-AVP (RFC 6733 §7.5). Handlers can also return it to answer with a specific result.
type RequestError struct {
	Result  Result
	Message string
	Failed  []*diam.AVP
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("cx: %s: %s", e.Result, e.Message)
}

// Answerf builds a RequestError that answers with r.
func Answerf(r Result, format string, args ...any) *RequestError {
	return &RequestError{Result: r, Message: fmt.Sprintf(format, args...)}
}
