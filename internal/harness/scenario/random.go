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

// RandomTargetPrefix starts a fault target whose victim is drawn from the run's seed: random:pcscf is one active
// member of the P-CSCF pool (an N+1 spare or a 1+1 standby serves nobody before a failure and is never drawn, so
// schemes with the same number of active members draw the same victim from the same seed).
const RandomTargetPrefix = "random:"

// BackupTargetPrefix starts a fault target that names the node that takes over a member's users under the pool's
// scheme: backup:pcscf1 is the spare for n-plus-1, pcscf1b for active-standby, the partner (pcscf2) for mutual and
// the next active member (pcscf2; pcscfN's is pcscf1) in the schemes where every survivor takes a share. It lets
// one scenario express "the backup fails too" (a second fault during a takeover, a spare that is already dead)
// across schemes (Table 1's switchover risk, docs/scenarios.md).
const BackupTargetPrefix = "backup:"

// backupOf returns the node backup:<member> names under the topology's schemes, or why there is none.
func backupOf(member string, t *topology.Topology) (string, string) {
	n, ok := t.Node(member)
	if !ok || (n.Kind != topology.KindPCSCF && n.Kind != topology.KindSCSCF) || n.Spare || n.Standby {
		return "", fmt.Sprintf("%q: a backup target names an active P- or S-CSCF member (%spcscf1)",
			BackupTargetPrefix+member, BackupTargetPrefix)
	}
	p := t.Pools.PCSCF
	if n.Kind == topology.KindSCSCF {
		p = t.Pools.SCSCF
	}
	active := 0
	spare := ""
	for _, m := range t.NodesOfKind(n.Kind) {
		switch {
		case m.Spare:
			spare = m.Name
		case !m.Standby:
			active++
		}
	}
	var b string
	switch p.SchemeOf() {
	case topology.SchemeNPlus1:
		b = spare
	case topology.SchemeActiveStandby:
		b = topology.StandbyName(n.Kind, n.Index)
	case topology.SchemeMutual:
		b = topology.MemberName(n.Kind, topology.MutualPartner(n.Index))
	default:
		if active > 1 {
			b = topology.MemberName(n.Kind, n.Index%active+1)
		}
	}
	if _, ok := t.Node(b); b == "" || !ok {
		return "", fmt.Sprintf("%q: %s has no backup under the %s scheme with %d active members",
			BackupTargetPrefix+member, member, p.SchemeOf(), active)
	}
	return b, ""
}

// randomMembers returns the members of the pool a random:<pool> target names, or why it names none.
func randomMembers(pool string, t *topology.Topology) ([]string, string) {
	k := topology.Kind(pool)
	if k != topology.KindPCSCF && k != topology.KindSCSCF {
		return nil, fmt.Sprintf("%q: a random target names a pool (%spcscf, %sscscf)", RandomTargetPrefix+pool,
			RandomTargetPrefix, RandomTargetPrefix)
	}
	var out []string
	for _, n := range t.NodesOfKind(k) {
		if n.Spare || n.Standby {
			continue // not serving users before a failure: an N+1 spare, a 1+1 standby
		}
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
		if f.drawn {
			continue
		}
		backup := false
		if member, isBackup := strings.CutPrefix(f.Target, BackupTargetPrefix); isBackup {
			if b, bad := backupOf(member, &out.Topology); bad == "" {
				f.PlannedTarget, f.Target, f.Nodes = f.Target, b, []string{b}
				backup = true
			}
		}
		pool, isRandom := strings.CutPrefix(f.Target, RandomTargetPrefix)
		if f.Jitter <= 0 && !isRandom && !backup {
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
