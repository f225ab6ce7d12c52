package sipx

import (
	"context"
	"errors"

	"github.com/imslab/quasipool/internal/proto/cx"
)

// StatusError is an error that says which SIP status answers it.
type StatusError struct {
	Code   int
	Reason string
	Err    error // the cause, may be nil
}

func (e *StatusError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *StatusError) Unwrap() error { return e.Err }

// Status returns an error answered with code and reason.
func Status(code int, reason string, cause error) error {
	return &StatusError{Code: code, Reason: reason, Err: cause}
}

// StatusOf is the one mapping from errors to SIP statuses of the SIP network functions:
//   - a *StatusError answers its own code;
//   - no reachable target (every member known down) 503, no answer / a timeout 504;
//   - a Cx error result from the HSS: user unknown 404, identities that do not match or roaming not allowed
//     403, identity not registered 480, the HSS too busy 503, any other Cx result 500; the HSS unreachable 504
//     (see CxStatus);
//   - anything else 500.
func StatusOf(err error) (int, string) {
	var se *StatusError
	switch {
	case err == nil:
		return 500, "Server Internal Error"
	case errors.As(err, &se):
		return se.Code, se.Reason
	case errors.Is(err, ErrNoTarget):
		return 503, "Service Unavailable"
	case errors.Is(err, ErrNoAnswer), errors.Is(err, context.DeadlineExceeded):
		return 504, "Server Time-out"
	}
	if _, ok := cx.ResultOf(err); ok {
		return CxStatus(err)
	}
	return 500, "Server Internal Error"
}

// CxStatus maps the failure of a Cx request to a SIP status (TS 24.229 §5.3.1.2, §5.3.2.1, §5.4.1.2).
func CxStatus(err error) (int, string) {
	res, ok := cx.ResultOf(err)
	if !ok {
		return 504, "HSS Unreachable"
	}
	switch res {
	case cx.ErrorUserUnknown:
		return 404, "Not Found"
	case cx.ErrorIdentitiesDontMatch, cx.ErrorRoamingNotAllowed, cx.ErrorAuthSchemeNotSupported:
		return 403, "Forbidden"
	case cx.ErrorIdentityNotRegistered:
		return 480, "Temporarily Unavailable"
	case cx.TooBusy:
		// The HSS shed the request (overload): the caller is told to come back later (Proxy.Fail adds
		// Retry-After), as a SIP node that sheds load does itself.
		return 503, "HSS Busy"
	default:
		return 500, "HSS Error"
	}
}
