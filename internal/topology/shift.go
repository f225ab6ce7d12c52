package topology

import (
	"fmt"
	"net"
	"strconv"
)

// MaxPortOffset bounds ShiftPorts' offset: the default lab's ports (1053 … 8090) stay below 65535.
const MaxPortOffset = 50000

// ShiftPorts adds offset to every port the lab listens on: the DNS server's, the HSS's Diameter and HTTP
// ports, the BAC's, the I-CSCF's, the pools' (base_port or port; standbys follow) and the per-node metrics
// addresses. Two local labs whose offsets differ by more than the span of their ports run side by side on one
// machine (imslab --port-offset). The topology is validated again; an offset that takes a port out of range
// is an error naming it.
func (t *Topology) ShiftPorts(offset int) error {
	if offset == 0 {
		return nil
	}
	if offset < 0 || offset > MaxPortOffset {
		return fmt.Errorf("topology: port offset %d: must be from 0 to %d", offset, MaxPortOffset)
	}
	host, port, err := net.SplitHostPort(t.DNS.Listen)
	if err != nil {
		return fmt.Errorf("topology: dns.listen %q: %w", t.DNS.Listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("topology: dns.listen %q: port: %w", t.DNS.Listen, err)
	}
	t.DNS.Listen = net.JoinHostPort(host, strconv.Itoa(p+offset))
	t.HSS.DiameterPort += offset
	t.HSS.HTTPPort += offset
	t.BAC.Port += offset
	t.ICSCF.Port += offset
	for _, pl := range []*Pool{&t.Pools.PCSCF, &t.Pools.SCSCF} {
		if pl.BasePort != 0 {
			pl.BasePort += offset
		}
		if pl.Port != 0 {
			pl.Port += offset
		}
	}
	overrides := make(map[string]Override, len(t.Overrides)) // a new map: the caller's may be shared
	for name, o := range t.Overrides {
		overrides[name] = o
		if o.Metrics == "" {
			continue
		}
		h, mp, err := net.SplitHostPort(o.Metrics)
		if err != nil {
			return fmt.Errorf("topology: nodes.%s.metrics %q: %w", name, o.Metrics, err)
		}
		n, err := strconv.Atoi(mp)
		if err != nil {
			return fmt.Errorf("topology: nodes.%s.metrics %q: port: %w", name, o.Metrics, err)
		}
		o.Metrics = net.JoinHostPort(h, strconv.Itoa(n+offset))
		overrides[name] = o
	}
	if t.Overrides != nil {
		t.Overrides = overrides
	}
	if err := t.Validate(); err != nil {
		return fmt.Errorf("topology: ports shifted by %d: %w", offset, err)
	}
	return nil
}
