package topology

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// NodeConfig is the configuration of one node, derived from the topology. Network functions map it to their own
// Config. The YAML form is what WriteNodeConfigs writes and LoadNodeConfig reads.
type NodeConfig struct {
	Name   string `yaml:"name"`
	Kind   Kind   `yaml:"kind"`
	Domain string `yaml:"domain"`
	FQDN   string `yaml:"fqdn"`
	// Listen is the node's main address: SIP over UDP for bac and the CSCFs, DNS (UDP+TCP) for dnsd, Diameter
	// for the HSS.
	Listen string `yaml:"listen"`
	// AccessListen (BAC only) is the SIP/UDP address phones send to when the access network is separate from
	// the core network (the compose lab); "" = phones and the core share Listen (the local lab). An SBC has a
	// socket on each side and so knows which side a request came from.
	AccessListen string `yaml:"access_listen,omitempty"`
	// DNSServer is the lab's DNS server (ip:port); every name lookup of the node goes there.
	DNSServer    string       `yaml:"dns_server"`
	Timers       Timers       `yaml:"timers"`
	Probing      Probing      `yaml:"probing"`
	Failover     Failover     `yaml:"failover,omitempty"`
	Registration Registration `yaml:"registration"`
	// EventsFile receives the node's events, one JSON line each ("" = none).
	EventsFile string `yaml:"events_file,omitempty"`
	// TraceFile names the node's message trace: every SIP datagram and Diameter message it sends or receives, as
	// pcapng segments <TraceFile without extension>.001.pcapng, … (docs/architecture.md, "Message trace"); "" =
	// none. TraceMaxBytes bounds the node's trace files (0: obs.DefaultTraceMaxBytes).
	TraceFile     string `yaml:"trace_file,omitempty"`
	TraceMaxBytes int64  `yaml:"trace_max_bytes,omitempty"`
	// Overload is the node's overload control (the topology's).
	Overload Overload `yaml:"overload,omitempty"`
	// MetricsListen is where a SIP node serves Prometheus metrics at /metrics ("" = none; nodes.<name>.metrics).
	MetricsListen string `yaml:"metrics_listen,omitempty"`
	Log           Log    `yaml:"log"`
	// Seed seeds every random choice of the node (its forwarder's target order, its probers' phases), derived
	// from the run's seed and the node's name (NodeSeed); 0 = a seed from the clock (a node started by hand).
	Seed uint64 `yaml:"seed,omitempty"`

	// Peers names what the node resolves to reach the others.
	Peers Peers `yaml:"peers,omitempty"`
	// Trust says which peers the node believes, and for what (docs/security.md). Set for the BAC, the CSCFs and
	// the HSS; generated from the topology, never looked up in DNS.
	Trust *Trust `yaml:"trust,omitempty"`
	// PCSCFScheme and SCSCFScheme are the protection schemes of the two pools (docs/schemes.md), set for the BAC
	// and the CSCFs; "" means quasi-pool.
	PCSCFScheme string `yaml:"pcscf_scheme,omitempty"`
	SCSCFScheme string `yaml:"scscf_scheme,omitempty"`
	// Replication is set for pool members whose pool replicates registration state (pool-sync, active-standby, mutual).
	Replication *ReplicationConfig `yaml:"replication,omitempty"`

	DNS *DNSNodeConfig `yaml:"dns,omitempty"` // dnsd only
	HSS *HSSNodeConfig `yaml:"hss,omitempty"` // hss only
}

// Peers are the names a node resolves. SIP names are host names whose _sip._udp SRV record the node looks up
// (RFC 3263); HSS is the full SRV name of the Diameter server.
type Peers struct {
	PCSCFPool string `yaml:"pcscf_pool,omitempty"` // bac: pcscf.ims.test (pool record)
	ICSCF     string `yaml:"icscf,omitempty"`      // pcscf, scscf: icscf.ims.test
	SCSCFPool string `yaml:"scscf_pool,omitempty"` // icscf: scscf.ims.test (pool record)
	HSS       string `yaml:"hss,omitempty"`        // icscf, scscf: _diameter._tcp.hss.ims.test
}

