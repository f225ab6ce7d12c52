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

// ForContainers returns a copy of the topology laid out for one container per node on a lab network: every
// node gets its own address in subnet (an IPv4 /24 or larger, the network's gateway at .1) and listens on the
// standard port of its protocol (DNS 53, SIP 5060, Diameter 3868, HTTP 8090). Everything else (domain, pools,
// timers, probing, schemes, overrides) is kept, so the container lab and the local lab come from one source.
func (t *Topology) ForContainers(subnet netip.Prefix) (*Topology, error) {
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() || subnet.Bits() > 24 {
		return nil, fmt.Errorf("topology: container subnet %s: want an IPv4 /24 or larger", subnet)
	}
	c := *t
	c.DNS.Listen = netip.AddrPortFrom(ContainerAddr(subnet, hostDNS), ContainerDNSPort).String()
	c.HSS.Address = ContainerAddr(subnet, hostHSS).String()
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

// ContainerAddr returns host number n of subnet (n = 1 is the gateway).
func ContainerAddr(subnet netip.Prefix, n int) netip.Addr {
	a := subnet.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// TrafficAddr is the address of the simulated phones' container on a container lab network.
func TrafficAddr(subnet netip.Prefix) netip.Addr { return ContainerAddr(subnet, hostTraffic) }

// GatewayAddr is the address of the host on a container lab network (docker's bridge gateway).
func GatewayAddr(subnet netip.Prefix) netip.Addr { return ContainerAddr(subnet, 1) }
