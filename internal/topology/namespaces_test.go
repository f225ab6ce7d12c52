package topology_test

import (
	"net/netip"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
)

var _ = Describe("the namespace layout", Label("unit"), func() {
	subnet := netip.MustParsePrefix("10.89.3.0/24")

	It("gives every node its own address on the one subnet, with the standard ports", func() {
		t, err := topology.Default().ForNamespaces(subnet)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Networks).To(BeNil())
		seen := map[string]string{}
		for _, n := range t.Nodes() {
			a := netip.MustParseAddr(n.Address)
			Expect(subnet.Contains(a)).To(BeTrue(), n.Name)
			Expect(a).NotTo(Equal(topology.GatewayAddr(subnet)), "the gateway is the host's")
			Expect(seen).NotTo(HaveKey(n.Address), "%s shares %s with %s", n.Name, n.Address, seen[n.Address])
			seen[n.Address] = n.Name
		}
		hss, _ := t.Node("hss")
		Expect(hss.Address).To(Equal("10.89.3.3"))
		Expect(t.DNS.Listen).To(Equal("10.89.3.2:53"))
		p1, _ := t.Node("pcscf1")
		Expect(p1.Listen()).To(Equal("10.89.3.11:5060"))
	})

	It("carries the namespace addresses into the trust sections", func() {
		t, err := topology.Default().ForNamespaces(subnet)
		Expect(err).NotTo(HaveOccurred())
		pc, err := t.NodeConfig("pcscf1")
		Expect(err).NotTo(HaveOccurred())
		Expect(pc.Trust.BAC).To(ConsistOf("10.89.3.4:5060"))
		Expect(pc.Trust.SCSCF).To(ContainElement("10.89.3.21:5060"))
		hc, err := t.NodeConfig("hss")
		Expect(err).NotTo(HaveOccurred())
		var addrs []string
		for _, p := range hc.Trust.DiameterPeers {
			addrs = append(addrs, p.Address)
		}
		Expect(addrs).To(ContainElements("10.89.3.5", "10.89.3.21", "10.89.3.22"))
	})

	It("wants an IPv4 /24", func() {
		_, err := topology.Default().ForNamespaces(netip.MustParsePrefix("10.89.0.0/16"))
		Expect(err).To(MatchError(ContainSubstring("want an IPv4 /24")))
	})
})
