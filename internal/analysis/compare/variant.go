// Package compare runs one scenario under several protection schemes (and parameter sweeps of it) and writes the
// comparison: the measured version of the study's Table 1 (SPEC §1), plots that compare the schemes, and the raw
// data of every run next to it. docs/compare.md describes the commands, the variants and every column.
package compare

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
)

// Variant is a protection scheme plus options, written "<scheme>[+<option>…]", e.g. "load-sharing+ignore-504".
// The scheme is set on both pools of a copy of the scenario; the options change the phones or the lab (Options).
type Variant struct {
	Name    string   // as written, and the name of its run directory
	Scheme  string   // one of topology.Schemes
	Options []string // in the order written
}

// Option is a variant option: what it does to the scenario.
type Option struct {
	Name string
	Doc  string
	// Apply changes the scenario copy of the variant; nil: the option is known but not supported by this build.
	Apply func(*scenario.Scenario) error
}

// options is the registry of variant options.
var options = map[string]Option{
	"ignore-504": {Name: "ignore-504", Doc: "the phones ignore a 504 with the 3GPP restoration body (they only " +
		"recover at their next periodic re-registration)", Apply: phones504("ignore")},
	"reregister-504": {Name: "reregister-504", Doc: "the phones re-register at once on a 504 with the 3GPP " +
		"restoration body (as a 3GPP phone should)", Apply: phones504("reregister")},
}

// phones504 sets the phones' reaction to a 504 restoration answer (the scenario's traffic.on_restoration_504,
// whose default is reregister).
func phones504(mode string) func(*scenario.Scenario) error {
	return func(sc *scenario.Scenario) error {
		return setOn504(sc, mode)
	}
}

// OptionNames lists the variant options, sorted.
func OptionNames() []string {
	var names []string
	for n := range options {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// OptionDoc returns what an option does ("" for an unknown one).
func OptionDoc(name string) string { return options[name].Doc }

// ParseVariant reads "<scheme>[+<option>…]".
func ParseVariant(s string) (Variant, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, "+")
	v := Variant{Name: s, Scheme: parts[0]}
	if !slices.Contains(topology.Schemes, v.Scheme) {
		return v, fmt.Errorf("compare: variant %q: %q is not a scheme (%s)", s, v.Scheme,
			strings.Join(topology.Schemes, ", "))
	}
	for _, o := range parts[1:] {
		if _, ok := options[o]; !ok {
			return v, fmt.Errorf("compare: variant %q: %q is not an option (%s)", s, o,
				strings.Join(OptionNames(), ", "))
		}
		if slices.Contains(v.Options, o) {
			return v, fmt.Errorf("compare: variant %q: option %q twice", s, o)
		}
		v.Options = append(v.Options, o)
	}
	return v, nil
}

// ParseVariants reads a comma-separated list of variants; names must be distinct.
func ParseVariants(list string) ([]Variant, error) {
	var out []Variant
	seen := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		v, err := ParseVariant(s)
		if err != nil {
			return nil, err
		}
		if seen[v.Name] {
			return nil, fmt.Errorf("compare: variant %q given twice", v.Name)
		}
		seen[v.Name] = true
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("compare: no scheme given")
	}
	return out, nil
}

// Members is the number of processes a pool of the scheme runs for n active members: N+1 for n-plus-1 (the last
// member is the cold spare), 2N for active-standby (each member has a standby process), N otherwise. A comparison
// keeps the number of active members equal across schemes, so every scheme carries the same load per active
// member.
func Members(scheme string, n int) int {
	switch scheme {
	case topology.SchemeNPlus1:
		return n + 1
	case topology.SchemeActiveStandby:
		return 2 * n
	}
	return n
}

// PoolSize is the topology's pools.<pool>.size for n active members: it counts the n-plus-1 spare, not the
// active-standby standbys (the topology adds those as their own nodes, docs/schemes.md).
func PoolSize(scheme string, n int) int {
	if scheme == topology.SchemeNPlus1 {
		return n + 1
	}
	return n
}

