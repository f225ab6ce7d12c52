package pool_test

import (
	"math/rand/v2"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/pool"
)

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

func names(ts []pool.Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func tgt(name string, prio, weight uint16) pool.Target {
	return pool.Target{Name: name, Addr: name + ":5060", Priority: prio, Weight: weight}
}

// firstFreq orders ts draws times and returns how often each name came first.
func firstFreq(ts []pool.Target, draws int, rnd *rand.Rand) map[string]float64 {
	n := map[string]int{}
	for range draws {
		n[pool.Order(ts, rnd)[0].Name]++
	}
	f := map[string]float64{}
	for k, v := range n {
		f[k] = float64(v) / float64(draws)
	}
	return f
}

var _ = Describe("Order (RFC 2782)", Label("unit"), func() {
	const draws = 100_000

	It("keeps priority groups apart, lowest first, and returns a permutation", func() {
		rnd := seeded(1)
		for range 2000 {
			in := make([]pool.Target, 1+rnd.IntN(8))
			for i := range in {
				in[i] = tgt(string(rune('a'+i)), uint16(rnd.IntN(3)), uint16(rnd.IntN(4)*10))
			}
			out := pool.Order(in, rnd)
			Expect(out).To(ConsistOf(in))
			Expect(slices.IsSortedFunc(out, func(a, b pool.Target) int { return int(a.Priority) - int(b.Priority) })).
				To(BeTrue(), "priorities interleaved: %v", out)
		}
	})

	It("does not modify its input and is reproducible with a seeded rand", func() {
		in := []pool.Target{tgt("a", 2, 10), tgt("b", 1, 10), tgt("c", 1, 20), tgt("d", 2, 0)}
		keep := slices.Clone(in)
		first := pool.Order(in, seeded(42))
		Expect(in).To(Equal(keep))
		for range 20 {
			Expect(pool.Order(in, seeded(42))).To(Equal(first))
		}
	})

	It("picks the first target with probability weight/sum", func() {
		in := []pool.Target{tgt("a", 1, 10), tgt("b", 1, 20), tgt("c", 1, 70)}
		f := firstFreq(in, draws, seeded(7))
		Expect(f["a"]).To(BeNumerically("~", 0.10, 0.01))
		Expect(f["b"]).To(BeNumerically("~", 0.20, 0.01))
		Expect(f["c"]).To(BeNumerically("~", 0.70, 0.01))
	})

	It("orders a whole group by successive weighted draws", func() {
		in := []pool.Target{tgt("a", 1, 10), tgt("b", 1, 20), tgt("c", 1, 70)}
		w := map[string]float64{"a": 10, "b": 20, "c": 70}
		count := map[string]int{}
		rnd := seeded(8)
		for range draws {
			o := pool.Order(in, rnd)
			count[o[0].Name+o[1].Name+o[2].Name]++
		}
		Expect(count).To(HaveLen(6))
		for perm, n := range count {
			x, y := string(perm[0]), string(perm[1])
			want := w[x] / 100 * w[y] / (100 - w[x])
			Expect(float64(n)/draws).To(BeNumerically("~", want, 0.01), perm)
		}
	})

	It("gives weight-0 targets a small chance (1/(sum+1)) while weighted ones remain", func() {
		in := []pool.Target{tgt("zero", 1, 0), tgt("ten", 1, 10)}
		f := firstFreq(in, draws, seeded(9))
		Expect(f["zero"]).To(BeNumerically("~", 1.0/11, 0.01))
	})

	It("shuffles a group whose weights are all 0 uniformly", func() {
		in := []pool.Target{tgt("a", 1, 0), tgt("b", 1, 0), tgt("c", 1, 0)}
		f := firstFreq(in, draws, seeded(10))
		for _, n := range []string{"a", "b", "c"} {
			Expect(f[n]).To(BeNumerically("~", 1.0/3, 0.01), n)
		}
	})

	It("puts the host of a per-host record first and shares its backups evenly", func() {
		in := perHost(pcscf1, pcscf2, pcscf3)
		second := map[string]int{}
		rnd := seeded(11)
		for range draws {
			o := pool.Order(in, rnd)
			Expect(o[0].Name).To(Equal("pcscf1.ims.test"))
			second[o[1].Name]++
		}
		Expect(float64(second["pcscf2.ims.test"]) / draws).To(BeNumerically("~", 0.5, 0.01))
	})

	It("handles empty and single-target input", func() {
		Expect(pool.Order(nil, nil)).To(BeEmpty())
		Expect(pool.Order([]pool.Target{pcscf1}, nil)).To(Equal([]pool.Target{pcscf1}))
	})
})

var _ = Describe("HostPort", Label("unit"), func() {
	DescribeTable("splits URIs and host[:port]",
		func(in, host string, port int) {
			h, p, err := pool.HostPort(in)
			Expect(err).NotTo(HaveOccurred())
			Expect(h).To(Equal(host))
			Expect(p).To(Equal(port))
		},
		Entry("Record-Route without port", "sip:pcscf1.ims.test;lr", "pcscf1.ims.test", 0),
		Entry("Path in angle brackets", "<sip:term@pcscf1.ims.test;lr>", "pcscf1.ims.test", 0),
		Entry("Service-Route with orig", "<sip:orig@scscf2.ims.test;lr;orig;restore=1>", "scscf2.ims.test", 0),
		Entry("explicit port", "sip:orig@scscf1.ims.test:5081;lr", "scscf1.ims.test", 5081),
		Entry("sips", "sips:bob@ims.test", "ims.test", 0),
		Entry("bare host", "pcscf1.ims.test", "pcscf1.ims.test", 0),
		Entry("bare host:port", "127.0.0.1:5061", "127.0.0.1", 5061),
		Entry("IPv6 with port", "[::1]:5060", "::1", 5060),
		Entry("bare IPv6", "::1", "::1", 0),
	)
	DescribeTable("rejects",
		func(in string) {
			_, _, err := pool.HostPort(in)
			Expect(err).To(HaveOccurred())
		},
		Entry("empty", ""),
		Entry("unclosed bracket", "<sip:pcscf1.ims.test"),
		Entry("no host", "sip:"),
		Entry("bad port", "pcscf1.ims.test:abc"),
		Entry("port out of range", "pcscf1.ims.test:70000"),
	)
	It("builds SRV names", func() {
		Expect(pool.SIPName("pcscf1.ims.test")).To(Equal("_sip._udp.pcscf1.ims.test"))
	})
})