// ReplicationConfig is where a pool member pushes its registration state and where it receives its peers'
// (internal/runtime/repl, docs/schemes.md): member-to-member over TCP, on the same port number as the member's SIP/UDP.
// The member accepts replication only from its peers: a connection from a peer's IP, and messages that name a
// peer (PeerNames[i] is the node at Peers[i]).
type ReplicationConfig struct {
	Listen    string   `yaml:"listen"`     // ip:port, TCP
	Peers     []string `yaml:"peers"`      // ip:port (TCP) of the members that get a copy of every change
	PeerNames []string `yaml:"peer_names"` // node names of the peers, in the order of Peers (required)
}

// DNSNodeConfig is what dnsd needs besides the common fields.
type DNSNodeConfig struct {
	// Topology is the topology file the zone is built from ("" = the embedded default).
	Topology string        `yaml:"topology,omitempty"`
	TTL      time.Duration `yaml:"ttl"`
}

// HSSNodeConfig is what the HSS needs besides the common fields.
type HSSNodeConfig struct {
	DiameterListen  string `yaml:"diameter_listen"`
	HTTPListen      string `yaml:"http_listen"`
	DataDir         string `yaml:"data_dir"`
	OriginHost      string `yaml:"origin_host"`
	OriginRealm     string `yaml:"origin_realm"`
	LabSubscribers  bool   `yaml:"lab_subscribers"`
	SubscribersFile string `yaml:"subscribers_file,omitempty"`
	// LabSubscriberCount: user0001…user<count> (0: the HSS's default, 1000).
	LabSubscriberCount int `yaml:"lab_subscriber_count,omitempty"`
}

// NodeOption adjusts the paths written into node configurations.
type NodeOption func(*nodeOpts)

type nodeOpts struct {
	runDir       string
	topologyFile string
	seed         int64
}

// RunSeed gives every node a seed derived from the run's seed and its name (NodeSeed), so a run repeated with
// the same seed makes the same random choices (0: no seed, the nodes pick one from the clock).
func RunSeed(seed int64) NodeOption { return func(o *nodeOpts) { o.seed = seed } }

// NodeSeed derives a node's seed from the run's seed and the node's name: FNV-1a (64 bit) of both, never 0.
func NodeSeed(runSeed int64, name string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(runSeed))
	h.Write(b[:])
	h.Write([]byte(name))
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}

// InRunDir places every node's files under one run directory: events in <dir>/events/<node>.jsonl, the HSS
// database in <dir>/data/<hss>, and dnsd reads the topology from <dir>/topology.yaml (the caller writes it, e.g.
// with Topology.WriteFile). Without it there is no events file, the HSS uses data/<hss> and dnsd the embedded
// default topology unless TopologyFile is given.
func InRunDir(dir string) NodeOption { return func(o *nodeOpts) { o.runDir = dir } }

// TopologyFile sets the topology file dnsd reads (overrides the one of InRunDir).
func TopologyFile(path string) NodeOption { return func(o *nodeOpts) { o.topologyFile = path } }