// SpareCapacity is the share of a pool's members that are idle in normal operation: 1/(N+1) for n-plus-1, 1/2
// for active-standby, 0 for the schemes in which every member serves traffic (mutual too: its headroom is the
// partner's whole load, which the study calls redundancy 1×, not idle members).
func SpareCapacity(scheme string, n int) float64 {
	m := Members(scheme, n)
	if m == 0 {
		return 0
	}
	return float64(m-n) / float64(m)
}

// StateReplicated tells whether the scheme copies registration state between members.
func StateReplicated(scheme string) bool { return topology.SchemeReplicates(scheme) }

// Apply returns a copy of sc set up for the variant with n active members per pool (0: keep the scenario's
// pool sizes as the active members): both pools get the scheme and PoolSize(scheme, n) members, then the options
// are applied. The copy is validated.
func (v Variant) Apply(sc *scenario.Scenario, n int) (*scenario.Scenario, error) {
	c := Clone(sc)
	for _, p := range []*topology.Pool{&c.Topology.Pools.PCSCF, &c.Topology.Pools.SCSCF} {
		active := n
		if active == 0 {
			active = p.Size
		}
		if v.Scheme == topology.SchemeMutual && active%2 != 0 {
			return nil, fmt.Errorf("compare: %s: %d active members per pool: mutual pairs them (1+2, 3+4, …), "+
				"give an even pool size (imslab compare --pool-size 4)", v.Name, active)
		}
		p.Scheme = v.Scheme
		p.Size = PoolSize(v.Scheme, active)
		if len(p.Addresses) > 0 && len(p.Addresses) < p.Size {
			return nil, fmt.Errorf("compare: %s: the pool lists %d addresses, the scheme needs %d members",
				v.Name, len(p.Addresses), p.Size)
		}
	}
	for _, o := range v.Options {
		if err := options[o].Apply(c); err != nil {
			return nil, fmt.Errorf("compare: %s: option %s: %w", v.Name, o, err)
		}
	}
	if err := c.Validate(); err != nil {
		if !relocatePools(c) {
			return nil, fmt.Errorf("compare: %s: %w", v.Name, err)
		}
		if err2 := c.Validate(); err2 != nil {
			return nil, fmt.Errorf("compare: %s: %w", v.Name, err)
		}
	}
	return c, nil
}

// Port ranges a pool moves to when its members (with spares and standbys) outgrow the gaps of the default port
// plan (pcscf 5061…, icscf 5070, scscf 5081…): up to 16 processes each.
const (
	relocatedPCSCFBase = 5101
	relocatedSCSCFBase = 5201
)

// relocatePools moves pools laid out with base_port to relocatedPCSCFBase / relocatedSCSCFBase, so that e.g.
// active-standby with 8 members (16 processes) fits; false when a pool has per-member addresses instead.
func relocatePools(sc *scenario.Scenario) bool {
	p, s := &sc.Topology.Pools.PCSCF, &sc.Topology.Pools.SCSCF
	if p.BasePort == 0 || s.BasePort == 0 || p.BasePort == relocatedPCSCFBase {
		return false
	}
	p.BasePort, s.BasePort = relocatedPCSCFBase, relocatedSCSCFBase
	return true
}

// Clone copies a scenario deeply enough that changing the copy's topology, traffic, faults or expectations
// leaves the original alone.
func Clone(sc *scenario.Scenario) *scenario.Scenario {
	c := *sc
	c.Topology.Pools.PCSCF.Addresses = slices.Clone(sc.Topology.Pools.PCSCF.Addresses)
	c.Topology.Pools.SCSCF.Addresses = slices.Clone(sc.Topology.Pools.SCSCF.Addresses)
	c.Faults = slices.Clone(sc.Faults)
	c.Expectations = slices.Clone(sc.Expectations)
	if sc.Traffic.Mix != nil {
		m := *sc.Traffic.Mix
		c.Traffic.Mix = &m
	}
	c.Topology.Overrides = maps.Clone(sc.Topology.Overrides)
	return &c
}
