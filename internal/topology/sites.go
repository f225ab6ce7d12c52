package topology

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultSite is the site of every node of a topology without sites.
const DefaultSite = "default"

// SiteTargetPrefix marks a site in a fault target: "site:south".
const SiteTargetPrefix = "site:"

// Site is one named site (a data centre) and the nodes placed in it. A pool member is placed by its name in
// Nodes (pcscf3) or by its index in PCSCF/SCSCF (3); the standby of an active-standby member goes with its member
// unless it is named itself (pcscf3b).
type Site struct {
	Name  string   `yaml:"name"`
	Nodes []string `yaml:"nodes,omitempty"`
	PCSCF []int    `yaml:"pcscf,omitempty"`
	SCSCF []int    `yaml:"scscf,omitempty"`
}

// Link is the network between two sites. Its impairments are parsed and validated here; applying them to packets
// needs the network-namespace backend (docs/topology.md, "Sites"). Zero values: no impairment.
type Link struct {
	// Between names the two sites.
	Between []string `yaml:"between"`
	// Delay is the one-way delay added in each direction; Jitter its variation (± jitter).
	Delay  time.Duration `yaml:"delay,omitempty"`
	Jitter time.Duration `yaml:"jitter,omitempty"`
	// Loss is the share of packets dropped in each direction, in percent (0..100).
	Loss float64 `yaml:"loss,omitempty"`
	// RateKbit caps the bandwidth in each direction, kbit/s (0 = unlimited).
	RateKbit int `yaml:"rate_kbit,omitempty"`
}

// SiteNames returns the names of the sites in the file's order ([DefaultSite] without sites).
func (t *Topology) SiteNames() []string {
	if len(t.Sites) == 0 {
		return []string{DefaultSite}
	}
	out := make([]string, 0, len(t.Sites))
	for _, s := range t.Sites {
		out = append(out, s.Name)
	}
	return out
}

// siteMap maps every node name to its site. It expects a valid topology; nodes that no site places are absent
// (Validate reports them).
func (t *Topology) siteMap() map[string]string {
	m := map[string]string{}
	nodes := t.Nodes()
	if len(t.Sites) == 0 {
		for _, n := range nodes {
			m[n.Name] = DefaultSite
		}
		return m
	}
	for _, s := range t.Sites {
		for _, name := range s.Nodes {
			m[name] = s.Name
		}
		for _, k := range s.PCSCF {
			m[MemberName(KindPCSCF, k)] = s.Name
		}
		for _, k := range s.SCSCF {
			m[MemberName(KindSCSCF, k)] = s.Name
		}
	}
	for _, n := range nodes { // standbys not named follow their member
		if n.Standby {
			if _, ok := m[n.Name]; !ok {
				if s, ok := m[MemberName(Kind(n.Pool), n.Index)]; ok {
					m[n.Name] = s
				}
			}
		}
	}
	return m
}

// Site returns the site of a node ("" when the topology has no such node).
func (t *Topology) Site(node string) string {
	if _, ok := t.Node(node); !ok {
		return ""
	}
	return t.siteMap()[node]
}

// SiteNodes returns the names of the nodes of a site, in Nodes order (nil when there is no such site).
func (t *Topology) SiteNodes(site string) []string {
	m := t.siteMap()
	var out []string
	for _, n := range t.Nodes() {
		if m[n.Name] == site {
			out = append(out, n.Name)
		}
	}
	return out
}

// Links returns the links between sites (nil without sites).
func (t *Topology) Links() []Link { return slices.Clone(t.LinksBetween) }

// LinkBetween returns the link between two sites, if there is one.
func (t *Topology) LinkBetween(a, b string) (Link, bool) {
	for _, l := range t.LinksBetween {
		if len(l.Between) == 2 && (l.Between[0] == a && l.Between[1] == b || l.Between[0] == b && l.Between[1] == a) {
			return l, true
		}
	}
	return Link{}, false
}

// Target resolves a fault target to node names: a node (pcscf1), a pool (pcscf, scscf: every member, standbys
// included) or a site (site:south). false when it names none of these.
func (t *Topology) Target(target string) ([]string, bool) {
	if site, ok := strings.CutPrefix(target, SiteTargetPrefix); ok {
		if !slices.Contains(t.SiteNames(), site) {
			return nil, false
		}
		nodes := t.SiteNodes(site)
		return nodes, len(nodes) > 0
	}
	if _, ok := t.Node(target); ok {
		return []string{target}, true
	}
	if k := Kind(target); k == KindPCSCF || k == KindSCSCF {
		var out []string
		for _, n := range t.NodesOfKind(k) {
			out = append(out, n.Name)
		}
		return out, len(out) > 0
	}
	return nil, false
}

