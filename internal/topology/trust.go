package topology

import (
	"fmt"
	"net"
	"slices"

	"github.com/imslab/quasipool/internal/proto/sipx/restore"
)

// Trust is what a node believes and from whom (docs/security.md). It is generated from the topology into every
// node configuration, so a node never learns whom to trust from a DNS answer.
//
// SIP addresses are the source address:port a peer's requests arrive from: every SIP node sends from the socket
// it listens on. Pool member host names are the Route and Record-Route hosts a pool member accepts as its own (a
// peer's per-host SRV record fails over to it).
type Trust struct {
	BAC   []string `yaml:"bac,omitempty"`   // the access node: its P-Preferred-Identity is believed by P-CSCFs
	PCSCF []string `yaml:"pcscf,omitempty"` // P-CSCF pool members (standbys included)
	ICSCF []string `yaml:"icscf,omitempty"`
	SCSCF []string `yaml:"scscf,omitempty"` // S-CSCF pool members (standbys included)

	PCSCFHosts []string `yaml:"pcscf_hosts,omitempty"` // pcscf1.ims.test, … (standbys included)
	SCSCFHosts []string `yaml:"scscf_hosts,omitempty"`
	ICSCFHost  string   `yaml:"icscf_host,omitempty"`
	BACHost    string   `yaml:"bac_host,omitempty"`

	// DiameterPeers are the Cx clients the HSS accepts (set for the HSS only).
	DiameterPeers []DiameterPeer `yaml:"diameter_peers,omitempty"`
}

// DiameterPeer is one Cx client the HSS accepts: its Origin-Host in the CER and every request, the IP address
// its connection comes from, and for an S-CSCF the only Server-Name it may assign to a user (its own).
type DiameterPeer struct {
	OriginHost string `yaml:"origin_host"`
	Address    string `yaml:"address"`               // IP literal (the source port of a Diameter client is ephemeral)
	ServerName string `yaml:"server_name,omitempty"` // sip:scscf1.ims.test (S-CSCFs only)
}

// TrustDomain returns every SIP address of the trust domain: P-CSCFs, I-CSCF and S-CSCFs.
func (t *Trust) TrustDomain() []string {
	if t == nil {
		return nil
	}
	out := slices.Clone(t.PCSCF)
	out = append(out, t.ICSCF...)
	return append(out, t.SCSCF...)
}

// sipTrust is the trust section of the BAC and the CSCFs.
func (t *Topology) sipTrust() *Trust {
	tr := &Trust{}
	for _, n := range t.Nodes() {
		switch n.Kind {
		case KindBAC:
			tr.BAC = append(tr.BAC, n.Listen())
			tr.BACHost = n.FQDN
		case KindPCSCF:
			tr.PCSCF = append(tr.PCSCF, n.Listen())
			tr.PCSCFHosts = append(tr.PCSCFHosts, n.FQDN)
		case KindICSCF:
			tr.ICSCF = append(tr.ICSCF, n.Listen())
			tr.ICSCFHost = n.FQDN
		case KindSCSCF:
			tr.SCSCF = append(tr.SCSCF, n.Listen())
			tr.SCSCFHosts = append(tr.SCSCFHosts, n.FQDN)
		}
	}
	return tr
}

// DiameterPeers returns the Cx clients of the HSS: the I-CSCF and every S-CSCF (standbys included), each with
// the address it connects from (its own address in the topology, or its address on the Cx network when the
// topology has one, see CxAddress).
func (t *Topology) DiameterPeers() []DiameterPeer {
	var out []DiameterPeer
	for _, n := range t.Nodes() {
		switch n.Kind {
		case KindICSCF:
			out = append(out, DiameterPeer{OriginHost: n.FQDN, Address: t.CxAddress(n)})
		case KindSCSCF:
			out = append(out, DiameterPeer{OriginHost: n.FQDN, Address: t.CxAddress(n), ServerName: "sip:" + n.FQDN})
		}
	}
	return out
}

// CxAddress is a node's address on the Cx network, where its Diameter connections to the HSS come from: in a
// container lab (Networks set) the same host number as its core address (the HSS's own address is already its
// Cx address), otherwise the node's address.
func (t *Topology) CxAddress(n Node) string {
	if t.Networks == nil || n.Kind == KindHSS {
		return n.Address
	}
	return onNetwork(n.Address, t.Networks.Core, t.Networks.Cx)
}

func (v *validator) trust(field string, tr *Trust) {
	if tr == nil {
		return
	}
	for role, list := range map[string][]string{"bac": tr.BAC, "pcscf": tr.PCSCF, "icscf": tr.ICSCF, "scscf": tr.SCSCF} {
		for i, a := range list {
			v.hostPort(fmt.Sprintf("%s.%s[%d]", field, role, i), a)
		}
	}
	for i, p := range tr.DiameterPeers {
		if p.OriginHost == "" {
			v.add(fmt.Sprintf("%s.diameter_peers[%d].origin_host", field, i), "must be set")
		}
		if net.ParseIP(p.Address) == nil {
			v.add(fmt.Sprintf("%s.diameter_peers[%d].address", field, i), "%q: must be an IP literal", p.Address)
		}
	}
}

// Policy is what a network function does under the protection schemes of the two pools (docs/schemes.md): the
// takeover policy of internal/proto/sipx/restore, where its decisions are. It is resolved here, once, so that no
// command decides scheme behaviour.
type Policy = restore.Policy

// Policy returns the node's policy under the schemes of its configuration.
func (c *NodeConfig) Policy() Policy {
	var p Policy
	switch c.Kind {
	case KindPCSCF:
		p.Restore = SchemeRestores(c.PCSCFScheme)
		p.SCSCFFailover = SchemeReplicates(c.SCSCFScheme)
	case KindICSCF:
		p.Restore = SchemeRestores(c.SCSCFScheme)
		p.AcceptRestore = p.Restore || SchemeRestores(c.PCSCFScheme)
		p.SCSCFFailover = SchemeReplicates(c.SCSCFScheme)
	case KindSCSCF:
		p.Restore = SchemeRestores(c.SCSCFScheme)
	}
	return p
}
