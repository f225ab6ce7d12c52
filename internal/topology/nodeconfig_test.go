package topology_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
)

var trusted = []string{"127.0.0.1:5061", "127.0.0.1:5062", "127.0.0.1:5063", "127.0.0.1:5070",
	"127.0.0.1:5081", "127.0.0.1:5082", "127.0.0.1:5083"}

var _ = Describe("NodeConfig", Label("unit"), func() {
	var t *topology.Topology
	BeforeEach(func() { t = topology.Default() })

	get := func(name string, opts ...topology.NodeOption) *topology.NodeConfig {
		c, err := t.NodeConfig(name, opts...)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Validate()).To(Succeed())
		return c
	}

	It("fills the common fields from the topology", func() {
		c := get("pcscf2")
		Expect(*c).To(Equal(topology.NodeConfig{
			Name: "pcscf2", Kind: topology.KindPCSCF, Domain: "ims.test", FQDN: "pcscf2.ims.test",
			Listen: "127.0.0.1:5062", DNSServer: "127.0.0.1:1053",
			Timers: t.Timers, Probing: t.Probing, Registration: t.Registration,
			Log:   topology.Log{Format: "text", Level: "info"},
			Peers: topology.Peers{ICSCF: "icscf.ims.test"},
			Trust: &topology.Trust{
				BAC: []string{"127.0.0.1:5060"}, PCSCF: []string{"127.0.0.1:5061", "127.0.0.1:5062", "127.0.0.1:5063"},
				ICSCF: []string{"127.0.0.1:5070"}, SCSCF: []string{"127.0.0.1:5081", "127.0.0.1:5082", "127.0.0.1:5083"},
				PCSCFHosts: []string{"pcscf1.ims.test", "pcscf2.ims.test", "pcscf3.ims.test"},
				SCSCFHosts: []string{"scscf1.ims.test", "scscf2.ims.test", "scscf3.ims.test"},
				ICSCFHost:  "icscf.ims.test", BACHost: "bac.ims.test",
			},
			PCSCFScheme: topology.SchemeQuasiPool, SCSCFScheme: topology.SchemeQuasiPool,
		}))
	})

	It("gives each kind the names it resolves, and trust only to SIP core nodes", func() {
		Expect(get("bac").Peers).To(Equal(topology.Peers{PCSCFPool: "pcscf.ims.test"}))
		Expect(get("icscf").Peers).To(Equal(topology.Peers{SCSCFPool: "scscf.ims.test", HSS: "_diameter._tcp.hss.ims.test"}))
		Expect(get("scscf1").Peers).To(Equal(topology.Peers{ICSCF: "icscf.ims.test", HSS: "_diameter._tcp.hss.ims.test"}))
		Expect(get("bac").Trust.TrustDomain()).To(Equal(trusted))
		Expect(get("scscf3").Trust.TrustDomain()).To(Equal(trusted))
		Expect(get("bac").Trust.TrustDomain()).NotTo(ContainElement("127.0.0.1:5060"), "the BAC is not in the trust domain")
		Expect(get("pcscf1").Trust.BAC).To(Equal([]string{"127.0.0.1:5060"}))
		Expect(get("hss").Trust.TrustDomain()).To(BeEmpty())
		Expect(get("hss").Trust.DiameterPeers).To(Equal([]topology.DiameterPeer{
			{OriginHost: "icscf.ims.test", Address: "127.0.0.1"},
			{OriginHost: "scscf1.ims.test", Address: "127.0.0.1", ServerName: "sip:scscf1.ims.test"},
			{OriginHost: "scscf2.ims.test", Address: "127.0.0.1", ServerName: "sip:scscf2.ims.test"},
			{OriginHost: "scscf3.ims.test", Address: "127.0.0.1", ServerName: "sip:scscf3.ims.test"},
		}))
		Expect(get("dnsd").Trust).To(BeNil())
	})

	It("gives the HSS and dnsd their own sections", func() {
		h := get("hss")
		Expect(h.Listen).To(Equal("127.0.0.1:3868"))
		Expect(h.HSS).To(Equal(&topology.HSSNodeConfig{DiameterListen: "127.0.0.1:3868", HTTPListen: "127.0.0.1:8090",
			DataDir: "data/hss", OriginHost: "hss.ims.test", OriginRealm: "ims.test", LabSubscribers: true}))
		Expect(h.DNS).To(BeNil())
		d := get("dnsd")
		Expect(d.Listen).To(Equal("127.0.0.1:1053"))
		Expect(d.DNS).To(Equal(&topology.DNSNodeConfig{TTL: time.Second}))
		Expect(d.HSS).To(BeNil())
	})

	It("derives every node's seed from the run's seed and the node's name", func() {
		Expect(get("bac").Seed).To(BeZero(), "no run seed: the node seeds itself")
		a, b := get("pcscf1", topology.RunSeed(42)), get("pcscf2", topology.RunSeed(42))
		Expect(a.Seed).NotTo(BeZero())
		Expect(a.Seed).To(Equal(topology.NodeSeed(42, "pcscf1")))
		Expect(a.Seed).To(Equal(get("pcscf1", topology.RunSeed(42)).Seed), "same run seed, same node seed")
		Expect(b.Seed).NotTo(Equal(a.Seed), "each node its own")
		Expect(get("pcscf1", topology.RunSeed(43)).Seed).NotTo(Equal(a.Seed), "another run seed, another node seed")
		y, err := a.Marshal()
		Expect(err).NotTo(HaveOccurred())
		back, err := topology.ParseNodeConfig(y)
		Expect(err).NotTo(HaveOccurred())
		Expect(back.Seed).To(Equal(a.Seed), "the seed survives the YAML file")
	})

	It("puts files under a run directory", func() {
		h := get("hss", topology.InRunDir("/runs/x"))
		Expect(h.EventsFile).To(Equal("/runs/x/events/hss.jsonl"))
		Expect(h.HSS.DataDir).To(Equal("/runs/x/data/hss"))
		d := get("dnsd", topology.InRunDir("/runs/x"))
		Expect(d.DNS.Topology).To(Equal("/runs/x/topology.yaml"))
		Expect(get("dnsd", topology.InRunDir("/runs/x"), topology.TopologyFile("/t.yaml")).DNS.Topology).To(Equal("/t.yaml"))
		Expect(get("icscf").EventsFile).To(BeEmpty())
	})

	It("applies per-node overrides field by field", func() {
		var err error
		t, err = topology.Parse([]byte(base + "nodes:\n  pcscf1:\n    timers: {t1: 250ms}\n    probing: {failures_to_down: 1}\n    log: {level: debug}\n"))
		Expect(err).NotTo(HaveOccurred())
		c := get("pcscf1")
		Expect(c.Timers).To(Equal(topology.Timers{T1: 250 * time.Millisecond, InviteNoAnswer: 2 * time.Second,
			NonInviteNoAnswer: 2 * time.Second}))
		Expect(c.Probing.FailuresToDown).To(Equal(1))
		Expect(c.Probing.Interval).To(Equal(time.Second))
		Expect(c.Log).To(Equal(topology.Log{Format: "text", Level: "debug"}))
		Expect(get("pcscf2").Timers.T1).To(Equal(500 * time.Millisecond))
	})

	It("refuses an unknown node", func() {
		_, err := t.NodeConfig("pcscf9")
		Expect(err).To(MatchError(`topology: no node named "pcscf9"`))
	})

	It("writes one file per node and reads each back unchanged", func() {
		dir := filepath.Join(GinkgoT().TempDir(), "config")
		Expect(t.WriteNodeConfigs(dir, topology.InRunDir("/runs/y"))).To(Succeed())
		entries, err := os.ReadDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(entries).To(HaveLen(len(t.Nodes())))
		for _, n := range t.Nodes() {
			c, err := topology.LoadNodeConfig(filepath.Join(dir, n.Name+".yaml"))
			Expect(err).NotTo(HaveOccurred())
			Expect(c).To(Equal(get(n.Name, topology.InRunDir("/runs/y"))))
		}
	})

	It("reads node configs strictly and names bad fields with their line", func() {
		c := get("icscf")
		b, err := c.Marshal()
		Expect(err).NotTo(HaveOccurred())
		_, err = topology.ParseNodeConfig(append(b, "extra: 1\n"...))
		Expect(err).To(MatchError(ContainSubstring("field extra not found")))

		c.Peers.HSS = ""
		c.Listen = "nowhere"
		b, err = c.Marshal()
		Expect(err).NotTo(HaveOccurred())
		_, err = topology.ParseNodeConfig(b)
		Expect(err).To(MatchError(ContainSubstring("line 6: listen: \"nowhere\": want ip:port")))
		Expect(err).To(MatchError(ContainSubstring("peers.hss: missing (a icscf needs it)")))

		dir := GinkgoT().TempDir()
		p := filepath.Join(dir, "dnsd.yaml")
		Expect(os.WriteFile(p, []byte("name: dnsd\nkind: dnsd\n"), 0o644)).To(Succeed())
		_, err = topology.LoadNodeConfig(p)
		Expect(err).To(MatchError(ContainSubstring(p + ": topology: line 1: domain: must not be empty")))
		Expect(err).To(MatchError(ContainSubstring("dns: missing")))
	})
})