// NodeConfig returns the configuration of the named node.
func (t *Topology) NodeConfig(name string, opts ...NodeOption) (*NodeConfig, error) {
	var o nodeOpts
	for _, f := range opts {
		f(&o)
	}
	n, ok := t.Node(name)
	if !ok {
		return nil, fmt.Errorf("topology: no node named %q", name)
	}
	ov := t.Overrides[name]
	c := &NodeConfig{
		Name: n.Name, Kind: n.Kind, Domain: t.Domain, FQDN: n.FQDN, Listen: n.Listen(), DNSServer: t.DNS.Listen,
		Timers: mergeTimers(t.Timers, ov.Timers), Probing: mergeProbing(t.Probing, ov.Probing),
		Failover: t.Failover, Registration: t.Registration, Log: mergeLog(t.Log, ov.Log), Overload: t.Overload,
		MetricsListen: ov.Metrics,
	}
	if o.seed != 0 {
		c.Seed = NodeSeed(o.seed, n.Name)
	}
	if o.runDir != "" {
		c.EventsFile = filepath.Join(o.runDir, "events", n.Name+".jsonl")
		if !t.Trace.Off {
			c.TraceFile = filepath.Join(o.runDir, "trace", n.Name+".pcapng")
			c.TraceMaxBytes = int64(t.Trace.MaxMB) << 20
		}
	}
	icscf := t.FQDN(t.ICSCF.Host)
	hssSRV := DiameterSRV(t.FQDN(t.HSS.Host))
	switch n.Kind {
	case KindDNS:
		c.DNS = &DNSNodeConfig{TTL: t.DNS.TTL, Topology: o.topologyFile}
		if c.DNS.Topology == "" && o.runDir != "" {
			c.DNS.Topology = filepath.Join(o.runDir, "topology.yaml")
		}
	case KindHSS:
		dataDir := filepath.Join("data", n.Name)
		if o.runDir != "" {
			dataDir = filepath.Join(o.runDir, dataDir)
		}
		c.HSS = &HSSNodeConfig{DiameterListen: n.Endpoint(PortDiameter), HTTPListen: n.Endpoint(PortHTTP),
			DataDir: dataDir, OriginHost: n.FQDN, OriginRealm: t.Domain, LabSubscribers: t.HSS.LabSubscribers,
			SubscribersFile: t.HSS.SubscribersFile, LabSubscriberCount: t.HSS.LabSubscriberCount}
	case KindBAC:
		c.Peers.PCSCFPool = t.FQDN(string(KindPCSCF))
		if t.Networks != nil {
			c.AccessListen = net.JoinHostPort(t.AccessAddress(n), strconv.Itoa(n.Ports[0].Port))
		}
	case KindPCSCF:
		c.Peers.ICSCF = icscf
	case KindICSCF:
		c.Peers.SCSCFPool = t.FQDN(string(KindSCSCF))
		c.Peers.HSS = hssSRV
	case KindSCSCF:
		c.Peers.ICSCF = icscf
		c.Peers.HSS = hssSRV
	}
	switch n.Kind {
	case KindBAC, KindPCSCF, KindICSCF, KindSCSCF:
		c.Trust = t.sipTrust()
		c.PCSCFScheme = t.Pools.PCSCF.SchemeOf()
		c.SCSCFScheme = t.Pools.SCSCF.SchemeOf()
	case KindHSS:
		c.Trust = &Trust{DiameterPeers: t.DiameterPeers()}
	}
	if peers := t.ReplicationPeerNodes(n.Name); n.Pool != "" && peers != nil {
		c.Replication = &ReplicationConfig{Listen: n.Listen()}
		for _, p := range peers {
			c.Replication.Peers = append(c.Replication.Peers, p.Listen())
			c.Replication.PeerNames = append(c.Replication.PeerNames, p.Name)
		}
	}
	return c, nil
}

// Trusted returns address:port of every P-CSCF, I-CSCF and S-CSCF: the SIP nodes of the trust domain (RFC 3325)
// that may assert identity and send restore=1. The BAC (the access side) and the phones are not in it.
func (t *Topology) Trusted() []string {
	var out []string
	for _, n := range t.Nodes() {
		switch n.Kind {
		case KindPCSCF, KindICSCF, KindSCSCF:
			out = append(out, n.Listen())
		}
	}
	return out
}

// configHeader starts every generated node configuration file.
const configHeader = "# Generated from the topology by internal/topology; edit the topology, not this file.\n"

// Marshal returns the configuration as YAML.
func (c *NodeConfig) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(configHeader)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("topology: node config %s: %w", c.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("topology: node config %s: %w", c.Name, err)
	}
	return buf.Bytes(), nil
}

// WriteNodeConfigs writes one file per node, <dir>/<name>.yaml, creating dir.
func (t *Topology) WriteNodeConfigs(dir string, opts ...NodeOption) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	for _, n := range t.Nodes() {
		c, err := t.NodeConfig(n.Name, opts...)
		if err != nil {
			return err
		}
		b, err := c.Marshal()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n.Name+".yaml"), b, 0o644); err != nil {
			return fmt.Errorf("topology: %w", err)
		}
	}
	return nil
}

