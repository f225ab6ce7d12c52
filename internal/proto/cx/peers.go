package cx

import (
	"fmt"
	"net"
	"sync"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// Peer is a Cx client the server accepts. A peer without ServerName (the I-CSCF) may send UAR and LIR; a peer
// with one (an S-CSCF) may send MAR and SAR, and only with its own Server-Name.
type Peer struct {
	OriginHost string `yaml:"origin_host"`
	Address    string `yaml:"address"`               // IP literal its connections come from
	ServerName string `yaml:"server_name,omitempty"` // S-CSCFs only
}

// Refusal reasons (Refusal.Reason).
const (
	RefusedUnknownPeer        = "unknown_peer"         // CER Origin-Host not configured
	RefusedWrongAddress       = "wrong_address"        // CER Origin-Host configured for another address
	RefusedNoCER              = "no_cer"               // a message before the CER
	RefusedCERTimeout         = "cer_timeout"          // no CER in time
	RefusedWatchdog           = "watchdog"             // DWRs unanswered: the connection was closed (watchdog.go)
	RefusedConnectionCap      = "connection_cap"       // too many connections
	RefusedOriginHostMismatch = "origin_host_mismatch" // request Origin-Host differs from the CER's
	RefusedCommandNotAllowed  = "command_not_allowed"  // e.g. MAR from the I-CSCF
	RefusedServerName         = "server_name_mismatch" // MAR/SAR naming another S-CSCF
)

// Refusal is a connection or request the server refused because of who sent it.
type Refusal struct {
	Peer    string // Origin-Host claimed (CER or request), if any
	Remote  string // transport address
	Reason  string // Refused…
	Command string // "CER", "MAR", … when a message was refused
	Result  Result // the result answered, zero when the connection was just closed
	Detail  string
}

func validatePeers(peers []Peer) error {
	seen := map[string]bool{}
	for i, p := range peers {
		if p.OriginHost == "" {
			return fmt.Errorf("cx server: peers[%d].origin_host: must be set", i)
		}
		if seen[p.OriginHost] {
			return fmt.Errorf("cx server: peers[%d].origin_host: %s listed twice", i, p.OriginHost)
		}
		seen[p.OriginHost] = true
		if net.ParseIP(p.Address) == nil {
			return fmt.Errorf("cx server: peers[%d].address: %q is not an IP literal", i, p.Address)
		}
	}
	return nil
}

// connPeer is what a connection's CER established: the Origin-Host and, when configured, the peer's rights.
type connPeer struct {
	mu   sync.Mutex
	host string
	peer *Peer // nil: not handshaken, or an unlisted host admitted by AllowAnyPeer
	done bool  // a CER was accepted
}

func (c *connPeer) get() (host string, peer *Peer, done bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.host, c.peer, c.done
}

func (c *connPeer) set(host string, p *Peer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.host, c.peer, c.done = host, p, true
}

func remoteIP(a net.Addr) net.IP {
	switch v := a.(type) {
	case *net.TCPAddr:
		return v.IP
	case nil:
		return nil
	}
	h, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return nil
	}
	return net.ParseIP(h)
}

// admitCER decides whether a CER from remote may open a Cx association. It returns the configured peer (nil for
// an unlisted host under AllowAnyPeer) or a refusal.
func (s *Server) admitCER(host string, remote net.Addr) (*Peer, *Refusal) {
	p, ok := s.peers[host]
	if !ok {
		if s.cfg.AllowAnyPeer {
			return nil, nil
		}
		return nil, &Refusal{Peer: host, Remote: remote.String(), Reason: RefusedUnknownPeer, Command: "CER",
			Result: UnknownPeer, Detail: fmt.Sprintf("Origin-Host %q is not a configured peer", host)}
	}
	if ip := remoteIP(remote); ip == nil || !ip.Equal(net.ParseIP(p.Address)) {
		return nil, &Refusal{Peer: host, Remote: remote.String(), Reason: RefusedWrongAddress, Command: "CER",
			Result: UnknownPeer, Detail: fmt.Sprintf("%s connects from %s, not from its configured address %s", host, remote, p.Address)}
	}
	return p, nil
}

