package dnsd

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/imslab/quasipool/internal/topology"
)

type rrKey struct {
	name  string // canonical, with trailing dot
	qtype uint16
}

// zone is an immutable, compiled view of a topology.Zone: the server swaps whole zones, never edits one.
type zone struct {
	src    topology.Zone // what it was compiled from (edits start here)
	origin string        // canonical origin with trailing dot
	serial uint32
	soa    *dns.SOA
	rrs    map[rrKey][]dns.RR
	names  map[string]bool // every owner name and every empty non-terminal between it and the origin
	count  int             // records, without SOA and NS
}

// compile checks every record and builds the lookup maps.
func compile(z topology.Zone, serial uint32) (*zone, error) {
	if z.Origin == "" {
		return nil, fmt.Errorf("dnsd: zone: empty origin")
	}
	if z.TTL < 0 || z.TTL%time.Second != 0 {
		return nil, fmt.Errorf("dnsd: zone: ttl %s: must be a whole, non-negative number of seconds", z.TTL)
	}
	origin := dns.CanonicalName(z.Origin)
	if _, ok := dns.IsDomainName(origin); !ok {
		return nil, fmt.Errorf("dnsd: zone: origin %q is not a domain name", z.Origin)
	}
	ttl := uint32(z.TTL / time.Second)
	ns := dns.CanonicalName(z.NS)
	if z.NS == "" {
		ns = "ns." + origin
	}
	c := &zone{
		src: z, origin: origin, serial: serial,
		rrs: map[rrKey][]dns.RR{}, names: map[string]bool{origin: true},
	}
	// The SOA's minimum TTL bounds negative caching (RFC 2308): keep it at the zone's TTL so that a record added
	// during a run is seen as soon as positive answers would be.
	c.soa = &dns.SOA{Hdr: hdr(origin, dns.TypeSOA, ttl), Ns: ns, Mbox: "hostmaster." + origin, Serial: serial,
		Refresh: 60, Retry: 10, Expire: 3600, Minttl: ttl}
	c.add(c.soa)
	c.add(&dns.NS{Hdr: hdr(origin, dns.TypeNS, ttl), Ns: ns})
	for i, r := range z.Records {
		rr, err := toRR(r, ttl)
		if err != nil {
			return nil, fmt.Errorf("dnsd: zone: record %d (%s): %w", i, r, err)
		}
		if !dns.IsSubDomain(origin, rr.Header().Name) {
			return nil, fmt.Errorf("dnsd: zone: record %d (%s): name is outside %s", i, r, origin)
		}
		c.add(rr)
		c.count++
	}
	return c, nil
}

func hdr(name string, t uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}

// toRR converts one topology record to a miekg RR.
func toRR(r topology.Record, ttl uint32) (dns.RR, error) {
	name := dns.CanonicalName(r.Name)
	if _, ok := dns.IsDomainName(name); !ok || r.Name == "" {
		return nil, fmt.Errorf("name %q is not a domain name", r.Name)
	}
	switch r.Type {
	case topology.TypeA, topology.TypeAAAA:
		a, err := netip.ParseAddr(r.Address)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", r.Address, err)
		}
		if r.Type == topology.TypeA {
			if !a.Is4() {
				return nil, fmt.Errorf("address %s is not IPv4", a)
			}
			return &dns.A{Hdr: hdr(name, dns.TypeA, ttl), A: a.AsSlice()}, nil
		}
		if !a.Is6() || a.Is4In6() {
			return nil, fmt.Errorf("address %s is not IPv6", a)
		}
		return &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA, ttl), AAAA: a.AsSlice()}, nil
	case topology.TypeSRV:
		target := dns.CanonicalName(r.Target)
		if _, ok := dns.IsDomainName(target); !ok || r.Target == "" {
			return nil, fmt.Errorf("target %q is not a domain name", r.Target)
		}
		return &dns.SRV{Hdr: hdr(name, dns.TypeSRV, ttl), Priority: r.Priority, Weight: r.Weight, Port: r.Port,
			Target: target}, nil
	}
	return nil, fmt.Errorf("type %q: want A, AAAA or SRV", r.Type)
}

func (z *zone) add(rr dns.RR) {
	h := rr.Header()
	k := rrKey{h.Name, h.Rrtype}
	z.rrs[k] = append(z.rrs[k], rr)
	// The name and every ancestor up to the origin exist (empty non-terminals answer NODATA, not NXDOMAIN).
	for n := h.Name; n != z.origin && dns.IsSubDomain(z.origin, n); {
		z.names[n] = true
		i, end := dns.NextLabel(n, 0)
		if end {
			break
		}
		n = n[i:]
	}
}

// lookup returns the RRset of a name and type (any type for TypeANY).
func (z *zone) lookup(name string, qtype uint16) []dns.RR {
	if qtype != dns.TypeANY {
		return z.rrs[rrKey{name, qtype}]
	}
	var out []dns.RR
	for _, t := range []uint16{dns.TypeSOA, dns.TypeNS, dns.TypeSRV, dns.TypeA, dns.TypeAAAA} {
		out = append(out, z.rrs[rrKey{name, t}]...)
	}
	return out
}

// additional returns the A and AAAA records of the targets of SRV and NS records, once each.
func (z *zone) additional(answer []dns.RR) []dns.RR {
	var out []dns.RR
	seen := map[string]bool{}
	for _, rr := range answer {
		var target string
		switch v := rr.(type) {
		case *dns.SRV:
			target = v.Target
		case *dns.NS:
			target = v.Ns
		default:
			continue
		}
		if seen[target] {
			continue
		}
		seen[target] = true
		out = append(out, z.rrs[rrKey{target, dns.TypeA}]...)
		out = append(out, z.rrs[rrKey{target, dns.TypeAAAA}]...)
	}
	return out
}

// matches reports whether r matches the pattern p: same name (case-insensitive) and type, and every non-zero
// field of p equal.
func matches(p, r topology.Record) bool {
	if !strings.EqualFold(strings.TrimSuffix(p.Name, "."), strings.TrimSuffix(r.Name, ".")) || p.Type != r.Type {
		return false
	}
	if p.Target != "" && !strings.EqualFold(strings.TrimSuffix(p.Target, "."), strings.TrimSuffix(r.Target, ".")) {
		return false
	}
	if p.Address != "" {
		pa, err1 := netip.ParseAddr(p.Address)
		ra, err2 := netip.ParseAddr(r.Address)
		if err1 != nil || err2 != nil || pa != ra {
			return false
		}
	}
	return (p.Port == 0 || p.Port == r.Port) && (p.Priority == 0 || p.Priority == r.Priority) &&
		(p.Weight == 0 || p.Weight == r.Weight)
}

// withRecords returns a copy of z's source with records replaced.
func withRecords(z topology.Zone, records []topology.Record) topology.Zone {
	z.Records = slices.Clone(records)
	return z
}
