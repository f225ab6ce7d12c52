package topology_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
)

// withSchemes returns the default lab with the given schemes ("" keeps the default).
func withSchemes(pcscf, scscf string) *topology.Topology {
	doc := base
	if pcscf != "" {
		doc = strings.Replace(doc, "    weight: 10", "    weight: 10\n    scheme: "+pcscf, 1)
	}
	if scscf != "" {
		i := strings.LastIndex(doc, "    weight: 10")
		doc = doc[:i] + "    weight: 10\n    scheme: " + scscf + doc[i+len("    weight: 10"):]
	}
	t, err := topology.Parse([]byte(doc))
	Expect(err).NotTo(HaveOccurred())
	return t
}

func targets(z topology.Zone, name string) []string {
	var out []string
	for _, r := range z.Lookup(name, topology.TypeSRV) {
		out = append(out, strings.TrimSuffix(r.Target, ".ims.test")+"/"+string(rune('0'+r.Priority)))
	}
	return out
}

func names(ns []topology.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

var _ = Describe("Protection schemes", Label("unit"), func() {
	It("tells every SIP node the schemes of both pools", func() {
		t := withSchemes(topology.SchemeLoadSharing, topology.SchemeNPlus1)
		for _, name := range []string{"bac", "pcscf1", "icscf", "scscf3"} {
			c, err := t.NodeConfig(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.PCSCFScheme).To(Equal(topology.SchemeLoadSharing), name)
			Expect(c.SCSCFScheme).To(Equal(topology.SchemeNPlus1), name)
			Expect(c.Replication).To(BeNil())
			b, err := c.Marshal()
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).To(ContainSubstring("pcscf_scheme: load-sharing"))
			back, err := topology.ParseNodeConfig(b)
			Expect(err).NotTo(HaveOccurred())
			Expect(back.SCSCFScheme).To(Equal(topology.SchemeNPlus1))
		}
		c, _ := t.NodeConfig("hss")
		Expect(c.PCSCFScheme).To(BeEmpty())
		_, err := topology.ParseNodeConfig([]byte("name: icscf\nkind: icscf\ndomain: ims.test\nfqdn: icscf.ims.test\n" +
			"listen: 127.0.0.1:5070\ndns_server: 127.0.0.1:1053\ntimers: {t1: 500ms, invite_no_answer: 2s, non_invite_no_answer: 2s}\n" +
			"probing: {interval: 1s, timeout: 500ms, failures_to_down: 2, successes_to_up: 1}\nregistration: {expires: 600s}\n" +
			"log: {format: text, level: info}\npeers: {scscf_pool: scscf.ims.test, hss: _diameter._tcp.hss.ims.test}\n" +
			"scscf_scheme: hot-spare\n"))
		Expect(err).To(MatchError(ContainSubstring(`scscf_scheme: "hot-spare": must be one of`)))
	})

	It("n-plus-1: the last member is a spare at priority 2 in the pool record and behind each active member", func() {
		z := withSchemes(topology.SchemeNPlus1, "").Zone()
		Expect(targets(z, "_sip._udp.pcscf.ims.test")).To(Equal([]string{"pcscf1/1", "pcscf2/1", "pcscf3/2"}))
		Expect(targets(z, "_sip._udp.pcscf1.ims.test")).To(Equal([]string{"pcscf1/1", "pcscf3/2", "pcscf2/3"}))
		Expect(targets(z, "_sip._udp.pcscf2.ims.test")).To(Equal([]string{"pcscf2/1", "pcscf3/2", "pcscf1/3"}))
		Expect(targets(z, "_sip._udp.pcscf3.ims.test")).To(Equal([]string{"pcscf3/1", "pcscf1/2", "pcscf2/2"}))
		Expect(targets(z, "_sip._udp.scscf2.ims.test")).To(Equal([]string{"scscf2/1", "scscf1/2", "scscf3/2"}),
			"the other pool keeps the quasi-pool shape")
		_, err := topology.Parse([]byte(strings.Replace(strings.Replace(base, "    size: 3", "    size: 1", 1),
			"    weight: 10", "    weight: 10\n    scheme: n-plus-1", 1)))
		Expect(err).To(MatchError(ContainSubstring("pools.pcscf.size: 1: n-plus-1 needs")))
	})

	It("load-sharing and pool-sync keep the DNS of the quasi-pool; pool-sync members replicate to each other", func() {
		q := topology.Default().Zone()
		Expect(withSchemes(topology.SchemeLoadSharing, topology.SchemeLoadSharing).Zone()).To(Equal(q))
		t := withSchemes(topology.SchemePoolSync, "")
		Expect(t.Zone()).To(Equal(q))
		c, err := t.NodeConfig("pcscf2")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Replication).To(Equal(&topology.ReplicationConfig{Listen: "127.0.0.1:5062",
			Peers: []string{"127.0.0.1:5061", "127.0.0.1:5063"}, PeerNames: []string{"pcscf1", "pcscf3"}}))
		c, _ = t.NodeConfig("scscf1")
		Expect(c.Replication).To(BeNil())
	})

	It("active-standby: a standby per member, in the nodes, behind its member in DNS, replicating with it", func() {
		t := withSchemes("", topology.SchemeActiveStandby)
		Expect(names(t.NodesOfKind(topology.KindSCSCF))).To(Equal([]string{"scscf1", "scscf2", "scscf3", "scscf1b", "scscf2b", "scscf3b"}))
		sb, ok := t.Node("scscf2b")
		Expect(ok).To(BeTrue())
		Expect(sb.Listen()).To(Equal("127.0.0.1:5085"))
		Expect(sb.Standby).To(BeTrue())
		z := t.Zone()
		Expect(targets(z, "_sip._udp.scscf.ims.test")).To(Equal([]string{"scscf1/1", "scscf2/1", "scscf3/1"}))
		Expect(targets(z, "_sip._udp.scscf2.ims.test")).To(Equal([]string{"scscf2/1", "scscf2b/2"}))
		Expect(targets(z, "_sip._udp.scscf2b.ims.test")).To(Equal([]string{"scscf2b/1", "scscf2/2"}))
		Expect(z.Lookup("scscf2b.ims.test", topology.TypeA)).To(HaveLen(1))
		c, err := t.NodeConfig("scscf2")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Replication.Peers).To(Equal([]string{"127.0.0.1:5085"}))
		Expect(c.Replication.PeerNames).To(Equal([]string{"scscf2b"}))
		c, _ = t.NodeConfig("scscf2b")
		Expect(c.Replication.Peers).To(Equal([]string{"127.0.0.1:5082"}))
		Expect(t.Trusted()).To(ContainElement("127.0.0.1:5085"))
	})

	It("mutual: pairs of active members, each behind its partner (and nobody else) in DNS, replicating with it", func() {
		doc := strings.ReplaceAll(base, "    size: 3", "    size: 4")
		doc = strings.Replace(doc, "    weight: 10", "    weight: 10\n    scheme: mutual", 1)
		t, err := topology.Parse([]byte(doc))
		Expect(err).NotTo(HaveOccurred())
		Expect(names(t.NodesOfKind(topology.KindPCSCF))).To(Equal([]string{"pcscf1", "pcscf2", "pcscf3", "pcscf4"}),
			"no extra processes: both members of a pair serve their own users")
		z := t.Zone()
		Expect(targets(z, "_sip._udp.pcscf.ims.test")).To(Equal([]string{"pcscf1/1", "pcscf2/1", "pcscf3/1", "pcscf4/1"}))
		Expect(targets(z, "_sip._udp.pcscf1.ims.test")).To(Equal([]string{"pcscf1/1", "pcscf2/2"}))
		Expect(targets(z, "_sip._udp.pcscf2.ims.test")).To(Equal([]string{"pcscf2/1", "pcscf1/2"}))
		Expect(targets(z, "_sip._udp.pcscf3.ims.test")).To(Equal([]string{"pcscf3/1", "pcscf4/2"}))
		Expect(targets(z, "_sip._udp.pcscf4.ims.test")).To(Equal([]string{"pcscf4/1", "pcscf3/2"}))
		Expect(targets(z, "_sip._udp.scscf1.ims.test")).To(Equal([]string{"scscf1/1", "scscf2/2", "scscf3/2", "scscf4/2"}),
			"the other pool keeps the quasi-pool shape")
		for member, partner := range map[string]string{"pcscf1": "pcscf2", "pcscf2": "pcscf1", "pcscf3": "pcscf4", "pcscf4": "pcscf3"} {
			c, err := t.NodeConfig(member)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.PCSCFScheme).To(Equal(topology.SchemeMutual))
			Expect(c.Replication.PeerNames).To(Equal([]string{partner}), member)
			p, _ := t.Node(partner)
			Expect(c.Replication.Peers).To(Equal([]string{p.Listen()}), member)
			Expect(c.Validate()).To(Succeed())
			Expect(c.Policy()).To(Equal(topology.Policy{}), "no quasi-pool restoration through the HSS")
		}
		c, _ := t.NodeConfig("scscf1")
		Expect(c.Replication).To(BeNil())
		Expect(c.Policy().Restore).To(BeTrue())
	})

	It("mutual: reaches a replicating S-CSCF pool through the per-host records, refuses an odd pool size", func() {
		doc := strings.ReplaceAll(base, "    size: 3", "    size: 2")
		i := strings.LastIndex(doc, "    weight: 10")
		doc = doc[:i] + "    weight: 10\n    scheme: mutual" + doc[i+len("    weight: 10"):]
		t, err := topology.Parse([]byte(doc))
		Expect(err).NotTo(HaveOccurred())
		for name, want := range map[string]topology.Policy{
			"pcscf1": {Restore: true, SCSCFFailover: true},
			"icscf":  {AcceptRestore: true, SCSCFFailover: true},
			"scscf2": {},
		} {
			c, err := t.NodeConfig(name)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Policy()).To(Equal(want), name)
		}
		Expect(targets(t.Zone(), "_sip._udp.scscf2.ims.test")).To(Equal([]string{"scscf2/1", "scscf1/2"}))

		_, err = topology.Parse([]byte(strings.Replace(base, "    weight: 10", "    weight: 10\n    scheme: mutual", 1)))
		Expect(err).To(MatchError(ContainSubstring("pools.pcscf.size: 3: mutual pairs the members (1+2, 3+4, …), the size must be even")))
	})

	It("refuses a replication section without one node name per peer (older node configs had none)", func() {
		c, err := withSchemes(topology.SchemePoolSync, "").NodeConfig("pcscf2")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Validate()).To(Succeed())
		b, err := c.Marshal()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring("peer_names:"))
		back, err := topology.ParseNodeConfig(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(back.Replication).To(Equal(c.Replication))

		c.Replication.PeerNames = nil
		Expect(c.Validate()).To(MatchError(ContainSubstring("replication.peer_names: 0 names for 2 peers")))
		c.Replication.PeerNames = []string{"pcscf1", "pcscf1"}
		Expect(c.Validate()).To(MatchError(ContainSubstring(`replication.peer_names[1]: "pcscf1": listed twice`)))
		c.Replication.PeerNames = []string{"pcscf1", "Not A Name"}
		Expect(c.Validate()).To(MatchError(ContainSubstring("replication.peer_names[1]")))
	})
})
