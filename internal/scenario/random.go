package scenario

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/topology"
)

// RandomTargetPrefix starts a fault target whose victim is drawn from the run's seed: random:pcscf is one member
// of the P-CSCF pool.
const RandomTargetPrefix = "random:"

// randomMembers returns the members of the pool a random:<pool> target names, or why it names none.
func randomMembers(pool string, t *topology.Topology) ([]string, string) {
	k := topology.Kind(pool)
	if k != topology.KindPCSCF && k != topology.KindSCSCF {
		return nil, fmt.Sprintf("%q: a random target names a pool (%spcscf, %sscscf)", RandomTargetPrefix+pool,
			RandomTargetPrefix, RandomTargetPrefix)
	}
	var out []string
	for _, n := range t.NodesOfKind(k) {
		out = append(out, n.Name)
	}
	if len(out) == 0 {
		return nil, fmt.Sprintf("%q: the topology has no %s pool", RandomTargetPrefix+pool, pool)
	}
	slices.Sort(out)
	return out, ""
}

// faultRand is the random source of the i-th fault of a run: from the run's seed and the fault's index, so a
// fault's draw does not change when another fault is added or removed before it.
func faultRand(seed int64, i int) *rand.Rand {
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	h.Write([]byte("fault"))
	h.Write(b[:])
	k := h.Sum64()
	return rand.New(rand.NewPCG(uint64(seed)^k, k^0x9e3779b97f4a7c15))
}

// Resolve returns a copy of the scenario whose faults have their random parts drawn from the seed: a fault with
// jitter gets an instant uniform in [at, at+jitter) (whole milliseconds), a random:<pool> target one member of
// the pool, each member equally likely. The drawn fault keeps the planned target and instant in PlannedTarget
// and PlannedAt. Faults without jitter or random target are unchanged. The same seed draws the same faults,
// whatever the scheme of the pools (a comparison hits the same victim at the same instant in every scheme).
func (s *Scenario) Resolve(seed int64) *Scenario {
	out := *s
	out.Faults = slices.Clone(s.Faults)
	for i := range out.Faults {
		f := &out.Faults[i]
		pool, isRandom := strings.CutPrefix(f.Target, RandomTargetPrefix)
		if f.Jitter <= 0 && !isRandom || f.drawn {
			continue
		}
		r := faultRand(seed, i)
		f.PlannedAt = f.At
		if f.Jitter > 0 {
			ms := f.Jitter.Milliseconds()
			if ms < 1 {
				ms = 1
			}
			f.At += time.Duration(r.Int64N(ms)) * time.Millisecond
		}
		if isRandom {
			members, bad := randomMembers(pool, &out.Topology)
			if bad == "" {
				f.PlannedTarget = f.Target
				f.Target = members[r.IntN(len(members))]
				f.Nodes = []string{f.Target}
			}
		}
		f.drawn = true
	}
	return &out
}
