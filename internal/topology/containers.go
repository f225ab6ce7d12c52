package topology

import (
	"fmt"
	"net/netip"
)

// Ports every node listens on when each node has its own address (containers): the standard ones.
const (
	ContainerDNSPort      = 53
	ContainerSIPPort      = 5060
	ContainerDiameterPort = 3868
	ContainerHTTPPort     = 8090
)

// Host numbers of the container address plan (the last octets in a /24): .1 is the network's gateway (the
// host), the lab's own nodes get fixed numbers so that a node keeps its address when a pool grows.
const (
	hostDNS     = 2
	hostHSS     = 3
	hostBAC     = 4
	hostICSCF   = 5
	hostPCSCF   = 10 // + member index: pcscf1 .11 … pcscf8 .18
	hostSCSCF   = 20 // + member index: scscf1 .21 … scscf8 .28
	hostPCSCFb  = 30 // + member index: the standbys of an active-standby pool, pcscf1b .31 …
	hostSCSCFb  = 40 // + member index: scscf1b .41 …
	hostTraffic = 100
)

// Networks are the three networks of a container lab, as in a real IMS: the access network (phones and the
// BAC's access side), the core network (the BAC's core side, the CSCFs and dnsd) and the Cx/management network
// (the I-CSCF, the S-CSCFs and the HSS, with the HSS's provisioning API and metrics). A node keeps its host number
// on every network it joins: the BAC is .4 on access and core, scscf1 .21 on core and Cx.
type Networks struct {
	Access netip.Prefix `yaml:"access"`
	Core   netip.Prefix `yaml:"core"`
	Cx     netip.Prefix `yaml:"cx"`
}

// NetworksAround returns the networks of a container lab whose core network is core: the access network is the
// block of the same size just below it, the Cx network the block just above (core 172.28.89.0/24: access
// 172.28.88.0/24, Cx 172.28.90.0/24).
func NetworksAround(core netip.Prefix) (Networks, error) {
	core = core.Masked()
	if !core.Addr().Is4() || core.Bits() > 24 || core.Bits() < 8 {
		return Networks{}, fmt.Errorf("topology: container subnet %s: want an IPv4 /24 or larger", core)
	}
	size := uint32(1) << (32 - core.Bits())
	base := addrUint(core.Addr())
	if base < size || base+size < base || base+2*size < base {
		return Networks{}, fmt.Errorf("topology: container subnet %s: no room for the access and Cx networks around it", core)
	}
	return Networks{Access: netip.PrefixFrom(uintAddr(base-size), core.Bits()), Core: core,
		Cx: netip.PrefixFrom(uintAddr(base+size), core.Bits())}, nil
}

// Validate checks that the three networks are IPv4 /24 or larger and do not overlap.
func (n Networks) Validate() error {
	list := []struct {
		name string
		p    netip.Prefix
	}{{"access", n.Access}, {"core", n.Core}, {"cx", n.Cx}}
	for i, a := range list {
		if !a.p.IsValid() || !a.p.Addr().Is4() || a.p.Bits() > 24 || a.p.Masked() != a.p {
			return fmt.Errorf("topology: networks.%s %s: want an IPv4 network, /24 or larger", a.name, a.p)
		}
		for _, b := range list[:i] {
			if a.p.Overlaps(b.p) {
				return fmt.Errorf("topology: networks.%s %s overlaps networks.%s %s", a.name, a.p, b.name, b.p)
			}
		}
	}
	return nil
}

// ForContainers returns a copy of the topology laid out for one container per node on the networks of a
// container lab: every node gets its own address (the network's gateway, the host, is .1) and listens on the
// standard port of its protocol (DNS 53, SIP 5060, Diameter 3868, HTTP 8090). The node addresses are core-network
// addresses, except the HSS's, which is its Cx-network address (so the Diameter SRV and A records point there);
// AccessAddress and CxAddress give a node's address on the other networks. Everything else (domain, pools,
// timers, probing, schemes, overrides) is kept, so the container lab and the local lab come from one source.
func (t *Topology) ForContainers(nets Networks) (*Topology, error) {
	if err := nets.Validate(); err != nil {
		return nil, err
	}
	c := *t
	c.Networks = &nets
	return c.layOut(nets.Core, nets.Cx)
}

