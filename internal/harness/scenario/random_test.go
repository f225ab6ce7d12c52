package scenario_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/scenario"
)

var _ = Describe("randomised faults", Label("unit"), func() {
	const doc = minimal + `faults:
  - {kind: kill, target: "random:pcscf", at: 20s, jitter: 1s}
  - {kind: pause, target: scscf1, at: 5s, for: 2s}
`
	parse := func() *scenario.Scenario {
		s, err := scenario.Parse([]byte(doc))
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	It("draws the instant in [at, at+jitter) and a member of the pool from the seed, the same for the same seed", func() {
		s := parse()
		Expect(s.Faults[0].Nodes).To(BeEmpty(), "nothing is drawn before the run")
		victims := map[string]int{}
		var earliest, latest time.Duration = time.Hour, 0
		for seed := int64(1); seed <= 300; seed++ {
			r := s.Resolve(seed)
			f := r.Faults[0]
			Expect(f.At).To(And(BeNumerically(">=", 20*time.Second), BeNumerically("<", 21*time.Second)))
			Expect(f.At % time.Millisecond).To(BeZero())
			Expect(f.Target).To(BeElementOf("pcscf1", "pcscf2", "pcscf3"))
			Expect(f.Nodes).To(Equal([]string{f.Target}))
			Expect(f.PlannedTarget).To(Equal("random:pcscf"))
			Expect(f.PlannedAt).To(Equal(20 * time.Second))
			Expect(f.String()).To(HavePrefix("kill " + f.Target + " at "))
			Expect(f.String()).To(ContainSubstring("(drawn from random:pcscf at 20s + up to 1s)"))
			again := s.Resolve(seed).Faults[0]
			Expect(again.Target).To(Equal(f.Target))
			Expect(again.At).To(Equal(f.At))
			Expect(r.Faults[1]).To(Equal(s.Faults[1]), "a fault without jitter or random target is left alone")
			victims[f.Target]++
			earliest, latest = min(earliest, f.At), max(latest, f.At)
		}
		Expect(s.Faults[0].Target).To(Equal("random:pcscf"), "the scenario itself is not changed")
		for _, n := range []string{"pcscf1", "pcscf2", "pcscf3"} {
			Expect(victims[n]).To(BeNumerically("~", 100, 35), "each member about a third of 300 seeds: %v", victims)
		}
		Expect(earliest).To(BeNumerically("<", 20*time.Second+50*time.Millisecond))
		Expect(latest).To(BeNumerically(">", 21*time.Second-50*time.Millisecond))
	})

	It("draws the same fault whatever the pools' scheme (a comparison hits the same victim in every scheme)", func() {
		s := parse()
		other := *s
		other.Topology.Pools.PCSCF.Scheme = "load-sharing"
		nplus1 := *s
		nplus1.Topology.Pools.PCSCF.Scheme, nplus1.Topology.Pools.PCSCF.Size = "n-plus-1", 4 // 3 active + the spare
		standby := *s
		standby.Topology.Pools.PCSCF.Scheme = "active-standby" // pcscf1b…3b besides
		for seed := int64(1); seed <= 20; seed++ {
			want := s.Resolve(seed).Faults[0]
			for _, o := range []scenario.Scenario{other, nplus1, standby} {
				Expect(o.Resolve(seed).Faults[0].Target).To(Equal(want.Target), "%s, seed %d",
					o.Topology.Pools.PCSCF.Scheme, seed)
				Expect(o.Resolve(seed).Faults[0].At).To(Equal(want.At))
			}
		}
	})

	It("never draws an N+1 spare or a 1+1 standby: they serve nobody before a failure", func() {
		s := parse()
		s.Topology.Pools.PCSCF.Scheme, s.Topology.Pools.PCSCF.Size = "n-plus-1", 4
		for seed := int64(1); seed <= 100; seed++ {
			Expect(s.Resolve(seed).Faults[0].Target).To(BeElementOf("pcscf1", "pcscf2", "pcscf3"))
		}
	})
})

var _ = Describe("backup targets", Label("unit"), func() {
	const doc = minimal + `faults:
  - {kind: kill, target: pcscf1, at: 10s}
  - {kind: kill, target: "backup:pcscf1", at: 11s}
`
	backup := func(scheme string, size int) scenario.Fault {
		GinkgoHelper()
		s, err := scenario.Parse([]byte(doc))
		Expect(err).NotTo(HaveOccurred())
		s.Topology.Pools.PCSCF.Scheme = scheme
		if size > 0 {
			s.Topology.Pools.PCSCF.Size = size
		}
		return s.Resolve(7).Faults[1]
	}

	It("names the node that takes over the member's users under each scheme", func() {
		Expect(backup("quasi-pool", 0).Target).To(Equal("pcscf2"))
		Expect(backup("load-sharing", 0).Target).To(Equal("pcscf2"))
		Expect(backup("n-plus-1", 4).Target).To(Equal("pcscf4"), "the spare")
		Expect(backup("active-standby", 0).Target).To(Equal("pcscf1b"), "the standby")
		Expect(backup("mutual", 4).Target).To(Equal("pcscf2"), "the partner")
		f := backup("n-plus-1", 4)
		Expect(f.Nodes).To(Equal([]string{"pcscf4"}))
		Expect(f.PlannedTarget).To(Equal("backup:pcscf1"))
		Expect(f.At).To(Equal(11*time.Second), "no jitter: the instant is the file's")
		Expect(f.String()).To(ContainSubstring("drawn from backup:pcscf1 at 11s"))
	})

	It("refuses a backup of what is not an active member", func() {
		_, err := scenario.Parse([]byte(minimal + "faults:\n  - {kind: kill, target: \"backup:icscf\", at: 5s}\n"))
		Expect(err).To(MatchError(ContainSubstring(`faults[0].target: "backup:icscf": a backup target names an active P- or S-CSCF member`)))
	})
})