// TargetNames lists what a fault target may name, for error messages: nodes, pools and sites.
func (t *Topology) TargetNames() []string {
	var out []string
	for _, n := range t.Nodes() {
		out = append(out, n.Name)
	}
	out = append(out, string(KindPCSCF), string(KindSCSCF))
	for _, s := range t.SiteNames() {
		out = append(out, SiteTargetPrefix+s)
	}
	return out
}

// validateSites checks sites and links: names are host labels and unique, every node is in exactly one site,
// pool indices exist, links join two different sites once, impairments are in range.
func (v *validator) sites(t *Topology) {
	if len(t.Sites) == 0 {
		if len(t.LinksBetween) > 0 {
			v.add("links", "links need sites (without sites every node is in site %q)", DefaultSite)
		}
		return
	}
	nodes := t.Nodes()
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.Name] = true
	}
	placed := map[string]string{} // node → field that placed it
	siteIdx := map[string]int{}
	place := func(field, node string) {
		if prev, dup := placed[node]; dup {
			v.add(field, "%s is already placed by %s (each node is in exactly one site)", node, prev)
			return
		}
		placed[node] = field
	}
	for i, s := range t.Sites {
		prefix := fmt.Sprintf("sites[%d]", i)
		v.label(prefix+".name", s.Name)
		if j, dup := siteIdx[s.Name]; dup {
			v.add(prefix+".name", "%q is also the name of sites[%d]", s.Name, j)
		}
		siteIdx[s.Name] = i
		for j, name := range s.Nodes {
			f := fmt.Sprintf("%s.nodes[%d]", prefix, j)
			if !known[name] {
				v.add(f, "no node named %q in this topology", name)
				continue
			}
			place(f, name)
		}
		for _, p := range []struct {
			kind Kind
			idx  []int
			size int
		}{{KindPCSCF, s.PCSCF, t.Pools.PCSCF.Size}, {KindSCSCF, s.SCSCF, t.Pools.SCSCF.Size}} {
			for j, k := range p.idx {
				f := fmt.Sprintf("%s.%s[%d]", prefix, p.kind, j)
				if k < 1 || k > p.size {
					v.add(f, "%d: the %s pool has members 1..%d", k, p.kind, p.size)
					continue
				}
				place(f, MemberName(p.kind, k))
			}
		}
	}
	m := t.siteMap()
	for _, n := range nodes {
		if _, ok := m[n.Name]; !ok {
			v.add("sites", "node %s is in no site (every node must be in exactly one)", n.Name)
		}
	}
	seen := map[[2]string]int{}
	for i, l := range t.LinksBetween {
		prefix := fmt.Sprintf("links[%d]", i)
		if len(l.Between) != 2 {
			v.add(prefix+".between", "want two sites, have %d", len(l.Between))
		} else {
			a, b := l.Between[0], l.Between[1]
			for j, s := range l.Between {
				if _, ok := siteIdx[s]; !ok {
					v.add(fmt.Sprintf("%s.between[%d]", prefix, j), "no site named %q", s)
				}
			}
			if a == b {
				v.add(prefix+".between", "%q twice: a link joins two different sites", a)
			}
			key := [2]string{min(a, b), max(a, b)}
			if j, dup := seen[key]; dup {
				v.add(prefix+".between", "links[%d] already joins %s and %s", j, a, b)
			}
			seen[key] = i
		}
		if l.Delay < 0 {
			v.add(prefix+".delay", "%s: must not be negative", l.Delay)
		}
		if l.Jitter < 0 {
			v.add(prefix+".jitter", "%s: must not be negative", l.Jitter)
		}
		if l.Loss < 0 || l.Loss > 100 || l.Loss != l.Loss {
			v.add(prefix+".loss", "%v: must be a percentage between 0 and 100", l.Loss)
		}
		if l.RateKbit < 0 {
			v.add(prefix+".rate_kbit", "%d: must not be negative (0 = unlimited)", l.RateKbit)
		}
	}
}
