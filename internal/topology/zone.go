package topology

import (
	"fmt"
	"net/netip"
	"slices"
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
//   - the n-plus-1 and active-standby schemes change the priorities (poolRecords, docs/schemes.md);
//   - _sip._udp.<icscf>.<domain> and _sip._udp.<domain> → the I-CSCF; _sip._udp.<bac>.<domain> → the BAC;
//   - _diameter._tcp.<hss>.<domain> → the HSS's Diameter port;
//   - an A (or AAAA) record for every node.
//
// It expects a valid topology.
func (t *Topology) Zone() Zone {
	z := Zone{Origin: t.Domain, NS: t.FQDN(t.DNS.Host), TTL: t.DNS.TTL}
	for _, k := range []Kind{KindPCSCF, KindSCSCF} {
		p, _ := t.pool(k)
		z.Records = append(z.Records, t.poolRecords(k, uint16(p.Weight))...)
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

// poolRecords returns the pool record and the per-host records of one pool, by its scheme:
//   - quasi-pool, load-sharing, pool-sync: the shape of SPEC §2.1 (pool record all at 1; per-host: self 1, others 2);
//   - n-plus-1: the spare (last member) is at priority 2 in the pool record, so it gets new users only when every
//     active member is down; an active member's per-host record is self 1, spare 2, other actives 3, so the
//     spare (and only the spare, while it lives) takes over a failed member's users; the spare's own per-host
//     record is spare 1, actives 2;
//   - active-standby: the pool record holds the active members only; member K's per-host record is K 1, its
//     standby Kb 2, and Kb's is Kb 1, K 2: the standby takes over its member's DNS entry;
//   - mutual: the pool record holds every member at 1; member K's per-host record is K 1, its partner 2 and
//     nobody else, so only the partner (which has the replicated state) takes over K's users.
func (t *Topology) poolRecords(k Kind, w uint16) []Record {
	p, _ := t.pool(k)
	var recs []Record
	var actives, spares, standbys []Node
	for _, n := range t.NodesOfKind(k) {
		switch {
		case n.Standby:
			standbys = append(standbys, n)
		case n.Spare:
			spares = append(spares, n)
		default:
			actives = append(actives, n)
		}
	}
	poolName := SIPSRV(t.FQDN(string(k)))
	for _, m := range actives {
		recs = append(recs, srv(poolName, 1, w, m))
	}
	for _, m := range spares {
		recs = append(recs, srv(poolName, 2, w, m))
	}
	members := append(slices.Clone(actives), spares...)
	for _, self := range members {
		name := SIPSRV(self.FQDN)
		recs = append(recs, srv(name, 1, w, self))
		switch {
		case self.Spare:
			for _, o := range actives {
				recs = append(recs, srv(name, 2, w, o))
			}
		case len(spares) > 0:
			for _, o := range spares {
				recs = append(recs, srv(name, 2, w, o))
			}
			for _, o := range actives {
				if o.Name != self.Name {
					recs = append(recs, srv(name, 3, w, o))
				}
			}
		case len(standbys) > 0:
			for _, o := range standbys {
				if o.Index == self.Index {
					recs = append(recs, srv(name, 2, w, o))
				}
			}
		case p.SchemeOf() == SchemeMutual:
			for _, o := range actives {
				if o.Index == MutualPartner(self.Index) {
					recs = append(recs, srv(name, 2, w, o))
				}
			}
		default:
			for _, o := range members {
				if o.Name != self.Name {
					recs = append(recs, srv(name, 2, w, o))
				}
			}
		}
	}
	for _, sb := range standbys {
		name := SIPSRV(sb.FQDN)
		recs = append(recs, srv(name, 1, w, sb))
		for _, o := range actives {
			if o.Index == sb.Index {
				recs = append(recs, srv(name, 2, w, o))
			}
		}
	}
	return recs
}

// ReplicationPeers returns the replication addresses (TCP, the SIP port number) a pool member pushes its
// registration state to: every other member under pool-sync, its partner under active-standby (member K and
// its standby Kb) and under mutual (member K and MutualPartner(K)), nil otherwise or for a node outside the pools.
func (t *Topology) ReplicationPeers(name string) []string {
	var out []string
	for _, o := range t.ReplicationPeerNodes(name) {
		out = append(out, o.Listen())
	}
	return out
}

// ReplicationPeerNodes returns the nodes behind ReplicationPeers, in the same order: a member accepts
// replication only from them (their address, and their name in every message).
func (t *Topology) ReplicationPeerNodes(name string) []Node {
	n, ok := t.Node(name)
	if !ok || n.Pool == "" {
		return nil
	}
	p, _ := t.pool(n.Kind)
	var out []Node
	for _, o := range t.NodesOfKind(n.Kind) {
		if o.Name == n.Name {
			continue
		}
		switch p.SchemeOf() {
		case SchemePoolSync:
			out = append(out, o)
		case SchemeActiveStandby:
			if o.Index == n.Index {
				out = append(out, o)
			}
		case SchemeMutual:
			if o.Index == MutualPartner(n.Index) {
				out = append(out, o)
			}
		}
	}
	return out
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
