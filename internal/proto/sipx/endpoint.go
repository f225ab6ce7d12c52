// Package sipx is the SIP glue shared by the testbed's network functions, over sipgo: a node's UDP endpoint, a
// transaction-stateful forwarder that walks RFC 3263 targets with the retry rules of SPEC §2.2, and the IMS
// headers and URI parameters (Path, Service-Route, P-Asserted-Identity, orig, restore).
package sipx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/overload"
	"github.com/imslab/quasipool/internal/runtime/udpbuf"
)

func init() {
	// IMS REGISTERs and their 200 OKs (Path, Service-Route, P-Associated-URI, Authorization) exceed sipgo's
	// 1300-byte UDP limit; everything in the lab runs over loopback or a bridge with a large MTU.
	sip.UDPMTUSize = 9000
}

// Timers are the SIP timers of a node. sipgo's timers are process-wide, which is fine because every node is
// its own process; in-process tests share them.
type Timers struct {
	T1 time.Duration `yaml:"t1"` // RFC 3261 T1 (default 500ms); Timer B/F = 64×T1
}

// Apply sets the process-wide sipgo timers.
func (t Timers) Apply() {
	if t.T1 > 0 {
		sip.SetTimers(t.T1, 8*t.T1, 10*t.T1)
	}
}

// Endpoint is a node's SIP stack bound to one UDP socket: requests it sends leave from the socket it listens on,
// so responses and later requests come back to the same address.
type Endpoint struct {
	Host   string // the node's host name (FQDN), used in Path, Record-Route and Service-Route
	Addr   string // ip:port it listens on
	UA     *sipgo.UserAgent
	Server *sipgo.Server
	Client *sipgo.Client
	// Overload sheds new requests the node cannot serve (503 with Retry-After, internal/runtime/overload); nil admits all.
	Overload *overload.Controller

	conn      *tracingConn
	laddr     sip.Addr
	viaHost   string // laddr.IP as text, for Via
	addrHost  string // the host part of Addr
	log       *slog.Logger
	listening chan struct{}
	stray     *atomic.Uint64 // responses that matched no transaction
}

// StrayResponses returns how many responses this endpoint received that matched no client transaction (dropped:
// RFC 6026 §7.2), such as a 2xx retransmitted after the transaction's Accepted state or an answer that came after
// the node gave up on the request.
func (e *Endpoint) StrayResponses() uint64 { return e.stray.Load() }

// NewEndpoint binds listen ("127.0.0.1:5061", port 0 allowed) and builds the sipgo stack for host.
func NewEndpoint(host, listen string, log *slog.Logger) (*Endpoint, error) {
	if log == nil {
		log = slog.Default()
	}
	raw, err := net.ListenPacket("udp", listen)
	if err != nil {
		return nil, fmt.Errorf("sipx: listen %s: %w", listen, err)
	}
	// A fault's burst must queue in the socket, not be dropped by the kernel while the node waits for the CPU
	// (internal/runtime/udpbuf).
	if want := udpbuf.Wanted(); want > 0 {
		if got, forced, err := udpbuf.Size(raw, want); err != nil {
			log.Warn("sipx: cannot size the UDP receive buffer", "err", err)
		} else if !forced && got < want {
			log.Warn("sipx: UDP receive buffer capped by net.core.rmem_max (run as root, or raise it): bursts may be dropped",
				"asked", want, "got", got)
		}
	}
	conn := &tracingConn{PacketConn: raw}
	addr := conn.LocalAddr().(*net.UDPAddr)
	// A response that matches no transaction (a retransmission after the transaction ended, an answer to a request
	// given up on) is dropped, as RFC 6026 §7.2 wants. sipgo would log each at Info: thousands a second in a lab
	// near its capacity, which cost the node CPU it did not have. They are counted instead (StrayResponses).
	stray := new(atomic.Uint64)
	ua, err := sipgo.NewUA(sipgo.WithUserAgent(host), sipgo.WithUserAgentHostname(host),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerUnhandledResponseHandler(func(r *sip.Response) {
			stray.Add(1)
			log.Debug("sipx: response matches no transaction", "status", r.StatusCode, "source", r.Source())
		})))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sipx: user agent: %w", err)
	}
	srv, err := sipgo.NewServer(ua, sipgo.WithServerLogger(log))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sipx: server: %w", err)
	}
	cli, err := sipgo.NewClient(ua, sipgo.WithClientAddr(addr.String()), sipgo.WithClientConnectionAddr(addr.String()),
		sipgo.WithClientLogger(log))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sipx: client: %w", err)
	}
	return &Endpoint{
		Host: host, Addr: addr.String(), UA: ua, Server: srv, Client: cli, conn: conn, log: log, listening: make(chan struct{}),
		stray: stray,
		laddr: sip.Addr{IP: addr.IP, Port: addr.Port, Hostname: addr.IP.String()}, viaHost: addr.IP.String(),
		addrHost: addr.IP.String(),
	}, nil
}

