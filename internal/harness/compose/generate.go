// Package compose runs the lab as Docker containers: it generates the compose file and the node configurations
// from a topology (the same source as the local lab and the DNS zone, so they cannot drift), builds the lab
// image, and controls a running compose lab for scenarios (kill, pause, stop, start, restart through the Docker
// Engine API), with a packet capture of the lab networks.
//
// The lab has three networks, as a real IMS (topology.Networks): access (the phones and the BAC's access side),
// core (the BAC's core side, the CSCFs, dnsd) and cx (the I-CSCF, the S-CSCFs and the HSS). All three are
// internal, and the host has an address on the access network only: a phone on the access network, in a
// container or on the host, reaches the BAC and nothing behind it.
//
// Layout of a generated lab (Generate, Lab.Write):
//
//	docker-compose.yml          services dnsd, hss, bac, pcscf1…N, icscf, scscf1…N and (optionally) traffic
//	<config-dir>/topology.yaml  the topology laid out for containers (dnsd serves its zone)
//	<config-dir>/config/*.yaml  one configuration per node, mounted read-only at /lab in every container
//	<config-dir>/ue.yaml        the traffic service's phones
package compose

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/topology"
)

// Defaults of the generated lab.
var (
	// DefaultSubnet is the core network of the committed docker-compose.yml; the access network is the /24 below
	// it (172.28.88.0/24), the Cx network the /24 above (172.28.90.0/24).
	DefaultSubnet = netip.MustParsePrefix("172.28.89.0/24")
)

const (
	// DefaultImage is the lab image (make lab-image); the compose file lets IMSLAB_IMAGE override it.
	DefaultImage = "imslab/quasipool:latest"
	// DataVolume is the named volume of the committed compose file: HSS database, events, message traces.
	DataVolume = "data"
	// MountConfig and MountData are where the configuration directory and the data land in the containers.
	MountConfig = "/lab"
	MountData   = "/data"
	// The compose networks of the lab.
	NetworkAccess = "access" // phones, the BAC's access side
	NetworkCore   = "core"   // the BAC's core side, P-CSCFs, I-CSCF, S-CSCFs, dnsd
	NetworkCx     = "cx"     // I-CSCF, S-CSCFs, HSS (Diameter, the HSS's HTTP API and metrics)
)

// The committed lab: docker-compose.yml at the repository root and its configuration directory, generated from
// the default topology with DefaultOptions (imslab compose).
const (
	CommittedFile = "docker-compose.yml"
	CommittedDir  = "deploy/compose"
)

// DefaultOptions are the options of the committed lab: the default subnet, the traffic service with 20 phones
// calling at 1 call/s, the named data volume.
func DefaultOptions() Options {
	return Options{Subnet: DefaultSubnet, ConfigDir: "./" + CommittedDir, Source: "topologies/default.yaml",
		Traffic: &Traffic{Phones: 20, CallRate: 1}}
}

// Traffic configures the traffic service: simulated phones registering and calling through the BAC.
type Traffic struct {
	Phones   int     // user0001…
	CallRate float64 // calls per second over all phones
}

// Options configure Generate.
type Options struct {
	// Subnet is the core network (default DefaultSubnet); the access and Cx networks are the blocks of the same
	// size just below and just above it (topology.NetworksAround). Node addresses follow topology.ForContainers.
	Subnet netip.Prefix
	// Image is the image of every service ("" = ${IMSLAB_IMAGE:-DefaultImage}).
	Image string
	// ConfigDir is the configuration directory as the compose file names it (relative to the compose file).
	ConfigDir string
	// DataDir is a host directory bind-mounted at /data ("" = the named volume DataVolume).
	DataDir string
	// User runs every container as this uid:gid ("" = the image's root).
	User string
	// Bridge is the prefix of the host's interfaces of the lab networks: <Bridge>-a (access), <Bridge>-c (core),
	// <Bridge>-x (cx); at most 13 characters ("" = Docker's choice).
	Bridge string
	// Traffic adds the traffic service (nil = none; scenario runs drive phones of their own).
	Traffic *Traffic
	// Source names the topology file in the generated files' header.
	Source string
	// Seed is the run's seed: every node's configuration gets a seed derived from it (topology.RunSeed); 0 = none
	// (the nodes seed from the clock), as in the committed example lab.
	Seed int64
	// Labels are put on every service and network ("" = none, as in the committed lab): the compose lab's owner
	// labels (OwnerLabels), by which `imslab clean` finds the projects of crashed runs.
	Labels map[string]string
	// GoMaxProcs is the GOMAXPROCS every node's container gets ("" = not set: Go's default, every CPU the
	// container may use, as in the committed lab, which is meant for any machine). The compose backend of the
	// scenario runs sets topology.NodeGoMaxProcsSetting for the machine it runs on, as the local lab does.
	GoMaxProcs string
	// NoHealthcheck leaves the engine's healthchecks out (depends_on then orders the start only): the lab of a
	// scenario run as root checks readiness itself from inside each container's network namespace (Lab.Up),
	// because each healthcheck is a process run in the container every 5 s for its whole life.
	NoHealthcheck bool
}

