// Package dnsd is the lab's authoritative DNS server (miekg/dns). It serves the zone derived from the topology
// (SRV and A records, SPEC §2.1) on UDP and TCP at one address, answers authoritatively for the domain, and lets
// the zone be replaced or edited while it runs, for DNS faults.
package dnsd

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Config is the configuration of a DNS server.
type Config struct {
	// Listen is the UDP and TCP address (ip:port; port 0 picks one free port for both). Empty: the topology's
	// dns.listen.
	Listen string
	// Topology is the topology file the zone is built from. Empty: the embedded default topology. Ignored when a
	// zone is given with WithZone.
	Topology string
	// TTL replaces the zone's TTL when positive (whole seconds). Zero keeps the topology's dns.ttl.
	TTL time.Duration
	// QueryEvents records one dns_query event per answered query (off by default: a busy lab asks a lot).
	QueryEvents bool
}

// Validate checks the configuration and names the bad field.
func (c *Config) Validate() error {
	if c.Listen != "" {
		host, port, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return fmt.Errorf("dnsd config: listen: %q: want ip:port", c.Listen)
		}
		if host != "" && net.ParseIP(host) == nil {
			return fmt.Errorf("dnsd config: listen: %q is not an IP address", host)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("dnsd config: listen: port %q: want 0..65535", port)
		}
	}
	if c.TTL < 0 {
		return errors.New("dnsd config: ttl: must not be negative")
	}
	if c.TTL%time.Second != 0 {
		return fmt.Errorf("dnsd config: ttl: %s: must be a whole number of seconds", c.TTL)
	}
	return nil
}
