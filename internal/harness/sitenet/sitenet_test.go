package sitenet_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/imslab/quasipool/internal/testtier"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/sitenet"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

func TestSitenet(t *testing.T) {
	testtier.RunSpecs(t, "sitenet")
}

func twoSites(link topology.Link) *topology.Topology {
	GinkgoHelper()
	t := topology.Default()
	t.Sites = []topology.Site{{Name: "north", Nodes: []string{"dnsd", "hss", "bac", "icscf"}, PCSCF: []int{1, 2},
		SCSCF: []int{1, 2}}, {Name: "south", PCSCF: []int{3}, SCSCF: []int{3}}}
	link.Between = []string{"north", "south"}
	t.LinksBetween = []topology.Link{link}
	Expect(t.Validate()).To(Succeed())
	return t
}

// addrs gives node k of the topology 10.0.0.k.
func addrs(t *topology.Topology) func(string) ([]netip.Addr, error) {
	return func(n string) ([]netip.Addr, error) {
		for k, tn := range t.Nodes() {
			if tn.Name == n {
				return []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(k + 1)})}, nil
			}
		}
		return nil, errors.New("no such node")
	}
}

func pfx(t *topology.Topology, nodes ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range nodes {
		a, _ := addrs(t)(n)
		out = append(out, netip.PrefixFrom(a[0], 32))
	}
	return out
}

var _ = Describe("site links as network faults", Label("unit"), func() {
	It("delays and drops, in every node, what it sends to the other site's nodes", func() {
		t := twoSites(topology.Link{Delay: 20 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 1})
		items, err := sitenet.Plan(t, addrs(t), "eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(items).To(HaveLen(2 * len(t.Nodes())))
		south := pfx(t, "pcscf3", "scscf3")
		north := pfx(t, t.SiteNodes("north")...)
		for _, it := range items {
			Expect(it.Link).To(Equal("north–south"))
			peers := south
			if t.Site(it.Node) == "south" {
				peers = north
			}
			switch s := it.Spec.(type) {
			case netfault.Delay:
				Expect(s).To(Equal(netfault.Delay{Device: "eth0", Delay: 20 * time.Millisecond, Jitter: 2 * time.Millisecond,
					Peers: peers, Direction: netfault.Out}), it.Node)
				Expect(it.Key).To(Equal("link north–south delay"))
			case netfault.Loss:
				Expect(s).To(Equal(netfault.Loss{Percent: 1, Peers: peers, Direction: netfault.Out}), it.Node)
				Expect(it.Key).To(Equal("link north–south loss"))
			default:
				Fail("unexpected spec " + it.Spec.String())
			}
		}
		d := sitenet.Describe(t, items)
		Expect(d).To(Equal([]obs.SiteLink{{Link: "north–south", Nodes: len(t.Nodes()), DelayMs: 20.0,
			JitterMs: 2.0, LossPercent: 1.0}}))
	})

	It("gives nothing for a topology without links or a link without impairment", func() {
		t := topology.Default()
		Expect(sitenet.Plan(t, addrs(t), "eth0")).To(BeEmpty())
		t = twoSites(topology.Link{})
		Expect(sitenet.Plan(t, addrs(t), "eth0")).To(BeEmpty())
	})

	It("shapes a link's rate per node towards the other site only", func() {
		t := twoSites(topology.Link{RateKbit: 2000})
		items, err := sitenet.Plan(t, addrs(t), "eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(items).To(HaveLen(len(t.Nodes())), "one rate per node of both sites")
		for _, it := range items {
			r, ok := it.Spec.(netfault.Rate)
			Expect(ok).To(BeTrue(), "%T", it.Spec)
			Expect(r.Rate).To(Equal("2000kbit"))
			Expect(r.Peers).NotTo(BeEmpty(), "only towards the other site")
			Expect(it.Key).To(Equal("link north–south rate"))
		}
	})
})
