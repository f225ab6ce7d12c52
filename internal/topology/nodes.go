package topology

import (
	"fmt"
	"net"
	"strconv"
)

// Port names used in Node.Ports.
const (
	PortDNS      = "dns"      // dnsd, UDP and TCP
	PortDiameter = "diameter" // hss, TCP
	PortHTTP     = "http"     // hss provisioning API and metrics, TCP
	PortSIP      = "sip"      // SIP nodes, UDP
)

// Port is one listening port of a node.
type Port struct {
	Name  string // PortDNS, PortDiameter, PortHTTP or PortSIP
	Proto string // "udp", "tcp" or "udp+tcp"
	Port  int
}

// Node is one process of the topology.
type Node struct {
	Name    string // node name and host label: dnsd, hss, bac, pcscf1, …
	Kind    Kind
	FQDN    string // pcscf1.ims.test
	Address string // IP literal
	Ports   []Port // the first one is the node's main port (see Listen)
	Pool    string // "pcscf" or "scscf" for pool members, else ""
	Index   int    // 1-based position in the pool, 0 outside pools
	// Standby marks the standby of member Index in an active-standby pool (pcscf1b); it is not in the pool record.
	Standby bool
	// Spare marks the cold spare of an n-plus-1 pool (its last member).
	Spare bool
	// Vendor is "" for the lab's own network functions and VendorKamailio for a Kamailio S-CSCF member
	// (pools.scscf.kamailio): the lab runs Kamailio for it instead of cmd/scscf.
	Vendor string
}

// VendorKamailio marks a node run by Kamailio's IMS modules (Node.Vendor).
const VendorKamailio = "kamailio"

// Endpoint returns address:port of the named port, or "" when the node has no such port.
func (n Node) Endpoint(port string) string {
	for _, p := range n.Ports {
		if p.Name == port {
			return net.JoinHostPort(n.Address, strconv.Itoa(p.Port))
		}
	}
	return ""
}

// Listen returns address:port of the node's main port: DNS for dnsd, Diameter for the HSS, SIP for the others.
func (n Node) Listen() string {
	if len(n.Ports) == 0 {
		return ""
	}
	return net.JoinHostPort(n.Address, strconv.Itoa(n.Ports[0].Port))
}

// Nodes returns every node in a fixed order: dnsd, hss, bac, pcscf1…N, icscf, scscf1…N. It expects a valid
// topology.
func (t *Topology) Nodes() []Node {
	dnsHost, dnsPort, _ := net.SplitHostPort(t.DNS.Listen)
	dp, _ := strconv.Atoi(dnsPort)
	nodes := []Node{
		{Name: t.DNS.Host, Kind: KindDNS, Address: dnsHost,
			Ports: []Port{{Name: PortDNS, Proto: "udp+tcp", Port: dp}}},
		{Name: t.HSS.Host, Kind: KindHSS, Address: t.HSS.Address,
			Ports: []Port{{Name: PortDiameter, Proto: "tcp", Port: t.HSS.DiameterPort}, {Name: PortHTTP, Proto: "tcp", Port: t.HSS.HTTPPort}}},
		sipNode(t.BAC.Host, KindBAC, t.BAC.Address, t.BAC.Port),
	}
	nodes = append(nodes, t.poolNodes(KindPCSCF)...)
	nodes = append(nodes, sipNode(t.ICSCF.Host, KindICSCF, t.ICSCF.Address, t.ICSCF.Port))
	nodes = append(nodes, t.poolNodes(KindSCSCF)...)
	for i := range nodes {
		nodes[i].FQDN = t.FQDN(nodes[i].Name)
	}
	return nodes
}

// Node returns the named node.
func (t *Topology) Node(name string) (Node, bool) {
	for _, n := range t.Nodes() {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// NodesOfKind returns the nodes of one kind, in order.
func (t *Topology) NodesOfKind(k Kind) []Node {
	var out []Node
	for _, n := range t.Nodes() {
		if n.Kind == k {
			out = append(out, n)
		}
	}
	return out
}

func sipNode(name string, k Kind, addr string, port int) Node {
	return Node{Name: name, Kind: k, Address: addr, Ports: []Port{{Name: PortSIP, Proto: "udp", Port: port}}}
}

// MemberName returns the name of member k (1-based) of a pool: pcscf1, scscf3, …
func MemberName(pool Kind, k int) string { return fmt.Sprintf("%s%d", pool, k) }

func (t *Topology) poolNodes(k Kind) []Node {
	p, _ := t.pool(k)
	out := make([]Node, 0, p.Size)
	for i := 1; i <= p.Size; i++ {
		addr, port := p.member(i)
		n := sipNode(MemberName(k, i), k, addr, port)
		n.Pool, n.Index = string(k), i
		n.Spare = p.SchemeOf() == SchemeNPlus1 && i == p.Size && p.Size > 1
		if p.IsKamailio(i) {
			n.Vendor = VendorKamailio
		}
		out = append(out, n)
	}
	if p.SchemeOf() == SchemeActiveStandby {
		for i := 1; i <= p.Size; i++ {
			addr, port := p.standby(i)
			n := sipNode(StandbyName(k, i), k, addr, port)
			n.Pool, n.Index, n.Standby = string(k), i, true
			out = append(out, n)
		}
	}
	return out
}

// StandbyName returns the name of the standby of member k (1-based) of an active-standby pool: pcscf1b, …
func StandbyName(pool Kind, k int) string { return MemberName(pool, k) + "b" }

// standby returns the address and port of the standby of member i (1-based) of an active-standby pool: with
// base_port the standbys follow the members (base_port+size+i-1) on the pool's address, with port each standby
// has its own address from standby_addresses.
func (p *Pool) standby(i int) (string, int) {
	if p.BasePort != 0 {
		addr, _ := p.member(i)
		return addr, p.BasePort + p.Size + i - 1
	}
	addr := p.Address
	if len(p.StandbyAddresses) >= i {
		addr = p.StandbyAddresses[i-1]
	}
	return addr, p.Port
}

// member returns the address and port of member i (1-based).
func (p *Pool) member(i int) (string, int) {
	addr := p.Address
	if len(p.Addresses) >= i {
		addr = p.Addresses[i-1]
	}
	port := p.Port
	if p.BasePort != 0 {
		port = p.BasePort + i - 1
	}
	return addr, port
}