// Bundle is a generated compose lab: the compose file and the files of its configuration directory.
type Bundle struct {
	// Topology is the topology laid out for containers.
	Topology *topology.Topology
	// Networks are the lab's access, core and Cx networks (also in Topology.Networks).
	Networks topology.Networks
	// Compose is docker-compose.yml.
	Compose []byte
	// Files are the configuration directory's files by relative path (topology.yaml, config/<node>.yaml, ue.yaml).
	Files map[string][]byte
}

func header(o Options, what string) string {
	src := o.Source
	if src == "" {
		src = "the embedded default topology"
	}
	return fmt.Sprintf("# %s, generated by `imslab compose` from %s. Do not edit: change the topology and\n"+
		"# generate again (docs/compose.md); a test fails when the committed files are stale.\n", what, src)
}

// Generate lays the topology out for containers and returns the compose file and configurations.
func Generate(t *topology.Topology, o Options) (*Bundle, error) {
	if !o.Subnet.IsValid() {
		o.Subnet = DefaultSubnet
	}
	if o.ConfigDir == "" {
		o.ConfigDir = "./deploy/compose"
	}
	if len(o.Bridge) > 13 {
		return nil, fmt.Errorf("compose: bridge name prefix %q: at most 13 characters (Linux takes 15, the suffix is 2)", o.Bridge)
	}
	nets, err := topology.NetworksAround(o.Subnet)
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	ct, err := t.ForContainers(nets)
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	l := &Bundle{Topology: ct, Networks: nets, Files: map[string][]byte{}}
	tb, err := ct.Marshal()
	if err != nil {
		return nil, err
	}
	l.Files["topology.yaml"] = append([]byte(header(o, "The lab topology laid out for containers")), tb...)
	opts := []topology.NodeOption{topology.InRunDir(MountData), topology.TopologyFile(MountConfig + "/topology.yaml"),
		topology.RunSeed(o.Seed)}
	for _, n := range ct.Nodes() {
		nc, err := ct.NodeConfig(n.Name, opts...)
		if err != nil {
			return nil, err
		}
		var b []byte
		if n.Kind == topology.KindHSS {
			b, err = lab.HSSConfigYAML(nc)
		} else {
			b, err = nc.Marshal()
		}
		if err != nil {
			return nil, err
		}
		l.Files["config/"+n.Name+".yaml"] = b
	}
	if o.Traffic != nil {
		b, err := trafficConfig(l, o.Traffic)
		if err != nil {
			return nil, err
		}
		l.Files["ue.yaml"] = append([]byte(header(o, "The traffic service's phones")), b...)
	}
	if l.Compose, err = composeFile(ct, nets, o); err != nil {
		return nil, err
	}
	return l, nil
}

// trafficConfig configures the traffic service's phones: on the access network, sending everything to the BAC's
// access address (the DNS records name core addresses, which the access network cannot reach).
func trafficConfig(l *Bundle, tr *Traffic) ([]byte, error) {
	t := l.Topology
	c := ue.DefaultConfig()
	c.Listen = netip.AddrPortFrom(topology.TrafficAddr(l.Networks.Access), topology.ContainerSIPPort).String()
	c.Domain = t.Domain
	c.DNSServer = ""
	c.Proxy = l.PhoneProxy()
	c.Users.From, c.Users.Count = 1, tr.Phones
	c.Expires = int(t.Registration.Expires / time.Second)
	c.CallRate = tr.CallRate
	c.Deregister = true
	c.RecordsFile = MountData + "/records.jsonl"
	c.EventsFile = MountData + "/events/ue.jsonl"
	b, err := yaml.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("compose: ue config: %w", err)
	}
	return b, nil
}