// ForNamespaces returns a copy of the topology laid out on one network, subnet (an IPv4 /24), with the address
// plan and standard ports of ForContainers: the local lab's network-namespace mode, where every node runs in its
// own namespace on a bridge whose gateway .1 is the host (internal/harness/netns). Networks stays nil: one network.
func (t *Topology) ForNamespaces(subnet netip.Prefix) (*Topology, error) {
	if !subnet.IsValid() || !subnet.Addr().Is4() || subnet.Bits() != 24 || subnet.Masked() != subnet {
		return nil, fmt.Errorf("topology: namespace subnet %s: want an IPv4 /24", subnet)
	}
	c := *t
	c.Networks = nil
	return c.layOut(subnet, subnet)
}

// layOut gives c's nodes their addresses on subnet (the HSS on cx) and the standard ports, and validates it.
func (c Topology) layOut(subnet, cx netip.Prefix) (*Topology, error) {
	c.DNS.Listen = netip.AddrPortFrom(ContainerAddr(subnet, hostDNS), ContainerDNSPort).String()
	c.HSS.Address = ContainerAddr(cx, hostHSS).String()
	c.HSS.DiameterPort, c.HSS.HTTPPort = ContainerDiameterPort, ContainerHTTPPort
	c.BAC.Address, c.BAC.Port = ContainerAddr(subnet, hostBAC).String(), ContainerSIPPort
	c.ICSCF.Address, c.ICSCF.Port = ContainerAddr(subnet, hostICSCF).String(), ContainerSIPPort
	for _, p := range []struct {
		pool          *Pool
		base, standby int
	}{{&c.Pools.PCSCF, hostPCSCF, hostPCSCFb}, {&c.Pools.SCSCF, hostSCSCF, hostSCSCFb}} {
		addrs := make([]string, p.pool.Size)
		for i := range addrs {
			addrs[i] = ContainerAddr(subnet, p.base+i+1).String()
		}
		p.pool.Address, p.pool.Addresses = "", addrs
		p.pool.BasePort, p.pool.Port = 0, ContainerSIPPort
		p.pool.StandbyAddresses = nil
		if p.pool.SchemeOf() == SchemeActiveStandby {
			for i := range p.pool.Size {
				p.pool.StandbyAddresses = append(p.pool.StandbyAddresses, ContainerAddr(subnet, p.standby+i+1).String())
			}
		}
	}
	if c.Overrides != nil {
		ov := make(map[string]Override, len(c.Overrides))
		for k, v := range c.Overrides {
			ov[k] = v
		}
		c.Overrides = ov
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// onNetwork moves addr (an address of from) to the same host number on to: "" when addr is not in from.
func onNetwork(addr string, from, to netip.Prefix) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !from.Contains(a) {
		return ""
	}
	return uintAddr(addrUint(to.Masked().Addr()) + addrUint(a) - addrUint(from.Masked().Addr())).String()
}

// AccessAddress is a node's address on the access network: the same host number as its core address. Without
// separate networks (the local lab) it is the node's address.
func (t *Topology) AccessAddress(n Node) string {
	if t.Networks == nil {
		return n.Address
	}
	return onNetwork(n.Address, t.Networks.Core, t.Networks.Access)
}

// ContainerAddr returns host number n of subnet (n = 1 is the gateway).
func ContainerAddr(subnet netip.Prefix, n int) netip.Addr {
	return uintAddr(addrUint(subnet.Masked().Addr()) + uint32(n))
}

func addrUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uintAddr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// TrafficAddr is the address of the simulated phones' container on a container lab's access network.
func TrafficAddr(subnet netip.Prefix) netip.Addr { return ContainerAddr(subnet, hostTraffic) }

// GatewayAddr is the address of the host on a container lab network (docker's bridge gateway): on the access
// network it is where the compose backend's phones on the host send from.
func GatewayAddr(subnet netip.Prefix) netip.Addr { return ContainerAddr(subnet, 1) }
