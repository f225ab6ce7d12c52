package store

import (
	"crypto/md5" //nolint:gosec // SIP Digest (RFC 2617) HA1 is defined as MD5; not used for security here.
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// AuthSIPDigest is the SIP-Authentication-Scheme value for SIP Digest (TS 29.229) and the default scheme.
const AuthSIPDigest = "SIP Digest"

// authSchemes are the SIP-Authentication-Scheme values of TS 29.229 §6.3.2; whether the HSS supports one is
// decided by the Cx procedures, not here. true: the scheme needs a password (HA1).
var authSchemes = map[string]bool{
	AuthSIPDigest:        true,
	"Digest-HTTP":        true,
	"Digest-AKAv1-MD5":   false, // keys (K, OPc) are not modelled yet
	"NASS-Bundled":       false,
	"Early-IMS-Security": false,
	"Unknown":            false,
}

// maxIdentityLen bounds identities and other short strings; bbolt keys must stay below bolt.MaxKeySize and
// nothing in a lab needs more.
const maxIdentityLen = 1024

// maxServiceProfileLen bounds the optional iFC fragment.
const maxServiceProfileLen = 256 << 10

// Subscriber is one IMS subscription: a private identity (the key) with its public identities and credentials.
type Subscriber struct {
	IMPI                 string   `json:"impi" yaml:"impi"`                                                       // private identity, e.g. user0001@ims.test (key)
	IMPUs                []string `json:"impus" yaml:"impus"`                                                     // public identities, e.g. sip:user0001@ims.test; at least 1; unique across all subscribers
	Realm                string   `json:"realm" yaml:"realm"`                                                     // digest realm, e.g. ims.test
	Password             string   `json:"password,omitempty" yaml:"password,omitempty"`                           // input only: never stored; converted to HA1
	HA1                  string   `json:"ha1,omitempty" yaml:"ha1,omitempty"`                                     // hex MD5(impi ":" realm ":" password); stored
	AuthScheme           string   `json:"auth_scheme" yaml:"auth_scheme"`                                         // default "SIP Digest"
	CapabilitySet        string   `json:"capability_set,omitempty" yaml:"capability_set,omitempty"`               // name of a capability set in the HSS config; "" = default
	UnregisteredServices bool     `json:"unregistered_services,omitempty" yaml:"unregistered_services,omitempty"` // services (e.g. MT call handling) while unregistered
	VisitedNetworks      []string `json:"visited_networks,omitempty" yaml:"visited_networks,omitempty"`           // allowed visited networks; empty = any
	ServiceProfileXML    string   `json:"service_profile_xml,omitempty" yaml:"service_profile_xml,omitempty"`     // optional extra iFC XML fragment
}

// FieldError reports the field of a subscriber that failed validation. errors.Is(err, ErrInvalid) holds for it.
type FieldError struct {
	IMPI   string // the subscriber's private identity as given (may be empty)
	Field  string // e.g. "impus[0]"
	Reason string // e.g. "must be a sip: or tel: URI"
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("subscriber %q: %s: %s", e.IMPI, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// HA1 returns the SIP Digest HA1, hex(MD5(impi ":" realm ":" password)) as in RFC 2617 with username = IMPI.
func HA1(impi, realm, password string) string {
	sum := md5.Sum([]byte(impi + ":" + realm + ":" + password)) //nolint:gosec // see import comment
	return hex.EncodeToString(sum[:])
}

// Normalize fills defaults: AuthScheme "SIP Digest"; HA1 from Password (a password always wins over a given
// HA1), after which Password is cleared so it is never stored; HA1 in lower case.
func (s *Subscriber) Normalize() {
	if s.AuthScheme == "" {
		s.AuthScheme = AuthSIPDigest
	}
	if s.Password != "" {
		s.HA1 = HA1(s.IMPI, s.Realm, s.Password)
		s.Password = ""
	}
	s.HA1 = strings.ToLower(s.HA1)
}

// Validate checks a subscriber and returns a *FieldError naming the first bad field. It accepts a subscriber
// whose credentials are still a Password (that is, before Normalize).
func (s *Subscriber) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{IMPI: s.IMPI, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	if err := checkIMPI(s.IMPI); err != nil {
		return bad("impi", "%v", err)
	}
	if len(s.IMPUs) == 0 {
		return bad("impus", "at least one public identity is required")
	}
	seen := make(map[string]int, len(s.IMPUs))
	for i, u := range s.IMPUs {
		field := fmt.Sprintf("impus[%d]", i)
		if err := checkIMPU(u); err != nil {
			return bad(field, "%v", err)
		}
		if j, dup := seen[u]; dup {
			return bad(field, "duplicate of impus[%d] %q", j, u)
		}
		seen[u] = i
	}
	if err := checkToken(s.Realm, true); err != nil {
		return bad("realm", "%v", err)
	}
	if strings.ContainsRune(s.Realm, '"') {
		return bad("realm", "must not contain '\"'")
	}
	scheme := s.AuthScheme
	if scheme == "" {
		scheme = AuthSIPDigest
	}
	needsPassword, known := authSchemes[scheme]
	if !known {
		return bad("auth_scheme", "unknown scheme %q (TS 29.229 names %s)", s.AuthScheme, strings.Join(knownSchemes(), ", "))
	}
	switch {
	case s.HA1 != "":
		if len(s.HA1) != 2*md5.Size {
			return bad("ha1", "must be %d hex digits, got %d characters", 2*md5.Size, len(s.HA1))
		}
		if _, err := hex.DecodeString(s.HA1); err != nil {
			return bad("ha1", "must be hex")
		}
	case s.Password == "" && needsPassword:
		return bad("password", "a password or ha1 is required for %q", scheme)
	}
	if err := checkToken(s.CapabilitySet, false); err != nil {
		return bad("capability_set", "%v", err)
	}
	seenVN := make(map[string]int, len(s.VisitedNetworks))
	for i, vn := range s.VisitedNetworks {
		field := fmt.Sprintf("visited_networks[%d]", i)
		if err := checkToken(vn, true); err != nil {
			return bad(field, "%v", err)
		}
		if j, dup := seenVN[vn]; dup {
			return bad(field, "duplicate of visited_networks[%d] %q", j, vn)
		}
		seenVN[vn] = i
	}
	if err := checkXMLFragment(s.ServiceProfileXML); err != nil {
		return bad("service_profile_xml", "%v", err)
	}
	return nil
}

func knownSchemes() []string {
	names := make([]string, 0, len(authSchemes))
	for name := range authSchemes {
		names = append(names, strconv.Quote(name))
	}
	slices.Sort(names)
	return names
}

// clone returns a deep copy, so callers (and Update's fn) cannot alias the caller's slices.
func (s Subscriber) clone() Subscriber {
	s.IMPUs = cloneStrings(s.IMPUs)
	s.VisitedNetworks = cloneStrings(s.VisitedNetworks)
	return s
}

func cloneStrings(in []string) []string {
	if in == nil {
		return nil
	}
	return append([]string(nil), in...)
}

// checkIMPI accepts a NAI (TS 23.003 §13.3): username@realm, no spaces or control characters.
func checkIMPI(impi string) error {
	if err := checkToken(impi, true); err != nil {
		return err
	}
	user, realm, ok := strings.Cut(impi, "@")
	if !ok || user == "" || realm == "" || strings.Contains(realm, "@") {
		return errors.New("must have the form username@realm")
	}
	return nil
}

// checkIMPU accepts a sip: or tel: URI without spaces; it does not parse the URI further.
func checkIMPU(impu string) error {
	if err := checkToken(impu, true); err != nil {
		return err
	}
	lower := strings.ToLower(impu)
	var rest string
	switch {
	case strings.HasPrefix(lower, "sip:"):
		rest = impu[len("sip:"):]
	case strings.HasPrefix(lower, "tel:"):
		rest = impu[len("tel:"):]
	default:
		return errors.New("must be a sip: or tel: URI")
	}
	if rest == "" {
		return errors.New("must be a sip: or tel: URI with a non-empty body")
	}
	if strings.ContainsAny(impu, "<>\"") {
		return errors.New(`must not contain '<', '>' or '"'`)
	}
	return nil
}

// checkToken rejects empty (when required), over-long, and whitespace or control characters.
func checkToken(s string, required bool) error {
	if s == "" {
		if required {
			return errors.New("required")
		}
		return nil
	}
	if len(s) > maxIdentityLen {
		return fmt.Errorf("longer than %d bytes", maxIdentityLen)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("must not contain whitespace, control characters or invalid UTF-8 (found %q)", r)
		}
	}
	return nil
}

// checkXMLFragment checks that s is well-formed XML content (any number of elements, balanced tags).
func checkXMLFragment(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > maxServiceProfileLen {
		return fmt.Errorf("longer than %d bytes", maxServiceProfileLen)
	}
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not well-formed XML: %w", err)
		}
	}
}
