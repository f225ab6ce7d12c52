package compose_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/topology"
)

// composeDoc is the part of a compose file the specs check.
type composeDoc struct {
	Services map[string]struct {
		Image         string            `yaml:"image"`
		ContainerName string            `yaml:"container_name"`
		Environment   map[string]string `yaml:"environment"`
		Command       []string          `yaml:"command"`
		Volumes       []string          `yaml:"volumes"`
		DNS           []string          `yaml:"dns"`
		Sysctls       map[string]string `yaml:"sysctls"`
		Networks      map[string]struct {
			IPv4 string `yaml:"ipv4_address"`
		} `yaml:"networks"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
	Networks map[string]struct {
		Internal   bool              `yaml:"internal"`
		DriverOpts map[string]string `yaml:"driver_opts"`
		IPAM       struct {
			Config []struct {
				Subnet string `yaml:"subnet"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
	Volumes map[string]any `yaml:"volumes"`
}

func repoRoot() string {
	GinkgoHelper()
	wd, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	repo, err := lab.FindRepo(wd)
	Expect(err).NotTo(HaveOccurred())
	return repo
}

var _ = Describe("the generated compose lab", func() {
	var (
		b   *compose.Bundle
		doc composeDoc
	)
	BeforeEach(func() {
		var err error
		b, err = compose.Generate(topology.Default(), compose.DefaultOptions())
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(b.Compose, &doc)).To(Succeed())
	})

	It("gives every node's container the GOMAXPROCS it is asked for, and none by default", func() {
		for name, s := range doc.Services {
			Expect(s.Environment).NotTo(HaveKey("GOMAXPROCS"), "%s: the committed lab is meant for any machine", name)
		}
		o := compose.DefaultOptions()
		o.GoMaxProcs = "1"
		b, err := compose.Generate(topology.Default(), o)
		Expect(err).NotTo(HaveOccurred())
		var d composeDoc
		Expect(yaml.Unmarshal(b.Compose, &d)).To(Succeed())
		for _, n := range topology.Default().Nodes() {
			Expect(d.Services[n.Name].Environment).To(HaveKeyWithValue("GOMAXPROCS", "1"), n.Name)
		}
	})

	It("leaves the engine's healthchecks out when the lab checks readiness itself, keeping the start order", func() {
		o := compose.DefaultOptions()
		o.NoHealthcheck = true
		b, err := compose.Generate(topology.Default(), o)
		Expect(err).NotTo(HaveOccurred())
		var d composeDoc
		Expect(yaml.Unmarshal(b.Compose, &d)).To(Succeed())
		for name, s := range d.Services {
			Expect(s.Healthcheck).To(BeNil(), "%s: no exec in the container every 5 s", name)
			for dep, c := range s.DependsOn {
				Expect(c.Condition).To(Equal("service_started"), "%s after %s: nothing would ever report healthy", name, dep)
			}
		}
		Expect(d.Services["scscf1"].DependsOn).To(HaveKey("hss"))
		Expect(d.Services["scscf1"].DependsOn).To(HaveKey("dnsd"))
	})

	It("bounds what each interface of a node holds for an address nobody answers ARP for, below a socket's send buffer", func() {
		// An internal network's default route leads to a gateway with no address on the host (core, Cx): packets a
		// node sends off its networks wait for an ARP answer that never comes, charged to the sending socket.
		for _, n := range topology.Default().Nodes() {
			s := doc.Services[n.Name]
			Expect(s.Networks).NotTo(BeEmpty(), n.Name)
			for i := range len(s.Networks) {
				Expect(s.Sysctls).To(HaveKeyWithValue(fmt.Sprintf("net.ipv4.neigh.eth%d.unres_qlen_bytes", i), "16384"),
					"%s: interface %d of %d", n.Name, i, len(s.Networks))
			}
			Expect(s.Sysctls).NotTo(HaveKey(fmt.Sprintf("net.ipv4.neigh.eth%d.unres_qlen_bytes", len(s.Networks))),
				"%s: no interface beyond its networks (the container would not start)", n.Name)
		}
		Expect(doc.Services["dnsd"].Sysctls).To(HaveKeyWithValue("net.ipv4.ip_unprivileged_port_start", "0"))
	})

	It("is what is committed at the repository root (regenerate with go run ./cmd/imslab compose)", func() {
		repo := repoRoot()
		Expect(b.Stale(filepath.Join(repo, compose.CommittedFile), filepath.Join(repo, compose.CommittedDir))).To(BeEmpty())
	})

	It("has one service per node of the topology plus the phones, each on a fixed address of every network it joins", func() {
		nodes := topology.Default().Nodes()
		Expect(doc.Services).To(HaveLen(len(nodes) + 1))
		Expect(doc.Networks).To(HaveLen(3))
		subnets := map[string]netip.Prefix{}
		for name, nw := range doc.Networks {
			Expect(nw.IPAM.Config).To(HaveLen(1), name)
			subnets[name] = netip.MustParsePrefix(nw.IPAM.Config[0].Subnet)
		}
		Expect(subnets).To(Equal(map[string]netip.Prefix{"access": netip.MustParsePrefix("172.28.88.0/24"),
			"core": netip.MustParsePrefix("172.28.89.0/24"), "cx": netip.MustParsePrefix("172.28.90.0/24")}))
		seen := map[string]string{}
		for name, s := range doc.Services {
			Expect(s.ContainerName).To(BeEmpty(), "%s: no container_name, so labs can run side by side", name)
			Expect(s.Image).To(Equal("${IMSLAB_IMAGE:-imslab/quasipool:latest}"))
			Expect(s.Networks).NotTo(BeEmpty(), name)
			host := -1
			for nw, c := range s.Networks {
				addr := netip.MustParseAddr(c.IPv4)
				Expect(subnets).To(HaveKey(nw), "%s joins a network of the lab", name)
				Expect(subnets[nw].Contains(addr)).To(BeTrue(), "%s: %s in %s (%s)", name, addr, nw, subnets[nw])
				Expect(seen).NotTo(HaveKey(addr.String()), "%s and %s share an address", name, seen[addr.String()])
				seen[addr.String()] = name
				if host >= 0 {
					Expect(int(addr.As4()[3])).To(Equal(host), "%s has one host number on every network", name)
				}
				host = int(addr.As4()[3])
			}
			if _, onCore := s.Networks["core"]; onCore {
				Expect(s.DNS).To(Equal([]string{doc.Services["dnsd"].Networks["core"].IPv4}), "%s uses dnsd", name)
			} else {
				Expect(s.DNS).To(BeEmpty(), "%s cannot reach dnsd: no dns entry pointing nowhere", name)
			}
			Expect(s.Volumes).To(ContainElement("data:/data"), "%s writes to the named volume", name)
			Expect(s.Volumes).To(ContainElement("./deploy/compose:/lab:ro"))
		}
		Expect(doc.Volumes).To(HaveKey("data"))
		for _, n := range nodes {
			s, ok := doc.Services[n.Name]
			Expect(ok).To(BeTrue(), "service %s", n.Name)
			Expect(s.Command).To(Equal([]string{"/bin/" + string(n.Kind), "--config", "/lab/config/" + n.Name + ".yaml"}))
			Expect(s.Healthcheck).NotTo(BeNil(), "%s has a healthcheck", n.Name)
			Expect(strings.Join(s.Healthcheck.Test, " ")).To(HavePrefix("CMD /bin/imslab probe "))
			Expect(b.Files).To(HaveKey("config/" + n.Name + ".yaml"))
		}
		Expect(doc.Services["traffic"].DependsOn).To(HaveKeyWithValue("bac", HaveField("Condition", "service_healthy")))
		Expect(doc.Services["icscf"].DependsOn).To(HaveKey("hss"))
	})

	It("puts each service on the networks of a real IMS: phones reach the BAC and nothing behind it", func() {
		networksOf := func(name string) []string {
			var out []string
			for nw := range doc.Services[name].Networks {
				out = append(out, nw)
			}
			return out
		}
		Expect(networksOf("traffic")).To(ConsistOf("access"), "the phones have no core or Cx network")
		Expect(networksOf("bac")).To(ConsistOf("access", "core"))
		Expect(networksOf("dnsd")).To(ConsistOf("core"))
		Expect(networksOf("hss")).To(ConsistOf("cx"), "the HSS has no access or core network")
		Expect(networksOf("icscf")).To(ConsistOf("core", "cx"))
		for _, k := range []string{"1", "2", "3"} {
			Expect(networksOf("pcscf" + k)).To(ConsistOf("core"))
			Expect(networksOf("scscf" + k)).To(ConsistOf("core", "cx"))
		}
		for name, nw := range doc.Networks {
			Expect(nw.Internal).To(BeTrue(), "nothing is forwarded into or out of the %s network", name)
		}
		Expect(doc.Networks["access"].DriverOpts).To(BeEmpty(), "the host is on the access network (the compose backend's phones)")
		for _, name := range []string{"core", "cx"} {
			Expect(doc.Networks[name].DriverOpts).To(HaveKeyWithValue("com.docker.network.bridge.inhibit_ipv4", "true"),
				"the host has no address on the %s network", name)
		}
		access := func(name string) string { return doc.Services[name].Networks["access"].IPv4 }

		// The BAC has a socket on each side; the phones send everything to its access side.
		bac, err := topology.ParseNodeConfig(b.Files["config/bac.yaml"])
		Expect(err).NotTo(HaveOccurred())
		Expect(bac.Listen).To(Equal(doc.Services["bac"].Networks["core"].IPv4 + ":5060"))
		Expect(bac.AccessListen).To(Equal(access("bac") + ":5060"))
		var phones ue.Config
		Expect(yaml.Unmarshal(b.Files["ue.yaml"], &phones)).To(Succeed())
		Expect(phones.Proxy).To(Equal(access("bac")+":5060"), "the phones target the BAC's access address")
		Expect(phones.Listen).To(Equal(access("traffic") + ":5060"))
		Expect(b.PhoneProxy()).To(Equal(bac.AccessListen))
		Expect(b.GatewayAddr()).To(Equal("172.28.88.1"), "the compose backend's phones send from the access network")

		// The HSS listens (Diameter, HTTP API and metrics) on the Cx network only, and the DNS points there.
		hss := doc.Services["hss"].Networks["cx"].IPv4
		hc, err := b.Topology.NodeConfig("hss")
		Expect(err).NotTo(HaveOccurred())
		Expect(hc.HSS.DiameterListen).To(Equal(hss + ":3868"))
		Expect(hc.HSS.HTTPListen).To(Equal(hss + ":8090"))
		Expect(string(b.Files["config/hss.yaml"])).To(ContainSubstring("http_listen: " + hss + ":8090"))
		var diameterA []string
		for _, r := range b.Topology.Zone().Records {
			if r.Name == "hss.ims.test" && r.Type == topology.TypeA {
				diameterA = append(diameterA, r.Address)
			}
		}
		Expect(diameterA).To(ConsistOf(hss), "the Diameter SRV target's A record is the HSS's Cx address")

		// The HSS believes its Cx clients by their Cx addresses: the source of their connections.
		Expect(hc.Trust).NotTo(BeNil())
		peers := map[string]string{}
		for _, p := range hc.Trust.DiameterPeers {
			peers[p.OriginHost] = p.Address
		}
		Expect(peers).To(Equal(map[string]string{
			"icscf.ims.test":  doc.Services["icscf"].Networks["cx"].IPv4,
			"scscf1.ims.test": doc.Services["scscf1"].Networks["cx"].IPv4,
			"scscf2.ims.test": doc.Services["scscf2"].Networks["cx"].IPv4,
			"scscf3.ims.test": doc.Services["scscf3"].Networks["cx"].IPv4,
		}))
	})

	It("lays the topology out for containers: the DNS zone names the container addresses and standard ports", func() {
		t := b.Topology
		Expect(t.DNS.Listen).To(Equal("172.28.89.2:53"))
		for _, r := range t.Zone().Records {
			if r.Type == topology.TypeSRV && strings.HasPrefix(r.Name, topology.SIPUDPPrefix) {
				Expect(r.Port).To(BeEquivalentTo(5060), r.String())
			}
		}
		p1, ok := t.Node("pcscf1")
		Expect(ok).To(BeTrue())
		Expect(p1.Listen()).To(Equal("172.28.89.11:5060"))
		nc, err := topology.ParseNodeConfig(b.Files["config/pcscf1.yaml"])
		Expect(err).NotTo(HaveOccurred())
		Expect(nc.Listen).To(Equal("172.28.89.11:5060"))
		Expect(nc.DNSServer).To(Equal("172.28.89.2:53"))
		Expect(nc.EventsFile).To(Equal("/data/events/pcscf1.jsonl"))
		Expect(nc.TraceFile).To(Equal("/data/trace/pcscf1.pcapng"))
		dn, err := topology.ParseNodeConfig(b.Files["config/dnsd.yaml"])
		Expect(err).NotTo(HaveOccurred())
		Expect(dn.DNS.Topology).To(Equal("/lab/topology.yaml"))
		parsed, err := topology.Parse(b.Files["topology.yaml"])
		Expect(err).NotTo(HaveOccurred())
		Expect(parsed.Zone()).To(Equal(t.Zone()), "dnsd serves the zone of the laid-out topology")
	})

	It("keeps pool sizes and schemes and follows another subnet", func() {
		t := topology.Default()
		t.Pools.PCSCF.Size, t.Pools.SCSCF.Size = 5, 2
		t.Pools.SCSCF.Scheme = topology.SchemeActiveStandby
		o := compose.DefaultOptions()
		o.Subnet = netip.MustParsePrefix("10.77.3.0/24")
		b, err := compose.Generate(t, o)
		Expect(err).NotTo(HaveOccurred())
		var doc composeDoc
		Expect(yaml.Unmarshal(b.Compose, &doc)).To(Succeed())
		Expect(doc.Services).To(HaveKey("scscf2b"), "the standbys of an active-standby pool are services too")
		Expect(doc.Services["scscf2b"].Networks["core"].IPv4).To(Equal("10.77.3.42"))
		Expect(doc.Services["scscf2b"].Networks["cx"].IPv4).To(Equal("10.77.4.42"), "a standby is a Cx client too")
		hc, err := b.Topology.NodeConfig("hss")
		Expect(err).NotTo(HaveOccurred())
		Expect(hc.Trust.DiameterPeers).To(ContainElement(HaveField("Address", "10.77.4.42")))
		nc, err := topology.ParseNodeConfig(b.Files["config/scscf1.yaml"])
		Expect(err).NotTo(HaveOccurred())
		Expect(nc.SCSCFScheme).To(Equal(topology.SchemeActiveStandby))
		Expect(doc.Services).To(HaveKey("pcscf5"))
		Expect(doc.Services).NotTo(HaveKey("scscf3"))
		Expect(doc.Services["pcscf5"].Networks["core"].IPv4).To(Equal("10.77.3.15"))
		Expect(doc.Services["traffic"].Networks["access"].IPv4).To(Equal("10.77.2.100"))
		Expect(doc.Services["bac"].Networks["access"].IPv4).To(Equal("10.77.2.4"))
		Expect(doc.Services["hss"].Networks["cx"].IPv4).To(Equal("10.77.4.3"))
	})

	It("refuses a subnet too small for the address plan and a bridge name Linux cannot take", func() {
		o := compose.DefaultOptions()
		o.Subnet = netip.MustParsePrefix("10.1.2.0/26")
		_, err := compose.Generate(topology.Default(), o)
		Expect(err).To(MatchError(ContainSubstring("/24 or larger")))
		o = compose.DefaultOptions()
		o.Bridge = "a-very-long-bridge-name"
		_, err = compose.Generate(topology.Default(), o)
		Expect(err).To(MatchError(ContainSubstring("at most 13")))
	})

	It("writes the files and finds them stale after a change", func() {
		dir := GinkgoT().TempDir()
		file, cfg := filepath.Join(dir, "docker-compose.yml"), filepath.Join(dir, "deploy")
		Expect(b.Write(file, cfg)).To(Succeed())
		Expect(b.Stale(file, cfg)).To(BeEmpty())
		Expect(os.WriteFile(filepath.Join(cfg, "config", "pcscf9.yaml"), []byte("x"), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(cfg, "config", "bac.yaml"), []byte("x"), 0o644)).To(Succeed())
		Expect(b.Stale(file, cfg)).To(ConsistOf(filepath.Join(cfg, "config", "bac.yaml"),
			filepath.Join(cfg, "config", "pcscf9.yaml")+" (left over)"))
		Expect(b.Write(file, cfg)).To(Succeed())
		Expect(b.Stale(file, cfg)).To(BeEmpty(), "writing again removes the left-over file")
	})
})