// authorize checks a request (not a CER) against the connection's CER: the same Origin-Host, and a command the
// peer may send. It returns nil when the request may proceed.
func (s *Server) authorize(cp *connPeer, m *diam.Message, remote string) *Refusal {
	host, peer, _ := cp.get()
	code := m.Header.CommandCode
	cmd := commandLabel(m.Header.ApplicationID, code)
	if m.Header.ApplicationID == 0 {
		cmd = fmt.Sprintf("base-%d", code)
	}
	got := originHost(m)
	if got != host {
		return &Refusal{Peer: got, Remote: remote, Reason: RefusedOriginHostMismatch, Command: cmd, Result: UnknownPeer,
			Detail: fmt.Sprintf("Origin-Host %q differs from the connection's CER Origin-Host %q", got, host)}
	}
	if peer == nil || m.Header.ApplicationID != AppID {
		return nil
	}
	allowed := false
	switch code {
	case CmdUA, CmdLI:
		allowed = peer.ServerName == ""
	case CmdMA, CmdSA:
		allowed = peer.ServerName != ""
	}
	if !allowed {
		return &Refusal{Peer: host, Remote: remote, Reason: RefusedCommandNotAllowed, Command: cmd,
			Result: AuthorizationRejected, Detail: fmt.Sprintf("%s may not send %s", host, cmd)}
	}
	return nil
}

// checkServerName refuses a MAR or SAR whose Server-Name is not the S-CSCF's own.
func (s *Server) checkServerName(peer *Peer, cmd, name, remote string) *Refusal {
	if peer == nil || name == peer.ServerName {
		return nil
	}
	return &Refusal{Peer: peer.OriginHost, Remote: remote, Reason: RefusedServerName, Command: cmd,
		Result: AuthorizationRejected, Detail: fmt.Sprintf("%s may only name %s, not %q", peer.OriginHost, peer.ServerName, name)}
}

func (s *Server) refuse(r Refusal) {
	s.log.Warn("cx: refused", "peer", r.Peer, "remote", r.Remote, "reason", r.Reason, "cmd", r.Command,
		"result_code", r.Result.Code, "err", r.Detail)
	if s.onRefusal != nil {
		s.onRefusal(r)
	}
}

// refusalCEA is the CEA of a refused CER (RFC 6733 §5.3.2): Result-Code DIAMETER_UNKNOWN_PEER with the E bit,
// and the AVPs every CEA carries (Origin-Host, Origin-Realm, Host-IP-Address, Vendor-Id, Product-Name).
func (s *Server) refusalCEA(hdr *diam.Header, r *Refusal, local net.Addr) ([]byte, error) {
	ans := diam.NewMessage(diam.CapabilitiesExchange, diam.ErrorFlag, 0, hdr.HopByHopID, hdr.EndToEndID, Dict())
	ans.AddAVP(m0(avpResultCode, datatype.Unsigned32(r.Result.Code)))
	ans.AddAVP(m0(avpOriginHost, datatype.DiameterIdentity(s.cfg.OriginHost)))
	ans.AddAVP(m0(avpOriginRealm, datatype.DiameterIdentity(s.cfg.OriginRealm)))
	ip := net.IPv4(127, 0, 0, 1)
	if a, ok := local.(*net.TCPAddr); ok && a.IP != nil {
		ip = a.IP
	}
	ans.AddAVP(m0(avp.HostIPAddress, datatype.Address(ip)))
	ans.AddAVP(m0(avpVendorID, datatype.Unsigned32(Vendor3GPP)))
	ans.AddAVP(diam.NewAVP(avp.ProductName, 0, 0, datatype.UTF8String(s.cfg.ProductName)))
	ans.AddAVP(diam.NewAVP(avpErrorMessage, 0, 0, datatype.UTF8String(truncate(r.Detail, 200))))
	return ans.Serialize()
}
