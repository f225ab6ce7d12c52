package ue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

func init() {
	// IMS REGISTERs and their 200 OKs (Path, Service-Route, P-Associated-URI, Authorization) and INVITEs with
	// four Record-Routes exceed sipgo's default 1300-byte UDP limit. Only ever raised, since other packages of
	// the same binary may have raised it further.
	if sip.UDPMTUSize < 9000 {
		sip.UDPMTUSize = 9000
	}
}

const userAgent = "quasipool-ue"

// headerList returns every value of the named headers, comma lists split.
func headerList(m sip.Message, name string) []string {
	var out []string
	for _, h := range m.GetHeaders(name) {
		out = append(out, vocab.SplitList(h.Value())...)
	}
	return out
}

// uriHost returns the host of a name-addr or URI value ("<sip:orig@scscf1.ims.test;lr>" → scscf1.ims.test).
func uriHost(v string) string {
	var u sip.Uri
	if _, err := sip.ParseAddressValue(v, &u, nil); err != nil {
		return ""
	}
	return u.Host
}

// nodeHosts remembers the first P-CSCF and S-CSCF host names met in a walk over routing headers.
type nodeHosts struct{ pcscf, scscf string }

func (n *nodeHosts) see(host string) {
	h := strings.ToLower(host)
	switch {
	case strings.Contains(h, "pcscf"):
		if n.pcscf == "" {
			n.pcscf = h
		}
	case strings.Contains(h, "scscf"):
		if n.scscf == "" {
			n.scscf = h
		}
	}
}

func (n *nodeHosts) fill(from nodeHosts) {
	if n.pcscf == "" {
		n.pcscf = from.pcscf
	}
	if n.scscf == "" {
		n.scscf = from.scscf
	}
}

// recordRouteHosts returns the Record-Route hosts in header order.
func recordRouteHosts(m sip.Message) []string {
	var out []string
	for _, h := range m.GetHeaders("Record-Route") {
		if rr, ok := h.(*sip.RecordRouteHeader); ok {
			out = append(out, rr.Address.Host)
		} else {
			for _, v := range vocab.SplitList(h.Value()) {
				out = append(out, uriHost(v))
			}
		}
	}
	return out
}

// moHosts finds the caller's own P-CSCF and S-CSCF in a response to its INVITE: proxies near the caller
// record-route first, so they are at the bottom of the list.
func moHosts(res *sip.Response) nodeHosts {
	var n nodeHosts
	rr := recordRouteHosts(res)
	for i := len(rr) - 1; i >= 0; i-- {
		n.see(rr[i])
	}
	return n
}

// mtHosts finds the callee's P-CSCF and S-CSCF in an incoming INVITE: the nearest proxies are on top of
// Record-Route and Via.
func mtHosts(req *sip.Request) nodeHosts {
	var n nodeHosts
	for _, h := range recordRouteHosts(req) {
		n.see(h)
	}
	for _, h := range req.GetHeaders("Via") {
		if v, ok := h.(*sip.ViaHeader); ok {
			n.see(v.Host)
		}
	}
	return n
}

// registerHosts finds the P-CSCF (Path) and the S-CSCF (Service-Route) in a 200 OK to REGISTER.
func registerHosts(res *sip.Response) nodeHosts {
	var n nodeHosts
	for _, name := range []string{"Path", "Service-Route"} {
		for _, v := range headerList(res, name) {
			n.see(uriHost(v))
		}
	}
	return n
}

// sdp is a minimal audio offer/answer; nobody sends media in the lab.
func sdp(ip string, port int) []byte {
	id := strconv.FormatInt(int64(port)*7919, 10)
	return []byte("v=0\r\n" +
		"o=- " + id + " 1 IN IP4 " + ip + "\r\n" +
		"s=-\r\n" +
		"c=IN IP4 " + ip + "\r\n" +
		"t=0 0\r\n" +
		"m=audio " + strconv.Itoa(port) + " RTP/AVP 0\r\n" +
		"a=rtpmap:0 PCMU/8000\r\n")
}

// Failures of a registration or call, checked with errors.Is / errors.As.
var (
	// ErrNotRunning: the ue is not (or no longer) running.
	ErrNotRunning = errors.New("ue: not running")
	// ErrTimeout: no final answer in time (transaction timeout, or the call timeout; a call is then CANCELled).
	ErrTimeout = errors.New("no final answer")
	// ErrTransport: the request could not be sent.
	ErrTransport = errors.New("transport error")
	// ErrBackingOff: the network answered 503 with Retry-After and the time is not over: nothing was sent.
	ErrBackingOff = errors.New("backing off (503 Retry-After)")
)

// ResultHeldBack is the result of a call the phone did not send because it was backing off after a 503 with
// Retry-After (its record has status 503; the report counts it as a failed call).
const ResultHeldBack = "held_back"

// StatusError is a final non-2xx answer.
type StatusError struct {
	Code   int
	Reason string
}

func (e *StatusError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Reason) }

// resultOf maps an outcome to a record's result: "ok", the status code, "timeout", "transport", "aborted".
func resultOf(err error) string {
	var se *StatusError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &se):
		return strconv.Itoa(se.Code)
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrTransport):
		return "transport"
	case errors.Is(err, ErrNotRunning), errors.Is(err, errAborted):
		return "aborted"
	default:
		return "error"
	}
}

var errAborted = errors.New("aborted")

// txError maps a sipgo transaction error to ours.
func txError(err error) error {
	switch {
	case errors.Is(err, sip.ErrTransactionTimeout):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.Is(err, sip.ErrTransactionTransport):
		return fmt.Errorf("%w: %w", ErrTransport, err)
	case err == nil:
		return fmt.Errorf("%w: transaction ended", ErrTransport)
	default:
		return err
	}
}
