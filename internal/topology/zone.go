package topology

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// RecordType is the type of a zone record.
type RecordType string

// The record types a topology produces.
const (
	TypeA    RecordType = "A"
	TypeAAAA RecordType = "AAAA"
	TypeSRV  RecordType = "SRV"
)

// Record is one DNS record of the lab's zone. Names are absolute but written without the trailing dot.
type Record struct {
	Name string     `yaml:"name"`
	Type RecordType `yaml:"type"`
	// SRV fields.
	Target   string `yaml:"target,omitempty"`
	Port     uint16 `yaml:"port,omitempty"`
	Priority uint16 `yaml:"priority,omitempty"`
	Weight   uint16 `yaml:"weight,omitempty"`
	// A and AAAA field: an IP literal.
	Address string `yaml:"address,omitempty"`
}

// String formats the record like a zone-file line (without TTL and class).
func (r Record) String() string {
	switch r.Type {
	case TypeSRV:
		return fmt.Sprintf("%s. SRV %d %d %d %s.", r.Name, r.Priority, r.Weight, r.Port, r.Target)
	default:
		return fmt.Sprintf("%s. %s %s", r.Name, r.Type, r.Address)
	}
}

// Zone is the lab's DNS zone: what dnsd serves. Records with the same name and type form one RRset, in order.
type Zone struct {
	Origin  string        // the domain (ims.test)
	NS      string        // the name server's host name (dnsd.ims.test), used in the SOA and NS records
	TTL     time.Duration // TTL of every record
	Records []Record
}

// SIP and Diameter SRV owner names.
const (
	SIPUDPPrefix      = "_sip._udp."
	DiameterTCPPrefix = "_diameter._tcp."
)

// SIPSRV returns the SRV name a SIP client resolves for host (RFC 3263): _sip._udp.<host>.
func SIPSRV(host string) string { return SIPUDPPrefix + host }

// DiameterSRV returns the SRV name of a Diameter/TCP server: _diameter._tcp.<host>.
func DiameterSRV(host string) string { return DiameterTCPPrefix + host }

// singleWeight is the SRV weight of a record with a single target (I-CSCF, BAC, HSS).
const singleWeight = 10

// Zone returns the DNS records of the topology (SPEC §2.1):
//   - pool records _sip._udp.<pool>.<domain>: every member, priority 1, the pool's weight;
//   - per-host records _sip._udp.<pool>K.<domain>: member K at priority 1, every other member at priority 2,
//     the pool's weight for all;
//   - _sip._udp.<icscf>.<domain> and _sip._udp.<domain> → the I-CSCF; _sip._udp.<bac>.<domain> → the BAC;
//   - _diameter._tcp.<hss>.<domain> → the HSS's Diameter port;
//   - an A (or AAAA) record for every node.
//
// It expects a valid topology.
func (t *Topology) Zone() Zone {
	z := Zone{Origin: t.Domain, NS: t.FQDN(t.DNS.Host), TTL: t.DNS.TTL}
	for _, k := range []Kind{KindPCSCF, KindSCSCF} {
		p, _ := t.pool(k)
		members := t.NodesOfKind(k)
		w := uint16(p.Weight)
		for _, m := range members {
			z.Records = append(z.Records, srv(SIPSRV(t.FQDN(string(k))), 1, w, m))
		}
		for _, self := range members {
			name := SIPSRV(self.FQDN)
			z.Records = append(z.Records, srv(name, 1, w, self))
			for _, o := range members {
				if o.Name != self.Name {
					z.Records = append(z.Records, srv(name, 2, w, o))
				}
			}
		}
	}
	icscf, _ := t.Node(t.ICSCF.Host)
	bac, _ := t.Node(t.BAC.Host)
	hss, _ := t.Node(t.HSS.Host)
	z.Records = append(z.Records,
		srv(SIPSRV(icscf.FQDN), 1, singleWeight, icscf),
		srv(SIPSRV(t.Domain), 1, singleWeight, icscf),
		srv(SIPSRV(bac.FQDN), 1, singleWeight, bac),
		Record{Name: DiameterSRV(hss.FQDN), Type: TypeSRV, Target: hss.FQDN, Port: uint16(t.HSS.DiameterPort),
			Priority: 1, Weight: singleWeight},
	)
	for _, n := range t.Nodes() {
		typ := TypeA
		if a, err := netip.ParseAddr(n.Address); err == nil && !a.Is4() && !a.Is4In6() {
			typ = TypeAAAA
		}
		z.Records = append(z.Records, Record{Name: n.FQDN, Type: typ, Address: n.Address})
	}
	return z
}

func srv(name string, prio, weight uint16, target Node) Record {
	return Record{Name: name, Type: TypeSRV, Target: target.FQDN, Port: uint16(target.Ports[0].Port),
		Priority: prio, Weight: weight}
}

// Lookup returns the records with that name (case-insensitive, trailing dot optional) and type, in zone order.
func (z Zone) Lookup(name string, typ RecordType) []Record {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	var out []Record
	for _, r := range z.Records {
		if r.Type == typ && strings.EqualFold(r.Name, name) {
			out = append(out, r)
		}
	}
	return out
}