// unresQueueBytes bounds what the kernel holds for a neighbour it cannot resolve, per interface of a node's
// container (net.ipv4.neigh.<dev>.unres_qlen_bytes; the kernel's default is 212,992 bytes, as much as a UDP
// socket's whole send buffer). An internal network still gives its containers a default route, through a gateway
// that has no address on the host when the bridge inhibits IPv4 (core, Cx): nothing answers its ARP, and every
// packet a node sends off its networks waits there, charged to the socket that sent it. A node whose SIP socket
// sent a steady stream there (the P-CSCFs, relaying the ACKs and BYEs of a dialog whose remote target was a
// phone's own address) filled its send buffer and stopped sending to everyone: every P-CSCF stopped answering at
// once (docs/compose.md, "One unreachable address stalled a node"). At 16 KiB a few SIP messages wait; the rest
// are dropped, as they would be after the failed resolution anyway.
const unresQueueBytes = "16384"

// service is one compose service, fields in the order they are written.
type service struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command,flow"`
	User        string            `yaml:"user,omitempty"`
	Environment map[string]string `yaml:"environment,omitempty"`
	Sysctls     map[string]string `yaml:"sysctls,omitempty"`
	Volumes     []string          `yaml:"volumes"`
	Networks    *orderedMap       `yaml:"networks"`
	DNS         []string          `yaml:"dns,flow,omitempty"`
	Healthcheck *healthcheck      `yaml:"healthcheck,omitempty"`
	DependsOn   *orderedMap       `yaml:"depends_on,omitempty"`
	StopGrace   string            `yaml:"stop_grace_period"`
	Restart     string            `yaml:"restart"`
	Labels      map[string]string `yaml:"labels,omitempty"`
}

type netCfg struct {
	IPv4 string `yaml:"ipv4_address"`
}

