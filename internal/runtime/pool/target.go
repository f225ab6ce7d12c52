// Package pool decides where a SIP request goes and which pool members are alive: SRV resolution against the lab
// DNS (RFC 3263 §4.2), RFC 2782 ordering, per-peer health from OPTIONS probing and from finished transactions, and
// the health-filtered target walk a forwarding node runs for every request (SPEC §2.2).
//
// A forwarding node typically does, per request:
//
//	targets, err := pool.Locate(ctx, resolver, host, port) // SRV unless the URI had a port
//	for _, t := range targets { health.Watch(t) }          // idempotent; probing starts once
//	for _, t := range health.Candidates(targets, rnd, tried) {
//		tried[t.Addr] = true
//		req.SetDestination(t.Addr)
//		// new client transaction; on 408/503/504, transport error or no answer:
//		//   health.TransactionFailed(t, reason) and try the next candidate
//		// on any other answer: health.TransactionSucceeded(t, time to its first response) and stop
//	}
//	// no candidate left: answer 503 at once
package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// DefaultSIPPort is the port RFC 3263 §4.2 uses when a host has no SRV records and the URI names no port.
const DefaultSIPPort = 5060

// Target is one place a request can be sent to: an SRV target with its resolved address.
type Target struct {
	Name     string // SRV target host, e.g. "pcscf2.ims.test" (no trailing dot)
	Addr     string // "ip:port" to pass to sip.Request.SetDestination
	Priority uint16
	Weight   uint16
}

// String returns "name(addr)" for logs and test failure messages.
func (t Target) String() string { return t.Name + "(" + t.Addr + ")" }

// SIPName returns the SRV name RFC 3263 queries for a SIP URI host over UDP: "_sip._udp."+host.
func SIPName(host string) string { return "_sip._udp." + host }

// HostPort returns the host and port of a SIP or SIPS URI ("sip:user@host:port;params", with or without angle
// brackets) or of a bare "host[:port]". port is 0 when none is given. RFC 3263 §4.2: a URI with an explicit port
// is resolved with A records only and so skips the SRV failover list; pass both results to Locate.
func HostPort(s string) (host string, port int, err error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "<") {
		end := strings.IndexByte(s, '>')
		if end < 0 {
			return "", 0, fmt.Errorf("pool: uri %q: missing '>'", s)
		}
		s = s[1:end]
	}
	if s == "" {
		return "", 0, errors.New("pool: uri: empty")
	}
	lower := strings.ToLower(s)
	if strings.HasPrefix(lower, "sip:") || strings.HasPrefix(lower, "sips:") {
		var u sip.Uri
		if err := sip.ParseUri(s, &u); err != nil {
			return "", 0, fmt.Errorf("pool: uri %q: %w", s, err)
		}
		host, port = strings.Trim(u.Host, "[]"), u.Port
	} else {
		host = s
		if h, p, err := net.SplitHostPort(s); err == nil {
			n, err := strconv.Atoi(p)
			if err != nil {
				return "", 0, fmt.Errorf("pool: host %q: port: %w", s, err)
			}
			host, port = h, n
		} else if strings.Count(s, ":") > 1 { // bare IPv6 literal
			host = strings.Trim(s, "[]")
		} else if strings.Contains(s, ":") {
			return "", 0, fmt.Errorf("pool: host %q: %w", s, err)
		}
	}
	if host == "" {
		return "", 0, fmt.Errorf("pool: uri %q: empty host", s)
	}
	if port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("pool: uri %q: port %d out of range", s, port)
	}
	return host, port, nil
}

