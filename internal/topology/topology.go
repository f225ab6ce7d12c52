// Package topology turns one topology description (a YAML file) into everything derived from it: the list of
// nodes with their addresses, the DNS zone that dnsd serves, and one configuration per node. Because all of them
// come from the same value they cannot drift apart.
//
// It is the floor below the network functions: it imports none of them, and each network function maps its
// NodeConfig to its own Config.
package topology

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/topologies"
)

// Kind is the kind of a node. It names the command that runs it: cmd/<kind>.
type Kind string

// The node kinds of the lab.
const (
	KindDNS   Kind = "dnsd"
	KindHSS   Kind = "hss"
	KindBAC   Kind = "bac"
	KindPCSCF Kind = "pcscf"
	KindICSCF Kind = "icscf"
	KindSCSCF Kind = "scscf"
)

// Kinds lists every kind in the order Nodes returns them.
var Kinds = []Kind{KindDNS, KindHSS, KindBAC, KindPCSCF, KindICSCF, KindSCSCF}

// MaxPoolSize is the largest pool a topology may declare (an n-plus-1 pool may have one more: its spare).
const MaxPoolSize = 8

// Topology is a parsed topology file. See docs/topology.md for the format.
type Topology struct {
	// Domain is the IMS home domain and the DNS zone dnsd is authoritative for (lower case, no trailing dot).
	Domain string `yaml:"domain"`
	DNS    DNS    `yaml:"dns"`
	HSS    HSS    `yaml:"hss"`
	BAC    Host   `yaml:"bac"`
	ICSCF  Host   `yaml:"icscf"`
	Pools  Pools  `yaml:"pools"`
	// Timers, Probing, Registration and Log are the lab-wide defaults; Overrides changes them per node.
	Timers       Timers       `yaml:"timers"`
	Probing      Probing      `yaml:"probing"`
	Registration Registration `yaml:"registration"`
	Log          Log          `yaml:"log"`
	// Failover turns fast failure detection on for every node (off by default: the study's reference scheme is
	// probe-based detection; docs/architecture.md, "Fast failure detection").
	Failover Failover `yaml:"failover,omitempty"`
	// Trace bounds or switches off the nodes' message traces (docs/architecture.md, "Message trace").
	Trace Trace `yaml:"trace,omitempty"`
	// Overload tunes how every SIP node and the HSS shed load they cannot serve (docs/architecture.md,
	// "Overload control").
	Overload Overload `yaml:"overload,omitempty"`
	// Overrides holds per-node overrides (YAML key "nodes") keyed by node name (pcscf1, icscf, …).
	Overrides map[string]Override `yaml:"nodes,omitempty"`
	// Networks are the separate networks of a container lab (set by ForContainers; nil = one network, the local
	// lab). The node addresses above are then core-network addresses, except the HSS's, which is on the Cx
	// network.
	Networks *Networks `yaml:"networks,omitempty"`
	// Sites places every node in one named site; without sites every node is in site "default" (DefaultSite).
	Sites []Site `yaml:"sites,omitempty"`
	// LinksBetween are the links between sites (YAML key "links") with their impairments; see Links.
	LinksBetween []Link `yaml:"links,omitempty"`
}

// DNS describes the lab's authoritative DNS server.
type DNS struct {
	Host   string        `yaml:"host,omitempty"` // node name and host label (default "dnsd")
	Listen string        `yaml:"listen"`         // UDP and TCP address, an IP literal and a port
	TTL    time.Duration `yaml:"ttl"`            // TTL of every record, whole seconds (default 1s)
}

// MaxLabSubscribers is the largest lab population: user0001 … user999999 (the HSS's store.MaxLabSubscriberCount).
// Lab user names keep at least four digits: user0001…user9999 as ever, then user10000, user100000.
const MaxLabSubscribers = 999_999

// HSS describes the Home Subscriber Server.
type HSS struct {
	Host         string `yaml:"host,omitempty"` // default "hss"
	Address      string `yaml:"address"`
	DiameterPort int    `yaml:"diameter_port"`
	HTTPPort     int    `yaml:"http_port"`
	// LabSubscribers imports the default lab's subscribers user0001…user1000 at start (default true).
	LabSubscribers bool `yaml:"lab_subscribers"`
	// SubscribersFile is an optional provisioning file the HSS imports at start.
	SubscribersFile string `yaml:"subscribers_file,omitempty"`
	// LabSubscriberCount is how many lab subscribers the HSS imports: user0001…user<count> (0: 1000). A scenario
	// run and imslab up --phones raise it to their last phone (probers included).
	LabSubscriberCount int `yaml:"lab_subscriber_count,omitempty"`
}

