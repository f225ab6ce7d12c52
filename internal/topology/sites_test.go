package topology_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
	"github.com/imslab/quasipool/topologies"
)

// fieldNames returns the fields named by the errors of a joined validation error.
func fieldNames(err error) []string {
	var out []string
	for _, fe := range fieldErrors(err) {
		out = append(out, fe.Field)
	}
	return out
}

var _ = Describe("Sites", Label("unit"), func() {
	It("puts every node of a topology without sites in site default", func() {
		t := topology.Default()
		Expect(t.SiteNames()).To(Equal([]string{topology.DefaultSite}))
		for _, n := range t.Nodes() {
			Expect(t.Site(n.Name)).To(Equal(topology.DefaultSite))
		}
		Expect(t.SiteNodes(topology.DefaultSite)).To(HaveLen(len(t.Nodes())))
		Expect(t.Links()).To(BeEmpty())
		b, err := t.Marshal()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).NotTo(ContainSubstring("sites"))
	})

	It("reads two-sites.yaml: pools of 4 over north and south, 20 ms between them", func() {
		t, err := topology.Parse(topologies.TwoSites)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.SiteNames()).To(Equal([]string{"north", "south"}))
		Expect(t.SiteNodes("north")).To(Equal([]string{"dnsd", "hss", "bac", "pcscf1", "pcscf2", "icscf", "scscf1", "scscf2"}))
		Expect(t.SiteNodes("south")).To(Equal([]string{"pcscf3", "pcscf4", "scscf3", "scscf4"}))
		Expect(t.Site("hss")).To(Equal("north"))
		Expect(t.Site("scscf4")).To(Equal("south"))
		Expect(t.Site("nosuch")).To(BeEmpty())
		l, ok := t.LinkBetween("south", "north")
		Expect(ok).To(BeTrue())
		Expect(l.Delay).To(Equal(20 * time.Millisecond))
		Expect(t.Links()).To(HaveLen(1))

		b, err := t.Marshal()
		Expect(err).NotTo(HaveOccurred())
		back, err := topology.Parse(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(back.Sites).To(Equal(t.Sites))
		Expect(back.Links()).To(Equal(t.Links()))
	})

	It("resolves fault targets: a node, a pool, a site", func() {
		t, err := topology.Parse(topologies.TwoSites)
		Expect(err).NotTo(HaveOccurred())
		n, ok := t.Target("pcscf2")
		Expect(ok).To(BeTrue())
		Expect(n).To(Equal([]string{"pcscf2"}))
		n, ok = t.Target("scscf")
		Expect(ok).To(BeTrue())
		Expect(n).To(Equal([]string{"scscf1", "scscf2", "scscf3", "scscf4"}))
		n, ok = t.Target("site:south")
		Expect(ok).To(BeTrue())
		Expect(n).To(Equal([]string{"pcscf3", "pcscf4", "scscf3", "scscf4"}))
		for _, bad := range []string{"site:east", "site:", "bac2", ""} {
			_, ok = t.Target(bad)
			Expect(ok).To(BeFalse(), bad)
		}
		_, ok = topology.Default().Target("site:default")
		Expect(ok).To(BeTrue())
	})

	It("puts a standby with its member unless it is named", func() {
		t := topology.Default()
		t.Pools.PCSCF.Scheme = topology.SchemeActiveStandby
		t.Sites = []topology.Site{
			{Name: "a", Nodes: []string{"dnsd", "hss", "bac", "icscf", "pcscf2b"}, PCSCF: []int{1, 2}, SCSCF: []int{1, 2, 3}},
			{Name: "b", PCSCF: []int{3}},
		}
		Expect(t.Validate()).To(Succeed())
		Expect(t.Site("pcscf3b")).To(Equal("b"))
		Expect(t.Site("pcscf2b")).To(Equal("a"))
	})

	DescribeTable("names the bad field",
		func(sites []topology.Site, links []topology.Link, fields ...string) {
			t := topology.Default()
			t.Sites, t.LinksBetween = sites, links
			err := t.Validate()
			Expect(err).To(HaveOccurred())
			Expect(fieldNames(err)).To(ConsistOf(fields))
		},
		Entry("a node in no site",
			[]topology.Site{{Name: "a", Nodes: []string{"dnsd", "hss", "bac", "icscf"}, PCSCF: []int{1, 2, 3}, SCSCF: []int{1, 2}}},
			nil, "sites"),
		Entry("a node in two sites",
			[]topology.Site{{Name: "a", Nodes: []string{"dnsd", "hss", "bac", "icscf"}, PCSCF: []int{1, 2, 3}, SCSCF: []int{1, 2, 3}},
				{Name: "b", Nodes: []string{"pcscf1"}}},
			nil, "sites[1].nodes[0]"),
		Entry("an unknown node and a member beyond the pool",
			[]topology.Site{{Name: "a", Nodes: []string{"dnsd", "hss", "bac", "icscf", "hss2"}, PCSCF: []int{1, 2, 3, 4}, SCSCF: []int{1, 2, 3}}},
			nil, "sites[0].nodes[4]", "sites[0].pcscf[3]"),
		Entry("a bad and a duplicate site name",
			[]topology.Site{{Name: "A", Nodes: []string{"dnsd", "hss", "bac", "icscf"}, PCSCF: []int{1, 2, 3}},
				{Name: "A", SCSCF: []int{1, 2, 3}}},
			nil, "sites[0].name", "sites[1].name", "sites[1].name"),
		Entry("links without sites", nil, []topology.Link{{Between: []string{"a", "b"}}}, "links"),
		Entry("bad links",
			[]topology.Site{{Name: "a", Nodes: []string{"dnsd", "hss", "bac", "icscf"}, PCSCF: []int{1, 2, 3}},
				{Name: "b", SCSCF: []int{1, 2, 3}}},
			[]topology.Link{
				{Between: []string{"a", "c"}, Delay: -time.Millisecond, Jitter: -time.Millisecond, Loss: 101, RateKbit: -1},
				{Between: []string{"a", "a"}},
				{Between: []string{"a"}},
				{Between: []string{"b", "a"}}, {Between: []string{"a", "b"}},
			},
			"links[0].between[1]", "links[0].delay", "links[0].jitter", "links[0].loss", "links[0].rate_kbit",
			"links[1].between", "links[2].between", "links[4].between"),
	)

	It("puts the line of the bad field in a parse error", func() {
		_, err := topology.Parse(append(append([]byte{}, topologies.TwoSites...), []byte("  - {between: [north, west]}\n")...))
		Expect(err).To(MatchError(ContainSubstring("links[1].between[1]: no site named \"west\"")))
		Expect(err).To(MatchError(MatchRegexp(`line \d+: links\[1\]`)))
	})
})
