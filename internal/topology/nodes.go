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
}

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
		out = append(out, n)
	}
	return out
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
