package ue

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// lookupProxy finds the outbound proxy (the BAC) the way the lab publishes it: SRV _sip._udp.<host> at the lab
// DNS server, lowest priority first and weighted within it (RFC 2782), then the target's A record (taken from
// the additional section when the server put it there).
func lookupProxy(ctx context.Context, server, host string, pick func(n int) int) (string, error) {
	name := "_sip._udp." + dns.Fqdn(host)
	in, err := exchange(ctx, server, name, dns.TypeSRV)
	if err != nil {
		return "", err
	}
	var srvs []*dns.SRV
	for _, rr := range in.Answer {
		if s, ok := rr.(*dns.SRV); ok && s.Target != "." {
			srvs = append(srvs, s)
		}
	}
	if len(srvs) == 0 {
		return "", fmt.Errorf("ue: SRV %s at %s: no target", name, server)
	}
	best := slices.MinFunc(srvs, func(a, b *dns.SRV) int { return int(a.Priority) - int(b.Priority) })
	var group []*dns.SRV
	total := 0
	for _, s := range srvs {
		if s.Priority == best.Priority {
			group = append(group, s)
			total += int(s.Weight)
		}
	}
	chosen := group[0]
	if total > 0 {
		r := pick(total)
		for _, s := range group {
			if r -= int(s.Weight); r < 0 {
				chosen = s
				break
			}
		}
	}
	port := strconv.Itoa(int(chosen.Port))
	for _, rr := range in.Extra {
		if a, ok := rr.(*dns.A); ok && strings.EqualFold(a.Hdr.Name, chosen.Target) {
			return net.JoinHostPort(a.A.String(), port), nil
		}
	}
	in, err = exchange(ctx, server, chosen.Target, dns.TypeA)
	if err != nil {
		return "", err
	}
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.A); ok {
			return net.JoinHostPort(a.A.String(), port), nil
		}
	}
	return "", fmt.Errorf("ue: A %s at %s: no address", chosen.Target, server)
}

func exchange(ctx context.Context, server, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	in, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && in.Truncated {
		c.Net = "tcp"
		in, _, err = c.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		return nil, fmt.Errorf("ue: %s %s at %s: %w", dns.TypeToString[qtype], name, server, err)
	}
	if in.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("ue: %s %s at %s: %s", dns.TypeToString[qtype], name, server, dns.RcodeToString[in.Rcode])
	}
	return in, nil
}
