package sipx

import (
	"context"
	"errors"
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
//   - anything else 500.
//
// The failure of a Cx request is the CSCFs' to map (internal/nf/cxsip): sipx knows nothing of Cx.
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
	return 500, "Server Internal Error"
}
