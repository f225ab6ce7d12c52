package compose_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/compose"
	"github.com/imslab/quasipool/internal/lab"
	"github.com/imslab/quasipool/internal/topology"
)

// composeDoc is the part of a compose file the specs check.
type composeDoc struct {
	Services map[string]struct {
		Image         string   `yaml:"image"`
		ContainerName string   `yaml:"container_name"`
		Command       []string `yaml:"command"`
		Volumes       []string `yaml:"volumes"`
		DNS           []string `yaml:"dns"`
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
		IPAM struct {
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

	It("is what is committed at the repository root (regenerate with go run ./cmd/imslab compose)", func() {
		repo := repoRoot()
		Expect(b.Stale(filepath.Join(repo, compose.CommittedFile), filepath.Join(repo, compose.CommittedDir))).To(BeEmpty())
	})

	It("has one service per node of the topology plus the phones, each on a fixed address of the lab network", func() {
		nodes := topology.Default().Nodes()
		Expect(doc.Services).To(HaveLen(len(nodes) + 1))
		Expect(doc.Networks["lab"].IPAM.Config).To(HaveLen(1))
		subnet := netip.MustParsePrefix(doc.Networks["lab"].IPAM.Config[0].Subnet)
		seen := map[string]string{}
		for name, s := range doc.Services {
			Expect(s.ContainerName).To(BeEmpty(), "%s: no container_name, so labs can run side by side", name)
			Expect(s.Image).To(Equal("${IMSLAB_IMAGE:-imslab/quasipool:latest}"))
			addr := netip.MustParseAddr(s.Networks["lab"].IPv4)
			Expect(subnet.Contains(addr)).To(BeTrue(), "%s: %s in %s", name, addr, subnet)
			Expect(seen).NotTo(HaveKey(addr.String()), "%s and %s share an address", name, seen[addr.String()])
			seen[addr.String()] = name
			Expect(s.DNS).To(Equal([]string{doc.Services["dnsd"].Networks["lab"].IPv4}), "%s uses dnsd", name)
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
		Expect(nc.TraceFile).To(Equal("/data/trace/pcscf1.jsonl"))
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
		Expect(doc.Services["scscf2b"].Networks["lab"].IPv4).To(Equal("10.77.3.42"))
		nc, err := topology.ParseNodeConfig(b.Files["config/scscf1.yaml"])
		Expect(err).NotTo(HaveOccurred())
		Expect(nc.SCSCFScheme).To(Equal(topology.SchemeActiveStandby))
		Expect(doc.Services).To(HaveKey("pcscf5"))
		Expect(doc.Services).NotTo(HaveKey("scscf3"))
		Expect(doc.Services["pcscf5"].Networks["lab"].IPv4).To(Equal("10.77.3.15"))
		Expect(doc.Services["traffic"].Networks["lab"].IPv4).To(Equal("10.77.3.100"))
	})

	It("refuses a subnet too small for the address plan and a bridge name Linux cannot take", func() {
		o := compose.DefaultOptions()
		o.Subnet = netip.MustParsePrefix("10.1.2.0/26")
		_, err := compose.Generate(topology.Default(), o)
		Expect(err).To(MatchError(ContainSubstring("/24 or larger")))
		o = compose.DefaultOptions()
		o.Bridge = "a-very-long-bridge-name"
		_, err = compose.Generate(topology.Default(), o)
		Expect(err).To(MatchError(ContainSubstring("at most 15")))
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