// Host describes a single SIP node (BAC, I-CSCF).
type Host struct {
	Host    string `yaml:"host,omitempty"` // node name and host label (default: the kind)
	Address string `yaml:"address"`
	Port    int    `yaml:"port"` // SIP over UDP
}

// Pools holds the two pools of the study.
type Pools struct {
	PCSCF Pool `yaml:"pcscf"`
	SCSCF Pool `yaml:"scscf"`
}

// Pool describes the members <pool>1 … <pool>N of a pool. Member k listens on Addresses[k-1] (or Address) and
// on BasePort+k-1 (or Port): give BasePort to run every member on one address, Port to give each its own address.
type Pool struct {
	Size      int      `yaml:"size"`
	Address   string   `yaml:"address,omitempty"`
	Addresses []string `yaml:"addresses,omitempty"`
	BasePort  int      `yaml:"base_port,omitempty"`
	Port      int      `yaml:"port,omitempty"`
	// Weight is the SRV weight of every member, in the pool record and in the per-host records (default 10).
	Weight int `yaml:"weight"`
	// Scheme is the pool's protection scheme (default quasi-pool): one of Schemes.
	Scheme string `yaml:"scheme,omitempty"`
	// StandbyAddresses are the standbys' addresses of an active-standby pool whose members each have their own
	// address (addresses + port); with base_port the standbys take the ports after the members.
	StandbyAddresses []string `yaml:"standby_addresses,omitempty"`
	// Kamailio lists the members (1-based) that are not ours but Kamailio's IMS S-CSCF (ims_registrar_scscf,
	// ims_auth, cdp as a Cx client of the HSS): a mixed pool (docs/mixed-pool.md). S-CSCF pool only, local labs
	// only, and not under a scheme that copies registrations between members.
	Kamailio []int `yaml:"kamailio,omitempty"`
}

// IsKamailio reports whether member k (1-based) of the pool is a Kamailio S-CSCF.
func (p *Pool) IsKamailio(k int) bool { return slices.Contains(p.Kamailio, k) }

// Protection schemes of a pool (issue 6; docs/schemes.md). The study's Table 1 compares them.
const (
	// SchemeQuasiPool: load sharing plus the real-time takeover through the HSS (SPEC §4). The default.
	SchemeQuasiPool = "quasi-pool"
	// SchemeLoadSharing: load sharing, no restoration; users recover when they re-register.
	SchemeLoadSharing = "load-sharing"
	// SchemeNPlus1: N active members and one cold spare (the last member) that gets traffic only after a failure.
	SchemeNPlus1 = "n-plus-1"
	// SchemePoolSync: members replicate registration state to each other; no HSS restoration data.
	SchemePoolSync = "pool-sync"
	// SchemeActiveStandby: 1+1, each member has a standby with replicated state.
	SchemeActiveStandby = "active-standby"
	// SchemeMutual: 1+1 mutual backup (1+1互备): members in pairs (1↔2, 3↔4, …), both active, each the
	// partner's standby with replicated state.
	SchemeMutual = "mutual"
)

// Schemes lists the protection schemes, the default first.
var Schemes = []string{SchemeQuasiPool, SchemeLoadSharing, SchemeNPlus1, SchemePoolSync, SchemeActiveStandby,
	SchemeMutual}

// SchemeOf returns the pool's scheme, SchemeQuasiPool when unset.
func (p *Pool) SchemeOf() string {
	if p.Scheme == "" {
		return SchemeQuasiPool
	}
	return p.Scheme
}

// SchemeRestores reports whether a scheme ("" = quasi-pool) runs the quasi-pool takeover through the HSS.
func SchemeRestores(scheme string) bool { return scheme == "" || scheme == SchemeQuasiPool }