// Locate applies RFC 3263 §4.2 (UDP only) to a URI host and port:
//   - an IP literal is used as is (port 5060 when 0);
//   - an explicit port means an A lookup only: one target, no failover list;
//   - otherwise the SRV records of SIPName(host), and when there are none (ErrNotFound) an A lookup with port 5060.
//
// The result is in DNS answer order: pass it through Order or Health.Candidates.
func Locate(ctx context.Context, r Resolver, host string, port int) ([]Target, error) {
	host = strings.TrimSuffix(host, ".")
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return []Target{{Name: ip.String(), Addr: net.JoinHostPort(ip.String(), strconv.Itoa(orDefault(port)))}}, nil
	}
	if port == 0 {
		targets, err := r.LookupSRV(ctx, SIPName(host))
		if err == nil || !errors.Is(err, ErrNotFound) {
			return targets, err
		}
	}
	ip, err := r.LookupHost(ctx, host)
	if err != nil {
		return nil, err
	}
	return []Target{{Name: host, Addr: net.JoinHostPort(ip, strconv.Itoa(orDefault(port)))}}, nil
}

func orDefault(port int) int {
	if port == 0 {
		return DefaultSIPPort
	}
	return port
}

// Order returns the targets in RFC 2782 order: lowest priority first and, within a priority, a weighted random
// order. The input is not modified. rnd makes the order reproducible; a *rand.Rand is not safe for concurrent use,
// so give each goroutine its own. A nil rnd uses math/rand/v2's global source.
//
// Within a priority the RFC 2782 selection runs until the group is used up: the records not yet ordered are
// arranged in a random order with the weight-0 records first, a number r is drawn and the first record whose
// running weight sum reaches r is taken next. When the group has weight-0 records r is uniform in [0, sum], which
// gives them together the "very small chance" 1/(sum+1); otherwise r is uniform in [1, sum], so each record is
// taken with probability weight/sum exactly. A group whose weights are all 0 comes out uniformly shuffled (Go's
// net.LookupSRV leaves it in answer order, which sends every failover to the same backup).
func Order(targets []Target, rnd *rand.Rand) []Target {
	return orderInPlace(slices.Clone(targets), rnd)
}

func orderInPlace(ts []Target, rnd *rand.Rand) []Target {
	if len(ts) < 2 {
		return ts
	}
	slices.SortStableFunc(ts, func(a, b Target) int { return cmp.Compare(a.Priority, b.Priority) })
	for i := 0; i < len(ts); {
		j := i + 1
		for j < len(ts) && ts[j].Priority == ts[i].Priority {
			j++
		}
		orderGroup(ts[i:j], rnd)
		i = j
	}
	return ts
}

// orderGroup orders one priority group in place by the RFC 2782 weighted selection.
func orderGroup(g []Target, rnd *rand.Rand) {
	if len(g) < 2 {
		return
	}
	// "arrange all SRV RRs (that have not been ordered yet) in any order, except that all those with weight 0 are
	// placed at the beginning of the list": a random arrangement, then the weight-0 records moved to the front
	// keeping that arrangement. Removing the selected record keeps this invariant for the rest of the loop.
	shuffle(g, rnd)
	slices.SortStableFunc(g, func(a, b Target) int {
		return cmp.Compare(min(a.Weight, 1), min(b.Weight, 1))
	})
	sum := 0
	for _, t := range g {
		sum += int(t.Weight)
	}
	for k := 0; k < len(g)-1 && sum > 0; k++ {
		rest := g[k:]
		var r int
		if rest[0].Weight == 0 {
			r = intN(rnd, sum+1) // [0, sum]: r == 0 takes the first weight-0 record
		} else {
			r = intN(rnd, sum) + 1 // [1, sum]
		}
		run, sel := 0, len(rest)-1
		for s, t := range rest {
			run += int(t.Weight)
			if run >= r {
				sel = s
				break
			}
		}
		chosen := rest[sel]
		copy(rest[1:sel+1], rest[:sel])
		rest[0] = chosen
		sum -= int(chosen.Weight)
	}
	// Once only weight-0 records remain (sum == 0) they stay in their shuffled order.
}

func shuffle(g []Target, rnd *rand.Rand) {
	swap := func(i, j int) { g[i], g[j] = g[j], g[i] }
	if rnd == nil {
		rand.Shuffle(len(g), swap)
		return
	}
	rnd.Shuffle(len(g), swap)
}

func intN(rnd *rand.Rand, n int) int {
	if rnd == nil {
		return rand.IntN(n)
	}
	return rnd.IntN(n)
}