type healthcheck struct {
	Test        []string `yaml:"test,flow"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

type condition struct {
	Condition string `yaml:"condition"`
}

// orderedMap is a YAML mapping written in insertion order.
type orderedMap struct {
	keys []string
	vals []any
}

func (m *orderedMap) set(k string, v any) { m.keys = append(m.keys, k); m.vals = append(m.vals, v) }

func (m *orderedMap) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for i, k := range m.keys {
		var v yaml.Node
		if err := v.Encode(m.vals[i]); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &v)
	}
	return n, nil
}

// startOrder is the order of the services in the file and of their dependencies: DNS and HSS first, then the
// core from the inside out, the BAC and the phones last.
var startOrder = map[topology.Kind]int{topology.KindDNS: 0, topology.KindHSS: 1, topology.KindSCSCF: 2,
	topology.KindICSCF: 3, topology.KindPCSCF: 4, topology.KindBAC: 5}

// ServiceNames returns the services of a topology's compose lab in start order (without the traffic service).
func ServiceNames(t *topology.Topology) []string {
	nodes := slices.Clone(t.Nodes())
	slices.SortStableFunc(nodes, func(a, b topology.Node) int { return startOrder[a.Kind] - startOrder[b.Kind] })
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// TrafficService is the name of the phones' service.
const TrafficService = "traffic"

// networksOf names the networks a node joins, in the order they are written: the BAC is the border between
// access and core, the I-CSCF and the S-CSCFs are the HSS's Cx clients, the HSS is on the Cx network only.
func networksOf(k topology.Kind) []string {
	switch k {
	case topology.KindBAC:
		return []string{NetworkAccess, NetworkCore}
	case topology.KindICSCF, topology.KindSCSCF:
		return []string{NetworkCore, NetworkCx}
	case topology.KindHSS:
		return []string{NetworkCx}
	}
	return []string{NetworkCore}
}

// addrOn is a node's address on one of the lab networks (its host number is the same on each).
func addrOn(t *topology.Topology, n topology.Node, network string) string {
	switch network {
	case NetworkAccess:
		return t.AccessAddress(n)
	case NetworkCx:
		return t.CxAddress(n)
	}
	return n.Address
}

func composeFile(t *topology.Topology, nets topology.Networks, o Options) ([]byte, error) {
	image := o.Image
	if image == "" {
		image = "${IMSLAB_IMAGE:-" + DefaultImage + "}"
	}
	data := DataVolume
	if o.DataDir != "" {
		data = o.DataDir
	}
	vols := []string{o.ConfigDir + ":" + MountConfig + ":ro", data + ":" + MountData}
	dnsAddr := topology.ContainerAddr(nets.Core, 2).String()
	if n, ok := t.Node(t.DNS.Host); ok {
		dnsAddr = n.Address
	}
	// Every 5 s, not 2 s: each check is an exec in the container (runc, a new process), and the engine keeps
	// checking for the container's whole life. Every 2 s the twelve containers' checks kept about a third of a
	// 2-core machine busy with no traffic at all (an idle lab used 45 % of both cores), and the compose scenario
	// runs failed for want of CPU. The cost: `up --wait` and a restarted node are seen healthy up to 5 s later.
	probe := func(args ...string) *healthcheck {
		return &healthcheck{Test: append([]string{"CMD", "/bin/imslab", "probe"}, args...), Interval: "5s",
			Timeout: "2s", Retries: 12, StartPeriod: "30s"}
	}
	services := &orderedMap{}
	healthy := func(names ...string) *orderedMap {
		m := &orderedMap{}
		cond := "service_healthy"
		if o.NoHealthcheck {
			cond = "service_started" // nothing tells healthy: the order only, readiness is the lab's (Lab.Up)
		}
		for _, n := range names {
			m.set(n, condition{Condition: cond})
		}
		return m
	}
	var core []string // every SIP node, for the traffic service
	for _, name := range ServiceNames(t) {
		n, _ := t.Node(name)
		networks := &orderedMap{}
		onCore := false
		sysctls := map[string]string{}
		for i, nw := range networksOf(n.Kind) {
			networks.set(nw, netCfg{IPv4: addrOn(t, n, nw)})
			onCore = onCore || nw == NetworkCore
			// The container's interfaces are eth0, eth1, … in the order of its networks.
			sysctls[fmt.Sprintf("net.ipv4.neigh.eth%d.unres_qlen_bytes", i)] = unresQueueBytes
		}
		s := service{Image: image, User: o.User, Volumes: vols, Networks: networks, StopGrace: "5s", Restart: "no",
			Sysctls: sysctls,
			Command: []string{"/bin/" + string(n.Kind), "--config", path.Join(MountConfig, "config", n.Name+".yaml")}}
		if onCore {
			s.DNS = []string{dnsAddr} // the HSS looks nothing up, and dnsd is not on the Cx network
		}
		if o.GoMaxProcs != "" {
			s.Environment = map[string]string{topology.GoMaxProcsEnv: o.GoMaxProcs}
		}
		kind, addr, domain := readiness(t, n)
		if !o.NoHealthcheck {
			args := []string{kind, addr}
			if domain != "" {
				args = append(args, domain)
			}
			s.Healthcheck = probe(args...)
		}
		switch n.Kind {
		case topology.KindDNS:
			// Port 53 for any uid: the lab may run as the invoking user to own its files.
			s.Sysctls["net.ipv4.ip_unprivileged_port_start"] = "0"
		case topology.KindHSS:
		default:
			s.DependsOn = healthy(t.DNS.Host)
			if n.Kind == topology.KindSCSCF || n.Kind == topology.KindICSCF {
				s.DependsOn = healthy(t.DNS.Host, t.HSS.Host)
			}
			core = append(core, n.Name)
		}
		s.Labels = o.Labels
		services.set(name, s)
	}
	if o.Traffic != nil {
		networks := &orderedMap{}
		networks.set(NetworkAccess, netCfg{IPv4: topology.TrafficAddr(nets.Access).String()})
		services.set(TrafficService, service{Image: image, User: o.User, Volumes: vols, Networks: networks,
			StopGrace: "10s", Restart: "no",
			Command:   []string{"/bin/ue", "--config", path.Join(MountConfig, "ue.yaml")},
			DependsOn: healthy(core...), Labels: o.Labels})
	}
	networks := &orderedMap{}
	for _, nw := range []struct {
		name     string
		subnet   netip.Prefix
		hostless bool
		suffix   string
	}{{NetworkAccess, nets.Access, false, "-a"}, {NetworkCore, nets.Core, true, "-c"}, {NetworkCx, nets.Cx, true, "-x"}} {
		network := &orderedMap{}
		network.set("driver", "bridge")
		// Docker forwards nothing into or out of an internal network: a container on the access network can
		// reach the BAC's access side and nothing else, not even through the host (no NAT to the outside either).
		network.set("internal", true)
		opts := map[string]string{}
		if nw.hostless {
			// And the host gets no address on the core and Cx bridges: the host is the gateway of every network it
			// has an address on, so with one there a process on the host (the compose backend's phones, on the
			// access network's gateway address) could talk to the CSCFs and the HSS directly, and they would
			// answer through their default route.
			opts["com.docker.network.bridge.inhibit_ipv4"] = "true"
		}
		network.set("ipam", map[string]any{"config": []map[string]string{{"subnet": nw.subnet.String(),
			"gateway": topology.GatewayAddr(nw.subnet).String()}}})
		if o.Bridge != "" {
			opts["com.docker.network.bridge.name"] = o.Bridge + nw.suffix
		}
		if len(opts) > 0 {
			network.set("driver_opts", opts)
		}
		if len(o.Labels) > 0 {
			network.set("labels", o.Labels)
		}
		networks.set(nw.name, network)
	}
	doc := &orderedMap{}
	doc.set("services", services)
	doc.set("networks", networks)
	if o.DataDir == "" {
		doc.set("volumes", map[string]any{DataVolume: map[string]any{}})
	}
	var buf bytes.Buffer
	buf.WriteString(header(o, "The lab as Docker containers"))
	fmt.Fprintf(&buf, "# Networks as in a real IMS: access %s (phones, the BAC), core %s (the BAC, the CSCFs, dnsd at %s)\n"+
		"# and cx %s (the I-CSCF, the S-CSCFs, the HSS with its HTTP API); a node has the same host number on each.\n"+
		"# Phones reach the BAC only. Node logs: docker compose logs; HSS data, events and traces: the volume at /data.\n",
		nets.Access, nets.Core, dnsAddr, nets.Cx)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	return buf.Bytes(), nil
}

// Addr returns ip:port of a node's main port (on the core network; the HSS's on the Cx network).
func (l *Bundle) Addr(node string) string {
	n, ok := l.Topology.Node(node)
	if !ok {
		return ""
	}
	return n.Listen()
}

// PhoneProxy is where phones on the access network send everything: the BAC's access address.
func (l *Bundle) PhoneProxy() string {
	for _, n := range l.Topology.NodesOfKind(topology.KindBAC) {
		return net.JoinHostPort(l.Topology.AccessAddress(n), strconv.Itoa(n.Ports[0].Port))
	}
	return ""
}

// GatewayAddr is the host's address on the access network: the compose backend's phones send from it.
func (l *Bundle) GatewayAddr() string { return topology.GatewayAddr(l.Networks.Access).String() }

// Write writes the compose file to composePath and the configuration directory to configDir (created; config
// files of nodes the topology no longer has are removed).
func (l *Bundle) Write(composePath, configDir string) error {
	if err := os.MkdirAll(filepath.Join(configDir, "config"), 0o755); err != nil {
		return fmt.Errorf("compose: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(configDir, "config", "*.yaml"))
	for _, p := range old {
		rel, _ := filepath.Rel(configDir, p)
		if _, ok := l.Files[filepath.ToSlash(rel)]; !ok {
			_ = os.Remove(p)
		}
	}
	for rel, b := range l.Files {
		if err := os.WriteFile(filepath.Join(configDir, filepath.FromSlash(rel)), b, 0o644); err != nil {
			return fmt.Errorf("compose: %w", err)
		}
	}
	if err := os.WriteFile(composePath, l.Compose, 0o644); err != nil {
		return fmt.Errorf("compose: %w", err)
	}
	return nil
}

// Stale compares a generated lab with the files on disk and names every file that differs, is missing or is
// left over (an empty list: up to date).
func (l *Bundle) Stale(composePath, configDir string) []string {
	var out []string
	if b, err := os.ReadFile(composePath); err != nil || !bytes.Equal(b, l.Compose) {
		out = append(out, composePath)
	}
	for _, rel := range slices.Sorted(maps.Keys(l.Files)) {
		p := filepath.Join(configDir, filepath.FromSlash(rel))
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, l.Files[rel]) {
			out = append(out, p)
		}
	}
	existing, _ := filepath.Glob(filepath.Join(configDir, "config", "*.yaml"))
	for _, p := range existing {
		rel, _ := filepath.Rel(configDir, p)
		if _, ok := l.Files[filepath.ToSlash(rel)]; !ok {
			out = append(out, p+" (left over)")
		}
	}
	return out
}

// MustDefault is the committed lab (Generate of the default topology with DefaultOptions).
func MustDefault() *Bundle {
	b, err := Generate(topology.Default(), DefaultOptions())
	if err != nil {
		panic("compose: default lab: " + err.Error())
	}
	return b
}
