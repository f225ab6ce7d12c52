package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

// ErrNotFound reports a name without records of the asked type (NXDOMAIN, or an answer without them). Locate falls
// back from SRV to A on it, as RFC 3263 §4.2 says.
var ErrNotFound = errors.New("no such record")

// ErrNoService reports an SRV answer whose only target is ".": the service is decidedly not available there
// (RFC 2782). Locate does not fall back to A records on it.
var ErrNoService = errors.New("service not available")

// Resolver resolves SIP server names. DNSResolver asks the lab DNS; StaticResolver serves a map for tests.
type Resolver interface {
	// LookupSRV resolves an SRV name ("_sip._udp.pcscf1.ims.test") to targets with addresses (SRV + A/additional),
	// in answer order.
	LookupSRV(ctx context.Context, name string) ([]Target, error)
	// LookupHost resolves an A record ("pcscf1.ims.test") to an IP string.
	LookupHost(ctx context.Context, host string) (string, error)
}

// Resolver defaults.
const (
	DefaultQueryTimeout = 500 * time.Millisecond
	DefaultCacheSize    = 256
	// ednsUDPSize is the UDP payload size the resolver advertises (the DNS flag day 2020 value).
	ednsUDPSize = 1232
)

// DNSResolver asks one DNS server directly with miekg/dns: UDP first, TCP again when the answer is truncated. It
// never uses the system resolver, /etc/hosts or sipgo's resolver. Answers are cached for their TTL (the smallest
// TTL of the records a result was built from, counted from the moment the query was sent); TTL 0 answers and
// negative answers are not cached.
//
// Serve-stale (RFC 8767): an answer is kept for WithServeStale's max-stale (default 1 h) after its TTL. When the
// server does not answer (timeout, network error, SERVFAIL, REFUSED) and such an expired answer exists, it is
// served instead of an error, and for the failure-recheck period (default 5 s) later lookups of that name get the
// stale answer at once, without waiting for another query to time out. After that period the stale answer is
// still served at once and the server is asked again in the background (RFC 8767 §5 with a client timeout of zero
// for a name whose refresh failed, as Unbound's serve-expired-client-timeout 0): a lookup waits for a dead server
// once, when it is first found dead, not once per recheck period at every hop of a call. And that first wait is
// bounded by the stale-answer client timeout (WithStaleClientTimeout, default 200 ms, RFC 8767 §5): when the
// server has not answered a refresh by then and an expired answer is at hand, the expired answer is served and
// the query goes on in the background (a dead server whose address answers nothing, a stopped container's, would
// otherwise hold the lookup for the whole query timeout at each hop of a call). An authoritative "no such name" is never
// overridden. Without it a dead DNS server stops every new call one TTL after it dies (issue 11's dns-outage).
// It is safe for concurrent use.
type DNSResolver struct {
	server   string
	timeout  time.Duration
	maxCache int
	clock    Clock
	udp, tcp *dns.Client

	maxStale time.Duration // 0: no serve-stale
	recheck  time.Duration
	// clientTimeout: how long a lookup with an expired answer at hand waits for the server (0: the query timeout).
	clientTimeout time.Duration

	queries   atomic.Uint64
	hits      atomic.Uint64
	stale     atomic.Uint64
	refreshes atomic.Uint64

	mu    sync.Mutex
	cache map[cacheKey]cacheEntry

	flight singleflight.Group // refreshes of expired answers, one per name at a time (withClientTimeout)
}

type cacheKey struct {
	name  string // lower case FQDN
	qtype uint16
}

type cacheEntry struct {
	targets []Target // SRV
	ip      string   // A
	expires time.Time
	// failedUntil: the server failed to refresh this expired entry; until then it is served stale without a query.
	failedUntil time.Time
}

// ResolverOption configures a DNSResolver.
type ResolverOption func(*DNSResolver)

// WithQueryTimeout bounds each DNS exchange (default 500 ms). The TCP retry after a truncated answer gets its own.
func WithQueryTimeout(d time.Duration) ResolverOption {
	return func(r *DNSResolver) {
		if d > 0 {
			r.timeout = d
		}
	}
}

// WithCacheSize sets how many answers the cache holds (default 256); 0 disables caching.
func WithCacheSize(n int) ResolverOption {
	return func(r *DNSResolver) {
		if n >= 0 {
			r.maxCache = n
		}
	}
}

// WithServeStale sets how long after its TTL an answer may still be served when the server does not answer
// (maxStale; 0 disables serve-stale) and how long, after a failed refresh, the stale answer is served without
// asking again (recheck). RFC 8767 suggests 1–3 days and 30 s; the lab's defaults are 1 h and 5 s.
func WithServeStale(maxStale, recheck time.Duration) ResolverOption {
	return func(r *DNSResolver) {
		if maxStale >= 0 {
			r.maxStale = maxStale
		}
		if recheck > 0 {
			r.recheck = recheck
		}
	}
}

