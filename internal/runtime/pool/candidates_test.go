package pool_test

import (
	"log/slog"
	"slices"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/pool"
)

var _ = Describe("Candidates", Label("unit"), func() {
	var h *pool.Health
	BeforeEach(func() {
		// Probing configured but Run not started: only passive detection changes states here.
		var err error
		h, err = pool.NewHealth(pool.DefaultHealthConfig(), newFakeProber(),
			pool.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
		Expect(err).NotTo(HaveOccurred())
	})
	record := perHost(pcscf1, pcscf2, pcscf3) // _sip._udp.pcscf1.ims.test

	It("keeps RFC 2782 order when every peer is up", func() {
		for seed := range uint64(20) {
			c := h.Candidates(record, seeded(seed), nil)
			Expect(c).To(HaveLen(3))
			Expect(c[0].Name).To(Equal("pcscf1.ims.test"))
		}
	})

	It("moves to the next priority when every target of a priority is down", func() {
		h.TransactionFailed(record[0], pool.ReasonTimeout)
		seen := map[string]bool{}
		for seed := range uint64(50) {
			c := h.Candidates(record, seeded(seed), nil)
			Expect(names(c)).To(ConsistOf("pcscf2.ims.test", "pcscf3.ims.test"))
			seen[c[0].Name] = true
		}
		Expect(seen).To(HaveLen(2), "the backups share the load")
	})

	It("skips down targets within a priority", func() {
		h.TransactionFailed(pcscf2, pool.StatusReason(503))
		Expect(names(h.Candidates(record, seeded(1), nil))).To(Equal([]string{"pcscf1.ims.test", "pcscf3.ims.test"}))
	})

	It("skips targets already tried (by Addr)", func() {
		tried := map[string]bool{pcscf1.Addr: true}
		c := h.Candidates(record, seeded(3), tried)
		Expect(names(c)).To(ConsistOf("pcscf2.ims.test", "pcscf3.ims.test"))
		tried[c[0].Addr] = true
		h.TransactionFailed(c[0], pool.ReasonTimeout)
		Expect(h.Candidates(record, seeded(3), tried)).To(Equal([]pool.Target{c[1]}))
		tried[c[1].Addr] = true
		Expect(h.Candidates(record, seeded(3), tried)).To(BeEmpty())
	})

	It("returns nothing when every target is down and panic routing is off (the default)", func() {
		cfg := pool.DefaultHealthConfig()
		cfg.Panic = false
		h, err := pool.NewHealth(cfg, newFakeProber(), pool.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
		Expect(err).NotTo(HaveOccurred())
		for _, t := range record {
			h.TransactionFailed(t, pool.ReasonTransportError)
		}
		c := h.Candidates(record, seeded(4), nil)
		Expect(c).NotTo(BeNil())
		Expect(c).To(BeEmpty())
		Expect(h.Candidates(nil, nil, nil)).To(BeEmpty())
		Expect(h.PanicRequests()).To(BeZero())
	})

	It("routes in panic when every target is down: all of them, in order, those tried left out, and counted", func() {
		cfg := pool.DefaultHealthConfig()
		cfg.Panic = true
		h, err := pool.NewHealth(cfg, newFakeProber(), pool.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
		Expect(err).NotTo(HaveOccurred())
		for _, t := range record {
			h.TransactionFailed(t, pool.ReasonTimeout)
		}
		for seed := range uint64(20) {
			c := h.Candidates(record, seeded(seed), nil)
			Expect(c).To(HaveLen(3))
			Expect(c[0].Name).To(Equal("pcscf1.ims.test"), "RFC 2782 order, as if every member were up")
			Expect(names(c[1:])).To(ConsistOf("pcscf2.ims.test", "pcscf3.ims.test"))
		}
		c := h.Candidates(record, seeded(1), map[string]bool{pcscf1.Addr: true})
		Expect(names(c)).To(ConsistOf("pcscf2.ims.test", "pcscf3.ims.test"))
		Expect(h.Candidates(record, seeded(1), map[string]bool{pcscf1.Addr: true, pcscf2.Addr: true,
			pcscf3.Addr: true})).To(BeEmpty(), "every member tried: nothing left")
		Expect(h.PanicRequests()).To(BeEquivalentTo(21))

		// A member up, already tried (it failed the request): no panic, the dead ones are not tried.
		h3, err := pool.NewHealth(pool.HealthConfig{Panic: true}, newFakeProber())
		Expect(err).NotTo(HaveOccurred())
		h3.TransactionFailed(pcscf1, pool.ReasonTimeout)
		h3.TransactionFailed(pcscf2, pool.ReasonTimeout)
		Expect(h3.Candidates(record, seeded(1), map[string]bool{pcscf3.Addr: true})).To(BeEmpty())
		Expect(h3.PanicRequests()).To(BeZero())

		// One member up again: no panic, the down ones are skipped as before.
		h2, err := pool.NewHealth(pool.HealthConfig{Panic: true}, newFakeProber())
		Expect(err).NotTo(HaveOccurred())
		h2.TransactionFailed(pcscf1, pool.ReasonTimeout)
		h2.TransactionFailed(pcscf2, pool.ReasonTimeout)
		Expect(names(h2.Candidates(record, seeded(1), nil))).To(Equal([]string{"pcscf3.ims.test"}))
		Expect(h2.PanicRequests()).To(BeZero())
	})

	It("spreads a dead member's share over the survivors by weight", func() {
		in := []pool.Target{tgt("a", 1, 10), tgt("b", 1, 20), tgt("c", 1, 30)}
		h.TransactionFailed(in[2], pool.ReasonTimeout)
		first := map[string]int{}
		rnd := seeded(5)
		const draws = 60_000
		for range draws {
			first[h.Candidates(in, rnd, nil)[0].Name]++
		}
		Expect(first).NotTo(HaveKey("c"))
		Expect(float64(first["a"]) / draws).To(BeNumerically("~", 1.0/3, 0.01))
	})

	It("does not modify its input", func() {
		in := slices.Clone(record)
		h.TransactionFailed(pcscf1, pool.ReasonTimeout)
		_ = h.Candidates(in, seeded(6), map[string]bool{pcscf2.Addr: true})
		Expect(in).To(Equal(record))
	})
})

// BenchmarkCandidates measures the per-request target walk: a per-host record of a pool of 3 with one member
// down, as after a P-CSCF failure.
func BenchmarkCandidates(b *testing.B) {
	for _, n := range []int{3, 8} {
		b.Run("pool="+itoa(n), func(b *testing.B) {
			h, err := pool.NewHealth(pool.DefaultHealthConfig(), newFakeProber(), pool.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			targets := make([]pool.Target, n)
			for i := range targets {
				targets[i] = pool.Target{Name: "pcscf" + itoa(i+1) + ".ims.test", Addr: "127.0.0.1:" + itoa(5061+i),
					Priority: 2, Weight: 10}
				h.Watch(targets[i])
			}
			targets[0].Priority = 1
			h.TransactionFailed(targets[0], pool.ReasonTimeout)
			rnd := seeded(1)
			tried := map[string]bool{}
			b.ReportAllocs()
			for b.Loop() {
				if c := h.Candidates(targets, rnd, tried); len(c) != n-1 {
					b.Fatalf("got %d candidates", len(c))
				}
			}
		})
	}
}
