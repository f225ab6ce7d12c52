package topology_test

import (
	"net/netip"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
)

// mixed returns the default lab's document with pools.scscf.kamailio (and, when given, the S-CSCF scheme) set.
func mixed(kamailio, scheme string) string {
	i := strings.LastIndex(base, "    weight: 10")
	extra := "    weight: 10\n    kamailio: " + kamailio
	if scheme != "" {
		extra += "\n    scheme: " + scheme
	}
	return base[:i] + extra + base[i+len("    weight: 10"):]
}

var _ = Describe("A mixed S-CSCF pool (Kamailio members)", Label("unit"), func() {
	It("marks the listed member as Kamailio's and leaves the others ours", func() {
		t, err := topology.Parse([]byte(mixed("[2]", "")))
		Expect(err).NotTo(HaveOccurred())
		vendors := map[string]string{}
		for _, n := range t.NodesOfKind(topology.KindSCSCF) {
			vendors[n.Name] = n.Vendor
		}
		Expect(vendors).To(Equal(map[string]string{"scscf1": "", "scscf2": topology.VendorKamailio, "scscf3": ""}))
		// The HSS accepts it as any S-CSCF: its own Origin-Host, and its own Server-Name only.
		var peer topology.DiameterPeer
		for _, p := range t.DiameterPeers() {
			if p.OriginHost == "scscf2.ims.test" {
				peer = p
			}
		}
		Expect(peer.ServerName).To(Equal("sip:scscf2.ims.test"))
		// It survives a round trip through the written topology (dnsd and the runner read it back).
		b, err := t.Marshal()
		Expect(err).NotTo(HaveOccurred())
		back, err := topology.Parse(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(back.Pools.SCSCF.Kamailio).To(Equal([]int{2}))
	})

	DescribeTable("refuses what Kamailio's S-CSCF cannot be, naming the field",
		func(doc, field, why string) {
			_, err := topology.Parse([]byte(doc))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(field))
			Expect(err.Error()).To(ContainSubstring(why))
		},
		Entry("a scheme that copies registrations (pool-sync)", mixed("[2]", "pool-sync"),
			"pools.scscf.kamailio", "copies registrations"),
		Entry("a scheme that copies registrations (mutual)", mixed("[2]", "mutual"),
			"pools.scscf.kamailio", "copies registrations"),
		Entry("a scheme that copies registrations (active-standby)", mixed("[1]", "active-standby"),
			"pools.scscf.kamailio", "copies registrations"),
		Entry("a member the pool does not have", mixed("[4]", ""), "pools.scscf.kamailio[0]", "not a member"),
		Entry("member 0", mixed("[0]", ""), "pools.scscf.kamailio[0]", "not a member"),
		Entry("a member listed twice", mixed("[2, 2]", ""), "pools.scscf.kamailio[1]", "listed twice"),
		Entry("the P-CSCF pool", strings.Replace(base, "    weight: 10", "    weight: 10\n    kamailio: [1]", 1),
			"pools.pcscf.kamailio", "only as an S-CSCF member"),
	)

	It("accepts the schemes that do not copy registrations", func() {
		for _, s := range []string{"quasi-pool", "load-sharing", "n-plus-1"} {
			_, err := topology.Parse([]byte(mixed("[1]", s)))
			Expect(err).NotTo(HaveOccurred(), s)
		}
	})

	It("refuses a container lab and keeps the namespace lab", func() {
		t, err := topology.Parse([]byte(mixed("[2]", "")))
		Expect(err).NotTo(HaveOccurred())
		nets, err := topology.NetworksAround(netip.MustParsePrefix("172.28.89.0/24"))
		Expect(err).NotTo(HaveOccurred())
		_, err = t.ForContainers(nets)
		Expect(err).To(MatchError(ContainSubstring("not in containers")))
		ns, err := t.ForNamespaces(netip.MustParsePrefix("10.89.7.0/24"))
		Expect(err).NotTo(HaveOccurred())
		n, _ := ns.Node("scscf2")
		Expect(n.Vendor).To(Equal(topology.VendorKamailio))
	})
})
