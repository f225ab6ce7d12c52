package sipx

import (
	"fmt"
	"net"
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// Header names of the IMS extensions the testbed uses.
const (
	HdrPath               = "Path"
	HdrServiceRoute       = "Service-Route"
	HdrPAssertedIdentity  = "P-Asserted-Identity"
	HdrPPreferredIdentity = "P-Preferred-Identity"
	HdrPAssociatedURI     = "P-Associated-URI"
	HdrPVisitedNetworkID  = "P-Visited-Network-ID"
	HdrPChargingVector    = "P-Charging-Vector"
	ParamOrig             = "orig"
	ParamRestore          = "restore"
)

// Msg is a request or a response (sip.Message lacks the header list methods).
type Msg interface {
	sip.Message
	Headers() []sip.Header
	GetHeader(name string) sip.Header
	RemoveHeader(name string) bool
}

// HeaderValues returns every value of a header, splitting comma-separated lists outside <> and quotes.
func HeaderValues(m Msg, name string) []string {
	var out []string
	for _, h := range m.GetHeaders(name) {
		out = append(out, SplitList(h.Value())...)
	}
	return out
}

// SplitList splits a header value on commas that are outside angle brackets and quotes (vocab.SplitList).
func SplitList(v string) []string { return vocab.SplitList(v) }

// RemoveHeaders removes every header with that name (case-insensitive).
func RemoveHeaders(m Msg, name string) {
	for {
		found := false
		for _, h := range m.Headers() {
			if strings.EqualFold(h.Name(), name) {
				m.RemoveHeader(h.Name())
				found = true
				break
			}
		}
		if !found {
			return
		}
	}
}

// ParseNameAddr parses "<sip:a@b;lr>;tag=x" or "sip:a@b" into its URI.
func ParseNameAddr(v string) (sip.Uri, error) {
	var u sip.Uri
	var params sip.HeaderParams
	if _, err := sip.ParseAddressValue(strings.TrimSpace(v), &u, &params); err != nil {
		return u, fmt.Errorf("sipx: parse address %q: %w", v, err)
	}
	return u, nil
}

// RouteURI builds a loose-routing URI for a node: sip:[user@]host;lr plus flag parameters. No port: the next hop
// resolves the host's per-host SRV record and so gets the failover list (SPEC §2.1).
func RouteURI(user, host string, flags ...string) sip.Uri {
	u := sip.Uri{Scheme: "sip", User: user, Host: host, UriParams: sip.NewParams()}
	u.UriParams.Add("lr", "")
	for _, f := range flags {
		if k, v, ok := strings.Cut(f, "="); ok {
			u.UriParams.Add(k, v)
		} else {
			u.UriParams.Add(f, "")
		}
	}
	return u
}

// HasParam reports a URI parameter (flag or key=value).
func HasParam(u sip.Uri, name string) bool {
	if u.UriParams == nil {
		return false
	}
	_, ok := u.UriParams.Get(name)
	return ok
}

// ParamValue returns a URI parameter's value.
func ParamValue(u sip.Uri, name string) string {
	if u.UriParams == nil {
		return ""
	}
	v, _ := u.UriParams.Get(name)
	return v
}

// TopRoute returns the first Route header, or nil.
func TopRoute(req *sip.Request) *sip.RouteHeader { return req.Route() }

// PopRoute removes the first Route header and returns its URI.
func PopRoute(req *sip.Request) (sip.Uri, bool) {
	r := req.Route()
	if r == nil {
		return sip.Uri{}, false
	}
	u := r.Address
	req.RemoveHeader("Route")
	return u, true
}

// PrependRoute puts a Route header on top.
func PrependRoute(req *sip.Request, u sip.Uri) {
	req.PrependHeader(&sip.RouteHeader{Address: u})
}

// Routes returns the URIs of every Route header, in order.
func Routes(req *sip.Request) []sip.Uri {
	var out []sip.Uri
	for _, h := range req.GetHeaders("Route") {
		if r, ok := h.(*sip.RouteHeader); ok {
			out = append(out, r.Address)
		}
	}
	return out
}

// IsHost reports whether a URI names host (case-insensitive, ignoring a trailing dot).
func IsHost(u sip.Uri, host string) bool {
	return strings.EqualFold(strings.TrimSuffix(u.Host, "."), strings.TrimSuffix(host, "."))
}

// Hop is where the next request goes: an SRV name to walk (RFC 3263 §4.2, no port in the URI) or an explicit
// address (a port or an IP literal in the URI).
type Hop struct {
	Host string // host name or IP from the URI (for logs)
	SRV  string // "_sip._udp.<host>" when the URI has a host name and no port
	Addr string // "ip:port" when the URI has an explicit port or an IP
	// Pin keeps only the SRV target of that name (a named S-CSCF, not its failover list): peer health still
	// applies, so a pinned target known to be down gives ErrNoTarget at once.
	Pin string
}

func (h Hop) String() string {
	if h.SRV != "" {
		if h.Pin != "" {
			return h.SRV + "@" + h.Pin
		}
		return h.SRV
	}
	return h.Addr
}

// PinnedHop is the priority-1 member of a host's per-host SRV record, and only it: the named node, with no
// failover to the rest of its pool.
func PinnedHop(host string) Hop { return Hop{Host: host, SRV: "_sip._udp." + host, Pin: host} }

// HopFor returns the hop for a URI. An IP literal without a port gets 5060.
func HopFor(u sip.Uri) Hop {
	host := strings.TrimSuffix(u.Host, ".")
	if ip := net.ParseIP(host); ip != nil {
		port := u.Port
		if port == 0 {
			port = 5060
		}
		return Hop{Host: host, Addr: HostPort(host, port)}
	}
	if u.Port != 0 {
		return Hop{Host: host, Addr: HostPort(host, u.Port)} // resolved by A lookup
	}
	return Hop{Host: host, SRV: "_sip._udp." + host}
}

// SRVHop returns the hop for a host name's SRV record.
func SRVHop(host string) Hop { return Hop{Host: host, SRV: "_sip._udp." + host} }

// AddrHop returns a hop to a fixed address.
func AddrHop(addr string) Hop {
	host, _, _ := net.SplitHostPort(addr)
	return Hop{Host: host, Addr: addr}
}

// IdentityOf extracts the URI of a P-Asserted-Identity / P-Preferred-Identity style value.
func IdentityOf(v string) (string, error) {
	u, err := ParseNameAddr(v)
	if err != nil {
		return "", err
	}
	return AOR(u), nil
}

// AOR returns the address of record of a URI: scheme:user@host, without port and parameters.
func AOR(u sip.Uri) string {
	scheme := u.Scheme
	if scheme == "" {
		scheme = "sip"
	}
	if scheme == "tel" {
		num, _, _ := strings.Cut(u.Raw(), ";")
		if num == "" {
			num = u.User
		}
		return "tel:" + num
	}
	if u.User == "" {
		return scheme + ":" + u.Host
	}
	return scheme + ":" + u.User + "@" + u.Host
}

// FirstHeader returns the value of the first header with that name, or "".
func FirstHeader(m Msg, name string) string {
	if h := m.GetHeader(name); h != nil {
		return h.Value()
	}
	return ""
}

// URIString formats a URI value (sip.Uri.String has a pointer receiver).
func URIString(u sip.Uri) string { return u.String() }

// NameAddr formats a URI as <uri>.
func NameAddr(u sip.Uri) string { return "<" + u.String() + ">" }