// Serve reads requests until ctx is done.
func (e *Endpoint) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- e.Server.ServeUDP(e.conn) }()
	e.waitListening(errc)
	close(e.listening)
	select {
	case <-ctx.Done():
		_ = e.UA.Close()
		_ = e.conn.Close()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		return fmt.Errorf("sipx: serve %s: %w", e.Addr, err)
	}
}

// waitListening returns once sipgo has registered the socket in its connection pool: a request sent before
// that would try to open a second socket on the same address.
func (e *Endpoint) waitListening(errc chan error) {
	for i := 0; i < 200; i++ {
		if c, err := e.UA.TransportLayer().GetConnection("udp", e.Addr); err == nil && c != nil {
			return
		}
		select {
		case err := <-errc:
			errc <- err
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Listening is closed once the endpoint can send and receive.
func (e *Endpoint) Listening() <-chan struct{} { return e.listening }

// Trace records every datagram the endpoint sends or receives (nil stops recording).
func (e *Endpoint) Trace(t *obs.Tracer) { e.conn.tracer.Store(t) }

// tracingConn records the datagrams of the endpoint's socket.
type tracingConn struct {
	net.PacketConn
	tracer atomic.Pointer[obs.Tracer]
}

func (c *tracingConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := c.PacketConn.ReadFrom(b)
	if err == nil {
		if t := c.tracer.Load(); t != nil {
			t.RecordAddr("sip", "in", addrPort(addr), addrPort(c.LocalAddr()), b[:n])
		}
	}
	return n, addr, err
}

func (c *tracingConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.PacketConn.WriteTo(b, addr)
	if err == nil {
		if t := c.tracer.Load(); t != nil {
			t.RecordAddr("sip", "out", addrPort(c.LocalAddr()), addrPort(addr), b[:n])
		}
	}
	return n, err
}

// addrPort is a UDP address as netip.AddrPort without formatting it (the zero value for another kind of address).
func addrPort(a net.Addr) netip.AddrPort {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// Bind makes an outgoing request leave from the endpoint's socket.
func (e *Endpoint) Bind(req *sip.Request) { e.laddr.Copy(&req.Laddr) }

// Port returns the listening port.
func (e *Endpoint) Port() int { return e.laddr.Port }

// Via builds this node's Via header with a new branch.
func (e *Endpoint) Via() *sip.ViaHeader {
	v := &sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: "UDP", Host: e.viaHost, Port: e.laddr.Port}
	v.Params.Add("branch", sip.GenerateBranchN(16))
	return v
}

// isOwnAddr reports HostPort(host, port) == e.Addr without formatting it (the loop check runs per request).
func (e *Endpoint) isOwnAddr(host string, port int) bool {
	if port == 0 {
		return host == e.Addr
	}
	return port == e.laddr.Port && host == e.addrHost
}

// HostPort formats host and port for logs and URIs.
func HostPort(host string, port int) string {
	if port == 0 {
		return host
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}