// WithStaleClientTimeout sets how long a lookup that has an expired answer at hand (within max-stale) waits for the
// server's fresh one before it is served the expired answer, the query going on in the background (default
// 200 ms; 0: wait for the query's own timeout). RFC 8767 §5 suggests 1.8 s for stub resolvers behind a 2 s
// timeout; a SIP hop's lookup sits inside a call setup, and a call crosses up to six of them.
func WithStaleClientTimeout(d time.Duration) ResolverOption {
	return func(r *DNSResolver) {
		if d >= 0 {
			r.clientTimeout = d
		}
	}
}

// WithResolverClock sets the clock cache expiry is measured with (tests). Query timeouts use the system clock.
func WithResolverClock(c Clock) ResolverOption {
	return func(r *DNSResolver) {
		if c != nil {
			r.clock = c
		}
	}
}

// NewDNSResolver returns a resolver that asks server ("127.0.0.1:1053").
func NewDNSResolver(server string, opts ...ResolverOption) *DNSResolver {
	r := &DNSResolver{
		server:   server,
		timeout:  DefaultQueryTimeout,
		maxCache: DefaultCacheSize,
		clock:    systemClock{},
		udp:      &dns.Client{Net: "udp", UDPSize: ednsUDPSize},
		tcp:      &dns.Client{Net: "tcp"},
		cache:    map[cacheKey]cacheEntry{},
		maxStale: DefaultMaxStale,
		recheck:  DefaultStaleRecheck,

		clientTimeout: DefaultStaleClientTimeout,
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Queries returns how many DNS messages the resolver has sent (a truncated UDP answer retried over TCP counts
// twice; cache hits count nothing). It is the resolver's part of the signalling-cost KPI.
func (r *DNSResolver) Queries() uint64 { return r.queries.Load() }

// CacheHits returns how many lookups were answered from the cache (fresh answers).
func (r *DNSResolver) CacheHits() uint64 { return r.hits.Load() }

// StaleServed returns how many lookups were answered with an expired answer because the server did not answer.
func (r *DNSResolver) StaleServed() uint64 { return r.stale.Load() }

// BackgroundRefreshes counts the refreshes of names served stale that were asked in the background.
func (r *DNSResolver) BackgroundRefreshes() uint64 { return r.refreshes.Load() }

// Defaults of serve-stale (WithServeStale).
const (
	DefaultMaxStale     = time.Hour
	DefaultStaleRecheck = 5 * time.Second
	// DefaultStaleClientTimeout: WithStaleClientTimeout's default.
	DefaultStaleClientTimeout = 200 * time.Millisecond
)

// LookupSRV implements Resolver. Targets come in answer order with the addresses from the additional section, or
// from an A query per target when the additional section lacks them (the first A record of a target is used). A
// target whose address cannot be resolved is left out of the result (which is then not cached); when none can
// be, the error says why.
func (r *DNSResolver) LookupSRV(ctx context.Context, name string) ([]Target, error) {
	key := cacheKey{name: canonical(name), qtype: dns.TypeSRV}
	if e, ok, refresh := r.cached(key); ok {
		if refresh {
			go r.refresh(func(ctx context.Context) error { _, err := r.resolveSRV(ctx, key); return err })
		}
		return slices.Clone(e.targets), nil
	}
	if e, ok := r.expired(key); ok {
		ts, err := withClientTimeout(ctx, r, key, func(ctx context.Context) ([]Target, error) { return r.resolveSRV(ctx, key) },
			e.targets)
		return slices.Clone(ts), err // the refresh's result is shared by the lookups that waited for it
	}
	return r.resolveSRV(ctx, key)
}

// expired returns key's expired answer when it may still be served (within max-stale of its TTL) and the
// stale-answer client timeout is shorter than the query timeout, so that waiting for the server can be cut short.
func (r *DNSResolver) expired(key cacheKey) (cacheEntry, bool) {
	if r.maxStale == 0 || r.maxCache == 0 || r.clientTimeout <= 0 || r.clientTimeout >= r.timeout {
		return cacheEntry{}, false
	}
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.cache[key]
	if !ok || now.Before(e.expires) || now.After(e.expires.Add(r.maxStale)) {
		return cacheEntry{}, false
	}
	return e, true
}

// withClientTimeout runs resolve, a refresh of a name whose expired answer is stale, and returns its result if it
// comes within the stale-answer client timeout; otherwise it returns stale and lets resolve finish in the
// background (it caches a fresh answer, or starts the failure-recheck period when the server does not answer).
func withClientTimeout[T any](ctx context.Context, r *DNSResolver, key cacheKey, resolve func(context.Context) (T, error), stale T) (T, error) {
	// One refresh per name at a time: the lookups that come while it runs wait for the same query.
	done := r.flight.DoChan(fmt.Sprintf("%s/%d", key.name, key.qtype), func() (any, error) {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*r.timeout) // a UDP query and its TCP retry
		defer cancel()
		return resolve(qctx)
	})
	t := time.NewTimer(r.clientTimeout)
	defer t.Stop()
	select {
	case res := <-done:
		if res.Err != nil {
			var zero T
			return zero, res.Err
		}
		return res.Val.(T), nil
	case <-t.C:
		r.stale.Add(1)
		return stale, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// resolveSRV asks the server for key's SRV records (and the targets' A records it needs), caches the result, and
// serves the stale answer when the server does not answer.
func (r *DNSResolver) resolveSRV(ctx context.Context, key cacheKey) ([]Target, error) {
	sent := r.clock.Now()
	resp, err := r.exchange(ctx, key.name, dns.TypeSRV)
	if err != nil {
		if e, ok := r.serveStale(key, err); ok {
			return slices.Clone(e.targets), nil
		}
		return nil, err
	}
	minTTL := ^uint32(0)
	var srvs []*dns.SRV
	for _, rr := range resp.Answer {
		if s, ok := rr.(*dns.SRV); ok && canonical(s.Hdr.Name) == key.name {
			srvs = append(srvs, s)
			minTTL = min(minTTL, s.Hdr.Ttl)
		}
	}
	if len(srvs) == 0 {
		return nil, fmt.Errorf("pool: dns SRV %s: %w", key.name, ErrNotFound)
	}
	extra := map[string]*dns.A{}
	for _, rr := range resp.Extra {
		if a, ok := rr.(*dns.A); ok {
			n := canonical(a.Hdr.Name)
			if _, seen := extra[n]; !seen {
				extra[n] = a
			}
		}
	}
	expires := sent.Add(ttlDuration(minTTL))
	targets := make([]Target, 0, len(srvs))
	var errs []error
	for _, s := range srvs {
		host := canonical(s.Target)
		if host == "." {
			continue
		}
		var ip string
		if a, ok := extra[host]; ok {
			ip = a.A.String()
			expires = minTime(expires, sent.Add(ttlDuration(a.Hdr.Ttl)))
		} else {
			e, err := r.lookupA(ctx, host)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ip = e.ip
			expires = minTime(expires, e.expires)
		}
		targets = append(targets, Target{
			Name:     strings.TrimSuffix(host, "."),
			Addr:     net.JoinHostPort(ip, strconv.Itoa(int(s.Port))),
			Priority: s.Priority,
			Weight:   s.Weight,
		})
	}
	if len(targets) == 0 {
		if len(errs) > 0 {
			return nil, fmt.Errorf("pool: dns SRV %s: no target resolved: %w", key.name, errors.Join(errs...))
		}
		return nil, fmt.Errorf("pool: dns SRV %s: %w", key.name, ErrNoService)
	}
	if len(errs) == 0 { // a partial result is returned but not cached: the next lookup tries the missing targets
		r.store(key, cacheEntry{targets: slices.Clone(targets), expires: expires})
	}
	return targets, nil
}

// LookupHost implements Resolver: the first A record of host (an IP literal is returned as is, without a query).
func (r *DNSResolver) LookupHost(ctx context.Context, host string) (string, error) {
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return ip.String(), nil
	}
	e, err := r.lookupA(ctx, canonical(host))
	if err != nil {
		return "", err
	}
	return e.ip, nil
}

// lookupA returns the A answer for a canonical name with its expiry, from the cache when it is still fresh.
func (r *DNSResolver) lookupA(ctx context.Context, name string) (cacheEntry, error) {
	key := cacheKey{name: name, qtype: dns.TypeA}
	if e, ok, refresh := r.cached(key); ok {
		if refresh {
			go r.refresh(func(ctx context.Context) error { _, err := r.resolveA(ctx, key); return err })
		}
		return e, nil
	}
	if e, ok := r.expired(key); ok {
		return withClientTimeout(ctx, r, key, func(ctx context.Context) (cacheEntry, error) { return r.resolveA(ctx, key) }, e)
	}
	return r.resolveA(ctx, key)
}

// resolveA asks the server for key's A record, caches it, and serves the stale answer when the server does not
// answer.
func (r *DNSResolver) resolveA(ctx context.Context, key cacheKey) (cacheEntry, error) {
	name := key.name
	sent := r.clock.Now()
	resp, err := r.exchange(ctx, name, dns.TypeA)
	if err != nil {
		if e, ok := r.serveStale(key, err); ok {
			return e, nil
		}
		return cacheEntry{}, err
	}
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok && canonical(a.Hdr.Name) == name {
			e := cacheEntry{ip: a.A.String(), expires: sent.Add(ttlDuration(a.Hdr.Ttl))}
			r.store(key, e)
			return e, nil
		}
	}
	return cacheEntry{}, fmt.Errorf("pool: dns A %s: %w", name, ErrNotFound)
}

// exchange sends one query over UDP and repeats it over TCP when the answer is truncated.
func (r *DNSResolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(ednsUDPSize, false)
	resp, err := r.exchangeOnce(ctx, r.udp, m)
	if err == nil && resp.Truncated {
		resp, err = r.exchangeOnce(ctx, r.tcp, m)
	}
	if err != nil {
		return nil, fmt.Errorf("pool: dns %s %s via %s: %w", dns.TypeToString[qtype], name, r.server, err)
	}
	switch resp.Rcode {
	case dns.RcodeSuccess:
		return resp, nil
	case dns.RcodeNameError:
		return nil, fmt.Errorf("pool: dns %s %s: %w", dns.TypeToString[qtype], name, ErrNotFound)
	default:
		return nil, fmt.Errorf("pool: dns %s %s via %s: rcode %s: %w", dns.TypeToString[qtype], name, r.server,
			dns.RcodeToString[resp.Rcode], errServerFailed)
	}
}

// errServerFailed marks an answer that says the server could not answer (SERVFAIL, REFUSED, …): like no answer
// at all, it lets a stale answer be served.
var errServerFailed = errors.New("server failed")

// serveStale returns the expired answer for key when the lookup failed because the server did not answer
// (not for an authoritative "no such name") and the answer expired less than maxStale ago; it starts the
// failure-recheck period of the entry.
func (r *DNSResolver) serveStale(key cacheKey, err error) (cacheEntry, bool) {
	if r.maxStale == 0 || r.maxCache == 0 || errors.Is(err, ErrNotFound) {
		return cacheEntry{}, false
	}
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.cache[key]
	if !ok || now.After(e.expires.Add(r.maxStale)) {
		return cacheEntry{}, false
	}
	e.failedUntil = now.Add(r.recheck)
	r.cache[key] = e
	r.stale.Add(1)
	return e, true
}

func (r *DNSResolver) exchangeOnce(ctx context.Context, c *dns.Client, m *dns.Msg) (*dns.Msg, error) {
	qctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	r.queries.Add(1)
	resp, _, err := c.ExchangeContext(qctx, m, r.server)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// refresh asks the server again in the background for a name served stale (one refresh per name and recheck
// period: cached starts the next period before it hands the refresh out).
func (r *DNSResolver) refresh(resolve func(context.Context) error) {
	r.refreshes.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 4*r.timeout) // a UDP query and its TCP retry
	defer cancel()
	_ = resolve(ctx) // a failure keeps the stale answer (serveStale) for another recheck period
}

// cached returns key's answer when it is fresh, or its stale answer while the server is known to be failing:
// within the failure-recheck period at once, and after it at once too, with refresh true (the caller asks the
// server again in the background; the next period starts now, so only one lookup per period refreshes).
func (r *DNSResolver) cached(key cacheKey) (e cacheEntry, ok, refresh bool) {
	if r.maxCache == 0 {
		return cacheEntry{}, false, false
	}
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok = r.cache[key]
	if !ok {
		return cacheEntry{}, false, false
	}
	if !now.Before(e.expires) {
		if now.Before(e.failedUntil) { // the server failed a moment ago: stale at once, no query
			r.stale.Add(1)
			return e, true, false
		}
		if r.maxStale == 0 || now.After(e.expires.Add(r.maxStale)) {
			delete(r.cache, key)
			return cacheEntry{}, false, false
		}
		if !e.failedUntil.IsZero() { // its last refresh failed: stale at once, ask again in the background
			e.failedUntil = now.Add(r.recheck)
			r.cache[key] = e
			r.stale.Add(1)
			return e, true, true
		}
		return cacheEntry{}, false, false
	}
	r.hits.Add(1)
	return e, true, false
}

func (r *DNSResolver) store(key cacheKey, e cacheEntry) {
	if r.maxCache == 0 {
		return
	}
	now := r.clock.Now()
	if !now.Before(e.expires) { // TTL 0, or the answer took longer than its TTL
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cache[key]; !ok && len(r.cache) >= r.maxCache {
		for k, old := range r.cache {
			if now.After(old.expires.Add(r.maxStale)) {
				delete(r.cache, k)
			}
		}
		for k := range r.cache { // still full: drop any one entry
			if len(r.cache) < r.maxCache {
				break
			}
			delete(r.cache, k)
		}
	}
	r.cache[key] = e
}

func canonical(name string) string { return dns.CanonicalName(name) }

func ttlDuration(ttl uint32) time.Duration { return time.Duration(ttl) * time.Second }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
