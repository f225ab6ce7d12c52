package dnsd

import (
	"net"
	"slices"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/miekg/dns"
)

// maxUDPSize caps the EDNS0 buffer size a client may announce.
const maxUDPSize = 4096

// ServeDNS answers one query from the current zone. It never panics: a panic is logged and the query dropped.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	defer func() {
		if p := recover(); p != nil {
			s.stats.panics.Add(1)
			s.log.Error("dns handler panic", "panic", p)
		}
	}()
	udp := false
	if a := w.LocalAddr(); a != nil {
		_, udp = a.(*net.UDPAddr)
	}
	m := s.zone.Load().answer(r, udp)
	s.count(m)
	if s.cfg.QueryEvents {
		ev := obs.DNSQuery{Rcode: dns.RcodeToString[m.Rcode]}
		if len(r.Question) == 1 {
			ev.Name, ev.QType = r.Question[0].Name, dns.TypeToString[r.Question[0].Qtype]
		}
		if a := w.RemoteAddr(); a != nil {
			ev.Peer = a.String()
		}
		s.events.Emit(ev)
	}
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("dns write", "err", err)
	}
}

func (s *Server) count(m *dns.Msg) {
	s.stats.queries.Add(1)
	switch m.Rcode {
	case dns.RcodeSuccess:
		s.stats.noerror.Add(1)
	case dns.RcodeNameError:
		s.stats.nxdomain.Add(1)
	case dns.RcodeRefused:
		s.stats.refused.Add(1)
	default:
		s.stats.other.Add(1)
	}
}

// answer builds the response to r. udp selects truncation to the client's UDP size.
func (z *zone) answer(r *dns.Msg, udp bool) *dns.Msg {
	m := new(dns.Msg)
	if len(r.Question) != 1 {
		m.SetRcodeFormatError(r)
		m.Question = nil
		return m
	}
	m.SetReply(r)
	m.Compress = true
	opt := r.IsEdns0()
	size := dns.MinMsgSize
	if opt != nil {
		size = max(int(opt.UDPSize()), dns.MinMsgSize)
		size = min(size, maxUDPSize)
		m.SetEdns0(uint16(size), false)
		if opt.Version() != 0 {
			m.Rcode = dns.RcodeBadVers
			return m
		}
	}
	q := r.Question[0]
	switch {
	case r.Opcode != dns.OpcodeQuery:
		m.Rcode = dns.RcodeNotImplemented
		return m
	case q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY:
		m.Rcode = dns.RcodeRefused
		return m
	}
	name := dns.CanonicalName(q.Name)
	if !dns.IsSubDomain(z.origin, name) {
		m.Rcode = dns.RcodeRefused
		return m
	}
	m.Authoritative = true
	switch q.Qtype {
	case dns.TypeAXFR, dns.TypeIXFR:
		m.Rcode = dns.RcodeRefused
		return m
	}
	if !z.names[name] {
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{z.soa}
		return m
	}
	m.Answer = slices.Clip(z.lookup(name, q.Qtype)) // shared with the zone: never appended to in place
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{z.soa} // NODATA
		return m
	}
	m.Extra = append(z.additional(m.Answer), m.Extra...)
	if udp {
		m.Truncate(size)
	}
	return m
}
