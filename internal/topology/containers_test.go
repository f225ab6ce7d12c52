package topology_test

import (
	"net/netip"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
)

var _ = Describe("the container layout", Label("unit"), func() {
	nets := func() topology.Networks {
		GinkgoHelper()
		n, err := topology.NetworksAround(netip.MustParsePrefix("172.28.89.0/24"))
		Expect(err).NotTo(HaveOccurred())
		return n
	}

	It("puts the access network just below the core network and the Cx network just above it", func() {
		Expect(nets()).To(Equal(topology.Networks{Access: netip.MustParsePrefix("172.28.88.0/24"),
			Core: netip.MustParsePrefix("172.28.89.0/24"), Cx: netip.MustParsePrefix("172.28.90.0/24")}))
		n, err := topology.NetworksAround(netip.MustParsePrefix("10.8.0.0/16"))
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Access.String()).To(Equal("10.7.0.0/16"))
		Expect(n.Cx.String()).To(Equal("10.9.0.0/16"))
		_, err = topology.NetworksAround(netip.MustParsePrefix("10.1.2.0/26"))
		Expect(err).To(MatchError(ContainSubstring("/24 or larger")))
		_, err = topology.NetworksAround(netip.MustParsePrefix("0.0.0.0/24"))
		Expect(err).To(MatchError(ContainSubstring("no room")))
	})

	It("gives every node one host number on each network it joins: core addresses, the HSS on Cx", func() {
		t, err := topology.Default().ForContainers(nets())
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Networks).To(Equal(new(nets())))
		bac, _ := t.Node("bac")
		Expect(bac.Address).To(Equal("172.28.89.4"))
		Expect(t.AccessAddress(bac)).To(Equal("172.28.88.4"))
		s2, _ := t.Node("scscf2")
		Expect(s2.Address).To(Equal("172.28.89.22"))
		Expect(t.CxAddress(s2)).To(Equal("172.28.90.22"))
		icscf, _ := t.Node("icscf")
		Expect(t.CxAddress(icscf)).To(Equal("172.28.90.5"))
		hss, _ := t.Node("hss")
		Expect(hss.Address).To(Equal("172.28.90.3"))
		Expect(t.CxAddress(hss)).To(Equal("172.28.90.3"))

		bc, err := t.NodeConfig("bac")
		Expect(err).NotTo(HaveOccurred())
		Expect(bc.Listen).To(Equal("172.28.89.4:5060"))
		Expect(bc.AccessListen).To(Equal("172.28.88.4:5060"))
		hc, err := t.NodeConfig("hss")
		Expect(err).NotTo(HaveOccurred())
		Expect(hc.Trust.DiameterPeers).To(ConsistOf(
			topology.DiameterPeer{OriginHost: "icscf.ims.test", Address: "172.28.90.5"},
			topology.DiameterPeer{OriginHost: "scscf1.ims.test", Address: "172.28.90.21", ServerName: "sip:scscf1.ims.test"},
			topology.DiameterPeer{OriginHost: "scscf2.ims.test", Address: "172.28.90.22", ServerName: "sip:scscf2.ims.test"},
			topology.DiameterPeer{OriginHost: "scscf3.ims.test", Address: "172.28.90.23", ServerName: "sip:scscf3.ims.test"}))

		// The laid-out topology, networks included, is what dnsd reads back.
		b, err := t.Marshal()
		Expect(err).NotTo(HaveOccurred())
		back, err := topology.Parse(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(back.Networks).To(Equal(t.Networks))
		Expect(back.Zone()).To(Equal(t.Zone()))
	})

	It("leaves the local lab on one network: no access socket, Cx addresses are the node addresses", func() {
		t := topology.Default()
		Expect(t.Networks).To(BeNil())
		bc, err := t.NodeConfig("bac")
		Expect(err).NotTo(HaveOccurred())
		Expect(bc.AccessListen).To(BeEmpty())
		for _, n := range t.Nodes() {
			Expect(t.CxAddress(n)).To(Equal(n.Address), n.Name)
			Expect(t.AccessAddress(n)).To(Equal(n.Address), n.Name)
		}
	})

	It("refuses overlapping networks and a node off its network", func() {
		n := nets()
		n.Cx = n.Core
		_, err := topology.Default().ForContainers(n)
		Expect(err).To(MatchError(ContainSubstring("overlaps")))

		t, err := topology.Default().ForContainers(nets())
		Expect(err).NotTo(HaveOccurred())
		t.HSS.Address = "172.28.89.3"
		Expect(t.Validate()).To(MatchError(ContainSubstring("hss address 172.28.89.3: not on the cx network 172.28.90.0/24")))
		t, _ = topology.Default().ForContainers(nets())
		t.BAC.Address = "172.28.88.4"
		Expect(t.Validate()).To(MatchError(ContainSubstring("bac address 172.28.88.4: not on the core network")))
	})
})
