// Package cxsip is the one mapping from the failure of a Cx request to the SIP status a CSCF answers with. It
// belongs to the CSCFs, which speak both protocols; the SIP glue (sipx) knows nothing of Cx.
package cxsip

import "github.com/imslab/quasipool/internal/proto/cx"

// Status maps the failure of a Cx request to a SIP status (TS 24.229 §5.3.1.2, §5.3.2.1, §5.4.1.2): user unknown
// 404, identities that do not match, roaming not allowed or an unsupported authentication scheme 403, identity not
// registered 480, the HSS too busy 503, any other Cx result 500; no Cx answer at all (the HSS unreachable) 504.
func Status(err error) (int, string) {
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
		// The HSS shed the request (overload): the caller is told to come back later (sipx.Proxy.Fail adds
		// Retry-After), as a SIP node that sheds load does itself.
		return 503, "HSS Busy"
	default:
		return 500, "HSS Error"
	}
}