// LoadNodeConfig reads a node configuration strictly (an unknown field is an error) and validates it.
func LoadNodeConfig(path string) (*NodeConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	c, err := ParseNodeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseNodeConfig decodes a node configuration strictly and validates it.
func ParseNodeConfig(b []byte) (*NodeConfig, error) {
	var c NodeConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("topology: node config: empty file")
		}
		return nil, fmt.Errorf("topology: node config: %w", err)
	}
	if err := c.Validate(); err != nil {
		var doc yaml.Node
		if yaml.Unmarshal(b, &doc) == nil {
			annotateLines(err, &doc)
		}
		return nil, err
	}
	return &c, nil
}

// Validate checks a node configuration and names the bad fields.
func (c *NodeConfig) Validate() error {
	var v validator
	v.label("name", c.Name)
	if !slices.Contains(Kinds, c.Kind) {
		v.add("kind", "%q: must be one of %v", c.Kind, Kinds)
	}
	v.domain("domain", c.Domain)
	v.domain("fqdn", c.FQDN)
	v.hostPort("listen", c.Listen)
	v.hostPort("dns_server", c.DNSServer)
	if c.AccessListen != "" {
		v.hostPort("access_listen", c.AccessListen)
	}
	v.timers("timers", c.Timers)
	v.probing("probing", c.Probing)
	v.failover("failover", c.Failover, c.Timers)
	v.seconds("registration.expires", c.Registration.Expires, time.Second)
	v.log("log", c.Log)
	v.trust("trust", c.Trust)
	for _, f := range [][2]string{{"pcscf_scheme", c.PCSCFScheme}, {"scscf_scheme", c.SCSCFScheme}} {
		if f[1] != "" && !slices.Contains(Schemes, f[1]) {
			v.add(f[0], "%q: must be one of %s", f[1], strings.Join(Schemes, ", "))
		}
	}
	if r := c.Replication; r != nil {
		v.hostPort("replication.listen", r.Listen)
		if len(r.Peers) == 0 {
			v.add("replication.peers", "none")
		}
		for i, a := range r.Peers {
			v.hostPort(fmt.Sprintf("replication.peers[%d]", i), a)
		}
		// Older node configs had no peer names: they are refused (the member would not know whom to believe).
		if len(r.PeerNames) != len(r.Peers) {
			v.add("replication.peer_names", "%d names for %d peers (one node name per peer, in the order of peers)",
				len(r.PeerNames), len(r.Peers))
		}
		seen := map[string]bool{}
		for i, name := range r.PeerNames {
			v.label(fmt.Sprintf("replication.peer_names[%d]", i), name)
			if seen[name] {
				v.add(fmt.Sprintf("replication.peer_names[%d]", i), "%q: listed twice", name)
			}
			seen[name] = true
		}
	}
	need := func(field, val string) {
		if val == "" {
			v.add(field, "missing (a %s needs it)", c.Kind)
		}
	}
	switch c.Kind {
	case KindDNS:
		if c.DNS == nil {
			v.add("dns", "missing (a dnsd needs it)")
		} else {
			v.seconds("dns.ttl", c.DNS.TTL, 0)
		}
	case KindHSS:
		if c.HSS == nil {
			v.add("hss", "missing (an hss needs it)")
			break
		}
		v.hostPort("hss.diameter_listen", c.HSS.DiameterListen)
		v.hostPort("hss.http_listen", c.HSS.HTTPListen)
		need("hss.data_dir", c.HSS.DataDir)
		need("hss.origin_host", c.HSS.OriginHost)
		need("hss.origin_realm", c.HSS.OriginRealm)
	case KindBAC:
		need("peers.pcscf_pool", c.Peers.PCSCFPool)
	}
	switch c.Kind {
	case KindBAC, KindPCSCF, KindICSCF, KindSCSCF:
		if c.Trust == nil {
			v.add("trust", "missing (a %s needs to know its peers: docs/security.md)", c.Kind)
		}
	}
	switch c.Kind {
	case KindPCSCF:
		need("peers.icscf", c.Peers.ICSCF)
	case KindICSCF:
		need("peers.scscf_pool", c.Peers.SCSCFPool)
		need("peers.hss", c.Peers.HSS)
	case KindSCSCF:
		need("peers.icscf", c.Peers.ICSCF)
		need("peers.hss", c.Peers.HSS)
	}
	return v.err()
}