// SchemeReplicates reports whether a scheme copies registration state between pool members (pool-sync,
// active-standby, mutual), so a peer's per-host SRV record leads to a member that can serve the user.
func SchemeReplicates(scheme string) bool {
	return scheme == SchemePoolSync || scheme == SchemeActiveStandby || scheme == SchemeMutual
}

// MutualPartner returns the partner of member k (1-based) in a mutual pool: 1↔2, 3↔4, …
func MutualPartner(k int) int {
	if k%2 == 1 {
		return k + 1
	}
	return k - 1
}

// Timers are the SIP transaction timers of a node.
type Timers struct {
	T1                time.Duration `yaml:"t1"`                   // RFC 3261 T1
	InviteNoAnswer    time.Duration `yaml:"invite_no_answer"`     // Timer B
	NonInviteNoAnswer time.Duration `yaml:"non_invite_no_answer"` // Timer F
}

// Probing configures the SIP OPTIONS health probing of pool members.
type Probing struct {
	Interval       time.Duration `yaml:"interval"`
	Timeout        time.Duration `yaml:"timeout"`
	FailuresToDown int           `yaml:"failures_to_down"`
	SuccessesToUp  int           `yaml:"successes_to_up"`
	// Panic: when every member of a pool is down, send to all of them as if up (true) or answer 503 at once (nil
	// or false, the default: the quasi-pool's restoration starts from that fast failure). pool.Health.Candidates.
	Panic *bool `yaml:"panic,omitempty"`
	// LagExcuse: a probe or transaction timeout is not held against a peer when the node's own timers ran more
	// than this late while it waited (it was itself starved of CPU; pool.HealthConfig.LagExcuse). 0 = half the
	// probe timeout, negative = off.
	LagExcuse time.Duration `yaml:"lag_excuse,omitempty"`
	// Jitter spreads each node's probes of a peer: every wait between two probes is the interval ± a uniform draw
	// of at most this (pool.HealthConfig.Jitter). 0 = none; less than the interval.
	Jitter time.Duration `yaml:"jitter,omitempty"`
}

// MinProbeInterval is the shortest probing interval a topology may set.
const MinProbeInterval = 100 * time.Millisecond

// Failover configures fast failure detection (docs/architecture.md, "Fast failure detection").
type Failover struct {
	// ProvisionalTimeout: an INVITE sent to a pool member that gets no response at all (not even 100 Trying)
	// within this time goes to the next member, and the silence counts as a missed probe of that member
	// (sipx.ForwarderConfig.ProvisionalTimeout). Every node then answers INVITEs 100 Trying at once. 0 (the
	// default) = off: an INVITE waits timers.invite_no_answer. Between 50 ms and timers.invite_no_answer.
	ProvisionalTimeout time.Duration `yaml:"provisional_timeout,omitempty"`
}

// Fast reports whether fast failure detection is on.
func (f Failover) Fast() bool { return f.ProvisionalTimeout > 0 }

// MinProvisionalTimeout is the shortest Failover.ProvisionalTimeout: below it a loaded but live hop's 100 Trying
// would often come too late.
const MinProvisionalTimeout = 50 * time.Millisecond

// Registration configures registrations.
type Registration struct {
	Expires time.Duration `yaml:"expires"` // registration period (whole seconds)
}

// Log selects the log format and level of a node.
type Log struct {
	Format string `yaml:"format,omitempty"` // text (default) or json
	Level  string `yaml:"level,omitempty"`  // debug, info (default), warn, error
}

// Override changes the lab-wide settings for one node. Absent or zero fields inherit.
type Override struct {
	Timers  Timers  `yaml:"timers,omitempty"`
	Probing Probing `yaml:"probing,omitempty"`
	Log     Log     `yaml:"log,omitempty"`
	// Metrics is the TCP address (host:port) where a SIP node (bac, P-/I-/S-CSCF) serves Prometheus metrics at
	// /metrics: its overload control's counters and the Go runtime's ("" = none; the HSS serves its metrics on
	// its HTTP port).
	Metrics string `yaml:"metrics,omitempty"`
}

