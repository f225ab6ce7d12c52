package pool_test

import (
	"context"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/pool"
)

var _ = Describe("DNSResolver", Label("integration"), func() {
	var (
		srv *testDNS
		clk *fakeClock
		r   *pool.DNSResolver
	)
	BeforeEach(func() {
		srv = startDNS()
		srv.LabZone(1)
		clk = newFakeClock()
		r = pool.NewDNSResolver(srv.Addr, pool.WithResolverClock(clk))
	})

	It("resolves the pool record with the addresses from the additional section", func(ctx SpecContext) {
		ts, err := r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(ConsistOf(
			pool.Target{Name: "pcscf1.ims.test", Addr: "127.0.0.1:5061", Priority: 1, Weight: 10},
			pool.Target{Name: "pcscf2.ims.test", Addr: "127.0.0.1:5062", Priority: 1, Weight: 10},
			pool.Target{Name: "pcscf3.ims.test", Addr: "127.0.0.1:5063", Priority: 1, Weight: 10},
		))
		Expect(r.Queries()).To(BeEquivalentTo(1))
		Expect(srv.Seen()).To(Equal([]string{"udp SRV _sip._udp.pcscf.ims.test."}))
	}, SpecTimeout(5*time.Second))

	It("orders a per-host record with the host first, then the other two", func(ctx SpecContext) {
		ts, err := r.LookupSRV(ctx, pool.SIPName("pcscf1.ims.test"))
		Expect(err).NotTo(HaveOccurred())
		seen := map[string]bool{}
		for seed := range uint64(50) {
			o := pool.Order(ts, seeded(seed))
			Expect(o).To(HaveLen(3))
			Expect(o[0]).To(Equal(pool.Target{Name: "pcscf1.ims.test", Addr: "127.0.0.1:5061", Priority: 1, Weight: 10}))
			Expect(names(o[1:])).To(ConsistOf("pcscf2.ims.test", "pcscf3.ims.test"))
			Expect(o[1].Priority).To(BeEquivalentTo(2))
			seen[o[1].Name] = true
		}
		Expect(seen).To(HaveLen(2), "both backups come second for some seed")
	}, SpecTimeout(5*time.Second))

	It("queries A records when the additional section lacks them", func(ctx SpecContext) {
		srv.SetNoExtra(true)
		ts, err := r.LookupSRV(ctx, "_sip._udp.pcscf2.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(names(pool.Order(ts, seeded(1))[:1])).To(Equal([]string{"pcscf2.ims.test"}))
		Expect(ts).To(ContainElement(pool.Target{Name: "pcscf3.ims.test", Addr: "127.0.0.1:5063", Priority: 2, Weight: 10}))
		Expect(srv.Seen()).To(ConsistOf("udp SRV _sip._udp.pcscf2.ims.test.",
			"udp A pcscf1.ims.test.", "udp A pcscf2.ims.test.", "udp A pcscf3.ims.test."))
		Expect(r.Queries()).To(BeEquivalentTo(4))
	}, SpecTimeout(5*time.Second))

	It("leaves out a target without an address and does not cache the partial result", func(ctx SpecContext) {
		srv.SetNoExtra(true)
		srv.Zone(
			"_sip._udp.pcscf.ims.test. 1 IN SRV 1 10 5061 pcscf1.ims.test.",
			"_sip._udp.pcscf.ims.test. 1 IN SRV 1 10 5069 ghost.ims.test.",
		)
		ts, err := r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(names(ts)).To(Equal([]string{"pcscf1.ims.test"}))
		srv.Zone("ghost.ims.test. 1 IN A 127.0.0.1")
		ts, err = r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(names(ts)).To(ConsistOf("pcscf1.ims.test", "ghost.ims.test"))
	}, SpecTimeout(5*time.Second))

	It("repeats a truncated UDP answer over TCP", func(ctx SpecContext) {
		srv.SetTruncate("_sip._udp.pcscf.ims.test")
		ts, err := r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(HaveLen(3))
		Expect(srv.Seen()).To(Equal([]string{"udp SRV _sip._udp.pcscf.ims.test.", "tcp SRV _sip._udp.pcscf.ims.test."}))
		Expect(r.Queries()).To(BeEquivalentTo(2))
	}, SpecTimeout(5*time.Second))

	It("gets a large record set whole over TCP", func(ctx SpecContext) {
		var lines []string
		for i := range 120 {
			lines = append(lines, "_sip._udp.big.ims.test. 1 IN SRV 1 10 "+itoa(6000+i)+" big"+itoa(i)+".ims.test.",
				"big"+itoa(i)+".ims.test. 1 IN A 127.0.0.1")
		}
		srv.Zone(lines...)
		ts, err := r.LookupSRV(ctx, "_sip._udp.big.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(HaveLen(120))
		Expect(srv.tcpQueries.Load()).To(BeEquivalentTo(1))
	}, SpecTimeout(5*time.Second))

	It("serves from the cache within the TTL and asks again once it has passed", func(ctx SpecContext) {
		ts, err := r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(ContainElement(pool.Target{Name: "pcscf2.ims.test", Addr: "127.0.0.1:5062", Priority: 1, Weight: 10}))

		srv.Zone(
			"_sip._udp.pcscf.ims.test. 1 IN SRV 1 10 5061 pcscf1.ims.test.",
			"_sip._udp.pcscf.ims.test. 1 IN SRV 1 10 6062 pcscf2.ims.test.",
		)
		clk.Advance(999 * time.Millisecond)
		ts, err = r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(HaveLen(3), "still the cached answer")
		Expect(r.Queries()).To(BeEquivalentTo(1))
		Expect(r.CacheHits()).To(BeEquivalentTo(1))

		clk.Advance(time.Millisecond) // exactly the TTL: the cached answer is no longer served
		ts, err = r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(HaveLen(2))
		Expect(ts).To(ContainElement(pool.Target{Name: "pcscf2.ims.test", Addr: "127.0.0.1:6062", Priority: 1, Weight: 10}))
		Expect(r.Queries()).To(BeEquivalentTo(2))
	}, SpecTimeout(5*time.Second))

	It("keeps an SRV result no longer than the shortest TTL among its SRV and A records", func(ctx SpecContext) {
		srv.Zone(
			"_sip._udp.pcscf.ims.test. 60 IN SRV 1 10 5061 pcscf1.ims.test.",
			"pcscf1.ims.test. 2 IN A 127.0.0.1",
		)
		_, err := r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		srv.Zone("pcscf1.ims.test. 2 IN A 127.0.0.2")
		clk.Advance(1999 * time.Millisecond)
		ts, err := r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts[0].Addr).To(Equal("127.0.0.1:5061"))
		clk.Advance(time.Millisecond)
		ts, err = r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts[0].Addr).To(Equal("127.0.0.2:5061"))
	}, SpecTimeout(5*time.Second))

	It("does not cache TTL 0 answers", func(ctx SpecContext) {
		srv.LabZone(0)
		for range 3 {
			_, err := r.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(r.Queries()).To(BeEquivalentTo(3))
		Expect(r.CacheHits()).To(BeZero())
	}, SpecTimeout(5*time.Second))

	It("sees a changed record after the lab TTL of 1 s on the system clock", func(ctx SpecContext) {
		sys := pool.NewDNSResolver(srv.Addr)
		asked := time.Now() // the answer may be cached until asked + 1 s, no longer
		ts, err := sys.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(HaveLen(3))
		srv.Zone("_sip._udp.pcscf.ims.test. 1 IN SRV 1 10 5062 pcscf2.ims.test.")
		Eventually(func() ([]pool.Target, error) { return sys.LookupSRV(ctx, "_sip._udp.pcscf.ims.test") }).
			WithTimeout(3 * time.Second).WithPolling(20 * time.Millisecond).
			Should(HaveLen(1))
		Expect(time.Since(asked)).To(BeNumerically("<", 1200*time.Millisecond), "served past the TTL")
		Expect(sys.CacheHits()).To(BeNumerically(">", 0), "the cache was used meanwhile")
	}, SpecTimeout(5*time.Second))

	It("reports NXDOMAIN as ErrNotFound and does not cache it", func(ctx SpecContext) {
		_, err := r.LookupSRV(ctx, "_sip._udp.nobody.ims.test")
		Expect(err).To(MatchError(pool.ErrNotFound))
		_, err = r.LookupHost(ctx, "nobody.ims.test")
		Expect(err).To(MatchError(pool.ErrNotFound))
		_, err = r.LookupSRV(ctx, "_sip._udp.nobody.ims.test")
		Expect(err).To(MatchError(pool.ErrNotFound))
		Expect(r.Queries()).To(BeEquivalentTo(3))
	}, SpecTimeout(5*time.Second))

	It("reports a name without SRV records as ErrNotFound and a '.' target as ErrNoService", func(ctx SpecContext) {
		_, err := r.LookupSRV(ctx, "pcscf1.ims.test") // has an A record only
		Expect(err).To(MatchError(pool.ErrNotFound))
		srv.Zone("_sip._udp.down.ims.test. 1 IN SRV 0 0 0 .")
		_, err = r.LookupSRV(ctx, "_sip._udp.down.ims.test")
		Expect(err).To(MatchError(pool.ErrNoService))
	}, SpecTimeout(5*time.Second))

	It("resolves A records and takes IP literals as they are", func(ctx SpecContext) {
		ip, err := r.LookupHost(ctx, "pcscf3.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ip).To(Equal("127.0.0.1"))
		ip, err = r.LookupHost(ctx, "10.0.0.7")
		Expect(err).NotTo(HaveOccurred())
		Expect(ip).To(Equal("10.0.0.7"))
		Expect(r.Queries()).To(BeEquivalentTo(1))
	}, SpecTimeout(5*time.Second))

	It("gives up on a silent server after the query timeout", func(ctx SpecContext) {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(pc.Close)
		silent := pool.NewDNSResolver(pc.LocalAddr().String(), pool.WithQueryTimeout(100*time.Millisecond))
		start := time.Now()
		_, err = silent.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
		Expect(err).To(HaveOccurred())
		Expect(time.Since(start)).To(BeNumerically("<", time.Second))
	}, SpecTimeout(5*time.Second))

	Describe("serve-stale (RFC 8767)", func() {
		BeforeEach(func() {
			r = pool.NewDNSResolver(srv.Addr, pool.WithResolverClock(clk), pool.WithQueryTimeout(100*time.Millisecond),
				pool.WithServeStale(time.Hour, 5*time.Second))
		})
		const name = "_sip._udp.pcscf.ims.test"

		It("serves the expired answer when the server is dead, then without asking for the recheck period", func(ctx SpecContext) {
			fresh, err := r.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			srv.silent.Store(true)
			clk.Advance(2 * time.Second) // past the TTL of 1 s

			start := time.Now()
			ts, err := r.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			Expect(ts).To(Equal(fresh))
			Expect(time.Since(start)).To(BeNumerically(">=", 100*time.Millisecond), "it asked and waited for the server first")
			Expect(r.StaleServed()).To(BeEquivalentTo(1))

			queries := r.Queries()
			start = time.Now()
			ts, err = r.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			Expect(ts).To(Equal(fresh))
			Expect(time.Since(start)).To(BeNumerically("<", 100*time.Millisecond), "within the recheck period: no query")
			Expect(r.Queries()).To(Equal(queries))
			Expect(r.StaleServed()).To(BeEquivalentTo(2))

			// The recheck period is over: the stale answer is still served at once, and the server is asked again in
			// the background (once per period, whatever the number of lookups).
			clk.Advance(5 * time.Second)
			for range 3 {
				start = time.Now()
				ts, err = r.LookupSRV(ctx, name)
				Expect(err).NotTo(HaveOccurred())
				Expect(ts).To(Equal(fresh))
				Expect(time.Since(start)).To(BeNumerically("<", 100*time.Millisecond), "served stale without waiting")
			}
			Eventually(r.Queries).Should(BeNumerically(">", queries), "asked again in the background")
			Expect(r.BackgroundRefreshes()).To(BeEquivalentTo(1))
			Expect(r.StaleServed()).To(BeEquivalentTo(5))

			srv.silent.Store(false) // the server is back: its answer replaces the stale one at the next refresh
			srv.Zone("_sip._udp.pcscf.ims.test. 1 IN SRV 1 10 5061 pcscf1.ims.test.")
			time.Sleep(300 * time.Millisecond) // the background refresh's query to the silent server has timed out
			clk.Advance(5 * time.Second)
			ts, err = r.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			Expect(ts).To(Equal(fresh), "this lookup is served stale and starts the refresh")
			Eventually(func() []pool.Target {
				ts, _ := r.LookupSRV(ctx, name)
				return ts
			}).Should(HaveLen(1), "the refreshed answer")
		}, SpecTimeout(10*time.Second))

		It("waits for a silent server no longer than the stale-answer client timeout when an expired answer is at hand",
			func(ctx SpecContext) {
				slow := pool.NewDNSResolver(srv.Addr, pool.WithResolverClock(clk), pool.WithQueryTimeout(time.Second),
					pool.WithServeStale(time.Hour, 5*time.Second), pool.WithStaleClientTimeout(100*time.Millisecond))
				fresh, err := slow.LookupSRV(ctx, name)
				Expect(err).NotTo(HaveOccurred())
				ip, err := slow.LookupHost(ctx, "pcscf1.ims.test")
				Expect(err).NotTo(HaveOccurred())
				srv.silent.Store(true)
				clk.Advance(2 * time.Second) // past the TTL of 1 s

				start := time.Now()
				ts, err := slow.LookupSRV(ctx, name)
				Expect(err).NotTo(HaveOccurred())
				Expect(ts).To(Equal(fresh))
				Expect(slow.LookupHost(ctx, "pcscf1.ims.test")).To(Equal(ip))
				Expect(time.Since(start)).To(BeNumerically("<", 800*time.Millisecond),
					"both served stale after the 100 ms client timeout, not the 1 s query timeout")

				// The query went on in the background and found the server back: its fresh answer is cached.
				srv.Zone("_sip._udp.pcscf.ims.test. 1 IN SRV 1 10 5061 pcscf1.ims.test.")
				srv.silent.Store(false)
				Eventually(func() []pool.Target {
					clk.Advance(6 * time.Second) // past the TTL and any recheck period: ask again
					ts, _ := slow.LookupSRV(ctx, name)
					return ts
				}, 5*time.Second, 200*time.Millisecond).Should(HaveLen(1))
			}, SpecTimeout(10*time.Second))

		It("serves stale on SERVFAIL, resolves host names stale too, and stops after max-stale", func(ctx SpecContext) {
			_, err := r.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			ip, err := r.LookupHost(ctx, "pcscf1.ims.test")
			Expect(err).NotTo(HaveOccurred())
			srv.servfail.Store(true)
			clk.Advance(2 * time.Second)
			_, err = r.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.LookupHost(ctx, "pcscf1.ims.test")).To(Equal(ip))

			clk.Advance(time.Hour + time.Minute) // longer than max-stale after the TTL
			_, err = r.LookupSRV(ctx, name)
			Expect(err).To(MatchError(ContainSubstring("SERVFAIL")))
		}, SpecTimeout(10*time.Second))

		It("never overrides an authoritative 'no such name'", func(ctx SpecContext) {
			_, err := r.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			srv.Zone() // unchanged zone; remove the records instead:
			srv.mu.Lock()
			for k := range srv.rrs {
				delete(srv.rrs, k)
			}
			srv.mu.Unlock()
			clk.Advance(2 * time.Second)
			_, err = r.LookupSRV(ctx, name)
			Expect(err).To(MatchError(pool.ErrNotFound))
			Expect(r.StaleServed()).To(BeZero())
		}, SpecTimeout(10*time.Second))

		It("can be switched off: a dead server is an error one TTL later", func(ctx SpecContext) {
			off := pool.NewDNSResolver(srv.Addr, pool.WithResolverClock(clk), pool.WithQueryTimeout(100*time.Millisecond),
				pool.WithServeStale(0, 0))
			_, err := off.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			srv.silent.Store(true)
			clk.Advance(2 * time.Second)
			_, err = off.LookupSRV(ctx, name)
			Expect(err).To(HaveOccurred())
		}, SpecTimeout(10*time.Second))
	})

	It("can run without a cache", func(ctx SpecContext) {
		nc := pool.NewDNSResolver(srv.Addr, pool.WithCacheSize(0))
		for range 2 {
			_, err := nc.LookupSRV(ctx, "_sip._udp.pcscf.ims.test")
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(nc.Queries()).To(BeEquivalentTo(2))
	}, SpecTimeout(5*time.Second))

	Describe("Locate (RFC 3263 §4.2)", func() {
		It("uses the per-host SRV record for a URI without port", func(ctx SpecContext) {
			ts, err := pool.Locate(ctx, r, "pcscf1.ims.test", 0)
			Expect(err).NotTo(HaveOccurred())
			Expect(ts).To(ConsistOf(perHost(pcscf1, pcscf2, pcscf3)))
		}, SpecTimeout(5*time.Second))

		It("skips SRV for a URI with an explicit port", func(ctx SpecContext) {
			ts, err := pool.Locate(ctx, r, "pcscf1.ims.test", 5999)
			Expect(err).NotTo(HaveOccurred())
			Expect(ts).To(Equal([]pool.Target{{Name: "pcscf1.ims.test", Addr: "127.0.0.1:5999"}}))
			Expect(srv.Seen()).To(Equal([]string{"udp A pcscf1.ims.test."}))
		}, SpecTimeout(5*time.Second))

		It("falls back to A and port 5060 when there is no SRV record", func(ctx SpecContext) {
			srv.Zone("hss.ims.test. 1 IN A 127.0.0.9")
			ts, err := pool.Locate(ctx, r, "hss.ims.test", 0)
			Expect(err).NotTo(HaveOccurred())
			Expect(ts).To(Equal([]pool.Target{{Name: "hss.ims.test", Addr: "127.0.0.9:5060"}}))
		}, SpecTimeout(5*time.Second))

		It("uses an IP literal directly", func(ctx SpecContext) {
			ts, err := pool.Locate(ctx, r, "127.0.0.1", 5061)
			Expect(err).NotTo(HaveOccurred())
			Expect(ts).To(Equal([]pool.Target{{Name: "127.0.0.1", Addr: "127.0.0.1:5061"}}))
			Expect(r.Queries()).To(BeZero())
		}, SpecTimeout(5*time.Second))
	})
})

var _ = Describe("StaticResolver", Label("unit"), func() {
	It("serves what it was given and ErrNotFound otherwise", func() {
		ctx := context.Background()
		r := pool.NewStaticResolver().
			SetSRV("_sip._udp.pcscf1.ims.test.", perHost(pcscf1, pcscf2, pcscf3)...).
			SetHost("PCSCF1.ims.test", "127.0.0.1")
		ts, err := r.LookupSRV(ctx, "_sip._udp.pcscf1.ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(ts).To(Equal(perHost(pcscf1, pcscf2, pcscf3)))
		ts[0].Addr = "mutated"
		again, _ := r.LookupSRV(ctx, "_sip._udp.pcscf1.ims.test")
		Expect(again[0].Addr).To(Equal(pcscf1.Addr))

		ip, err := r.LookupHost(ctx, "pcscf1.ims.test.")
		Expect(err).NotTo(HaveOccurred())
		Expect(ip).To(Equal("127.0.0.1"))

		_, err = r.LookupSRV(ctx, "_sip._udp.nobody.ims.test")
		Expect(err).To(MatchError(pool.ErrNotFound))
		_, err = r.LookupHost(ctx, "nobody.ims.test")
		Expect(err).To(MatchError(pool.ErrNotFound))

		r.SetSRV("_sip._udp.pcscf1.ims.test")
		_, err = r.LookupSRV(ctx, "_sip._udp.pcscf1.ims.test")
		Expect(err).To(MatchError(pool.ErrNotFound))
	})
})
