package vocab

import (
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// Header and parameter names of a registration's expiry.
const (
	HdrContact    = "Contact"
	HdrExpires    = "Expires"
	ParamExpires  = "expires"
	HdrMinExpires = "Min-Expires"
)

// Contacts returns the Contact entries of a message in order, one per name-addr: sipgo parses a received message's
// comma-separated list into one *sip.ContactHeader each; a header built with sip.NewHeader is parsed here. An entry
// that does not parse is skipped.
func Contacts(m sip.Message) []*sip.ContactHeader {
	var out []*sip.ContactHeader
	for _, h := range m.GetHeaders(HdrContact) {
		if c, ok := h.(*sip.ContactHeader); ok {
			if c != nil {
				out = append(out, c)
			}
			continue
		}
		for _, v := range SplitList(h.Value()) {
			c := &sip.ContactHeader{}
			if _, err := sip.ParseAddressValue(v, &c.Address, &c.Params); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// IsWildcard reports the Contact "*" (RFC 3261 §10.2.2: with Expires 0, remove every binding of the AOR).
func IsWildcard(c *sip.ContactHeader) bool {
	return c != nil && c.Address.Wildcard
}

// maxDeltaSeconds is the largest expiry: RFC 3261 §10.2.1 reads larger values as 2**32-1.
const maxDeltaSeconds = 1<<32 - 1

// deltaSeconds parses an expiry value (RFC 3261 §25.1 delta-seconds: digits only, too large a value read as
// 2**32-1). A malformed value (empty, a sign, anything but digits) is no value.
func deltaSeconds(v string) (int, bool) {
	v = strings.TrimSpace(v)
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > maxDeltaSeconds {
		return maxDeltaSeconds, true
	}
	return int(n), true
}

// ContactExpires returns a Contact's expires parameter, ok false when it has none (or a malformed one).
func ContactExpires(c *sip.ContactHeader) (int, bool) {
	if c == nil || c.Params == nil {
		return 0, false
	}
	v, ok := c.Params.Get(ParamExpires)
	if !ok {
		return 0, false
	}
	return deltaSeconds(v)
}

// ExpiresHeader returns the value of the Expires header, ok false when there is none (or a malformed one).
func ExpiresHeader(m sip.Message) (int, bool) {
	hs := m.GetHeaders(HdrExpires)
	if len(hs) == 0 || hs[0] == nil {
		return 0, false
	}
	return deltaSeconds(hs[0].Value())
}

// Expiry is the expiry of one binding in a REGISTER or in its 2xx (RFC 3261 §10.2.1, §10.3 step 6): the Contact's
// expires parameter wins over the Expires header, which applies to every Contact without the parameter. ok is false
// when neither gives a value: a registrar then applies its default, the registering UA keeps what it asked for.
// c may be nil (a message without a Contact): the Expires header alone decides.
func Expiry(m sip.Message, c *sip.ContactHeader) (seconds int, ok bool) {
	if n, ok := ContactExpires(c); ok {
		return n, true
	}
	return ExpiresHeader(m)
}

// RequestedExpiry is the expiry a REGISTER asks for: Expiry of its first Contact (the testbed's phones and the BAC
// register one Contact each). "Contact: *" has no parameter, so the Expires header decides (it must be 0).
func RequestedExpiry(req *sip.Request) (seconds int, ok bool) {
	var first *sip.ContactHeader
	if cs := Contacts(req); len(cs) > 0 {
		first = cs[0]
	}
	return Expiry(req, first)
}

// IsDeregistration reports a REGISTER that removes its binding: an effective expiry of 0, whether written as
// "Contact: <…>;expires=0", as "Expires: 0" on a Contact without the parameter, or as "Contact: *" with
// "Expires: 0" (remove all). A REGISTER whose Contact says expires=600 is a registration even with "Expires: 0".
func IsDeregistration(req *sip.Request) bool {
	n, ok := RequestedExpiry(req)
	return ok && n == 0
}

// GrantedExpiry reads the expiry a 2xx to REGISTER grants one binding (RFC 3261 §10.3 step 8: the registrar lists
// every binding with its expires parameter): the expires parameter of the Contact mine names (nil: none is
// recognised), else of the only Contact (a node that rewrote the Contact, such as the BAC, cannot be recognised),
// else the Expires header. ok is false when none of them gives a value.
func GrantedExpiry(res *sip.Response, mine func(sip.Uri) bool) (seconds int, ok bool) {
	cs := Contacts(res)
	if mine != nil {
		for _, c := range cs {
			if mine(c.Address) {
				if n, ok := ContactExpires(c); ok {
					return n, true
				}
			}
		}
	}
	if len(cs) == 1 {
		if n, ok := ContactExpires(cs[0]); ok {
			return n, true
		}
	}
	return ExpiresHeader(res)
}