// defaults are applied before a file is decoded, so a field the file leaves out keeps its default and a field
// the file sets (even to zero) is validated.
func defaults() Topology {
	return Topology{
		DNS:          DNS{Host: string(KindDNS), TTL: time.Second},
		HSS:          HSS{Host: string(KindHSS), LabSubscribers: true},
		BAC:          Host{Host: string(KindBAC)},
		ICSCF:        Host{Host: string(KindICSCF)},
		Pools:        Pools{PCSCF: Pool{Weight: 10}, SCSCF: Pool{Weight: 10}},
		Timers:       Timers{T1: 500 * time.Millisecond, InviteNoAnswer: 2 * time.Second, NonInviteNoAnswer: 2 * time.Second},
		Probing:      Probing{Interval: time.Second, Timeout: 500 * time.Millisecond, FailuresToDown: 2, SuccessesToUp: 1},
		Registration: Registration{Expires: 600 * time.Second},
		Log:          Log{Format: "text", Level: "info"},
	}
}

// Default returns the default lab topology (topologies/default.yaml, embedded in the binary).
func Default() *Topology {
	t, err := Parse(topologies.Default)
	if err != nil {
		panic("topology: embedded default: " + err.Error())
	}
	return t
}

// Load reads and validates a topology file.
func Load(path string) (*Topology, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse decodes a topology strictly (an unknown field is an error) and validates it. Errors name the field and
// the line of the file.
func Parse(b []byte) (*Topology, error) {
	t := defaults()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("topology: empty file")
		}
		return nil, fmt.Errorf("topology: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("topology: more than one YAML document")
	}
	if err := t.Validate(); err != nil {
		var doc yaml.Node
		if yaml.Unmarshal(b, &doc) == nil {
			annotateLines(err, &doc)
		}
		return nil, err
	}
	return &t, nil
}

// Marshal returns the topology as YAML, with every default spelled out. Parse(Marshal()) gives the same topology.
func (t *Topology) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(t); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteFile writes the topology (Marshal) to path.
func (t *Topology) WriteFile(path string) error {
	b, err := t.Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("topology: %w", err)
	}
	return nil
}

// FQDN returns <host>.<domain>.
func (t *Topology) FQDN(host string) string { return host + "." + t.Domain }

// pool returns the pool of a kind (pcscf or scscf) and whether kind is a pool kind.
func (t *Topology) pool(k Kind) (*Pool, bool) {
	switch k {
	case KindPCSCF:
		return &t.Pools.PCSCF, true
	case KindSCSCF:
		return &t.Pools.SCSCF, true
	}
	return nil, false
}

// Trace configures the message trace every node writes under <run-dir>/trace/.
type Trace struct {
	// Off switches tracing off (load runs): no trace files, no ladder diagrams or trace.pcapng in the report.
	Off bool `yaml:"off,omitempty"`
	// MaxMB is each node's trace budget in MiB (default 128): past it the oldest segments are deleted, and the
	// report says the trace wrapped.
	MaxMB int `yaml:"max_mb,omitempty"`
}

// Overload configures the nodes' overload control (internal/runtime/overload); zero values take its defaults.
type Overload struct {
	// Off admits everything (the node collapses instead of shedding, as before issue 13).
	Off bool `yaml:"off,omitempty"`
	// Target is the scheduling lag above which a node sheds new requests (default 150ms).
	Target time.Duration `yaml:"target,omitempty"`
	// MaxInFlight bounds the new requests a node has in progress (default 10000).
	MaxInFlight int `yaml:"max_in_flight,omitempty"`
	// RetryAfter is the shortest wait a shed request is told (default 1s; up to twice that, at random).
	RetryAfter time.Duration `yaml:"retry_after,omitempty"`
	// MaxRate is a configured capacity: new requests per second a node admits from outside the trust domain
	// (phones: in effect the BAC's), a token bucket holding one second's worth (0 = no limit).
	MaxRate float64 `yaml:"max_rate,omitempty"`
	// ChainTarget is the median time the core takes to answer phones' new requests at the BAC (the P-CSCF's 100
	// Trying to an INVITE, the final answer to a REGISTER) above which the BAC caps phones' new requests
	// (0 or negative: not watched, the default; the benches used 100ms). Only the BAC measures it.
	ChainTarget time.Duration `yaml:"chain_target,omitempty"`
	// ChainHold is the least time between two cuts of the BAC's cap on phones' new requests (default 1s).
	ChainHold time.Duration `yaml:"chain_hold,omitempty"`
}
