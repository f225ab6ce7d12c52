// Package hss is the testbed's Home Subscriber Server: the Cx procedures of TS 29.228 (UAR, LIR, MAR, SAR) over a
// durable subscriber and registration store, with the quasi-pool additions of the study: UAR and LIR with
// User-Authorization-Type 2 return the S-CSCF capabilities, and SCSCF-Restoration-Info is kept per private identity
// so that another S-CSCF can take a registered user over.
package hss

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/nf/hss/store"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/runtime/overload"
)

// Config is the HSS configuration (YAML file, all fields optional).
type Config struct {
	OriginHost     string `yaml:"origin_host"`     // Diameter identity (default hss.ims.test)
	OriginRealm    string `yaml:"origin_realm"`    // default ims.test
	DiameterListen string `yaml:"diameter_listen"` // default 127.0.0.1:3868
	HTTPListen     string `yaml:"http_listen"`     // provisioning API and /metrics (default 127.0.0.1:8090)
	DataDir        string `yaml:"data_dir"`        // database directory (default ./data/hss)
	// SubscribersFile is a YAML provisioning file imported at start (idempotent).
	SubscribersFile string `yaml:"subscribers_file"`
	// LabSubscribers imports the default lab's test subscribers user0001…user1000 at start.
	LabSubscribers bool `yaml:"lab_subscribers"`
	// LabSubscriberCount is how many lab subscribers LabSubscribers imports: user0001…user<count> (0: 1000, at
	// most store.MaxLabSubscriberCount; numbers keep at least four digits, user10000 follows user9999).
	LabSubscriberCount int `yaml:"lab_subscriber_count,omitempty"`
	// CapabilitySets are returned as Server-Capabilities; a subscriber names one, "default" otherwise.
	CapabilitySets map[string]cx.ServerCapabilities `yaml:"capability_sets"`
	// EventsFile receives one JSON line per answered request ("" = none, "-" = stdout).
	EventsFile string `yaml:"events_file"`
	// TraceFile names the trace of every Diameter message, both directions, as pcapng segments (obs.Tracer; ""
	// = none); TraceMaxBytes bounds them (0: obs.DefaultTraceMaxBytes).
	TraceFile     string `yaml:"trace_file"`
	TraceMaxBytes int64  `yaml:"trace_max_bytes"`
	// Overload sheds Cx requests the HSS cannot serve in time with DIAMETER_TOO_BUSY (internal/runtime/overload).
	Overload overload.Config `yaml:"overload,omitempty"`
	// UnsafeNoSync skips fsync: a crash of the machine (not of the process) may lose writes. Benchmarks only.
	UnsafeNoSync bool `yaml:"unsafe_no_sync"`
	// MaxConcurrentHandlers bounds the requests in progress per Diameter connection (default 256).
	MaxConcurrentHandlers int `yaml:"max_concurrent_handlers"`
	// Peers are the Cx clients allowed to connect (Origin-Host, source address, and an S-CSCF's Server-Name).
	Peers []cx.Peer `yaml:"peers,omitempty"`
	// AllowAnyPeer admits Cx clients that are not in Peers (tools and tests only). Without peers and without it
	// the HSS does not start.
	AllowAnyPeer bool `yaml:"allow_any_peer,omitempty"`
	// CERTimeout and MaxConnections limit Diameter connections (defaults 5s, 64).
	CERTimeout     time.Duration `yaml:"cer_timeout,omitempty"`
	MaxConnections int           `yaml:"max_connections,omitempty"`
	// Watchdog is the Diameter device watchdog on every Cx connection (RFC 6733 §5.5, RFC 3539): a DWR after
	// interval ± jitter of silence (30s ± 2s), the connection closed after max_missed (2) unanswered DWRs.
	Watchdog cx.WatchdogConfig `yaml:"watchdog,omitempty"`
	// IdleTimeout is gone (the watchdog replaced it): it is kept only so that a file still setting it is refused
	// with an error that says so, rather than the decoder's "field not found".
	IdleTimeout any `yaml:"idle_timeout,omitempty"`
	// APITokenFile holds the bearer token of the HTTP API (default <data_dir>/api-token). A missing file is
	// created with a random token, mode 0600.
	APITokenFile string `yaml:"api_token_file,omitempty"`
	Log          struct {
		Format string `yaml:"format"`
		Level  string `yaml:"level"`
	} `yaml:"log"`
}

// DefaultConfig returns the configuration of the default lab.
func DefaultConfig() Config {
	c := Config{}
	c.applyDefaults()
	return c
}

func (c *Config) applyDefaults() {
	if c.OriginHost == "" {
		c.OriginHost = "hss.ims.test"
	}
	if c.OriginRealm == "" {
		c.OriginRealm = "ims.test"
	}
	if c.DiameterListen == "" {
		c.DiameterListen = "127.0.0.1:3868"
	}
	if c.HTTPListen == "" {
		c.HTTPListen = "127.0.0.1:8090"
	}
	if c.DataDir == "" {
		c.DataDir = "./data/hss"
	}
	if c.CapabilitySets == nil {
		c.CapabilitySets = map[string]cx.ServerCapabilities{}
	}
	if _, ok := c.CapabilitySets["default"]; !ok {
		// The lab's S-CSCFs all offer capability 1 (basic call); preferred names are left to the I-CSCF's pool.
		c.CapabilitySets["default"] = cx.ServerCapabilities{Mandatory: []uint32{1}}
	}
}

// TokenFile is the API token file: api_token_file, or <data_dir>/api-token.
func (c *Config) TokenFile() string {
	if c.APITokenFile != "" {
		return c.APITokenFile
	}
	return filepath.Join(c.DataDir, "api-token")
}

// Validate checks the configuration and names the bad field. An HSS without peers refuses to start unless
// allow_any_peer is set.
func (c *Config) Validate() error {
	if len(c.Peers) == 0 && !c.AllowAnyPeer {
		return errors.New("hss config: peers: no Cx peer configured (allow_any_peer: true admits any client, for tools and tests only)")
	}
	return c.validateFields()
}

// validateFields checks each field on its own (a loaded file may get its peers policy from flags).
func (c *Config) validateFields() error {
	if c.MaxConcurrentHandlers < 0 {
		return errors.New("hss config: max_concurrent_handlers: must not be negative")
	}
	if c.LabSubscriberCount < 0 || c.LabSubscriberCount > store.MaxLabSubscriberCount {
		return fmt.Errorf("hss config: lab_subscriber_count: must be between 0 (default %d) and %d (user%d), is %d",
			store.DefaultLabSubscriberCount, store.MaxLabSubscriberCount, store.MaxLabSubscriberCount, c.LabSubscriberCount)
	}
	if c.IdleTimeout != nil {
		return errors.New("hss config: idle_timeout: no longer supported: the HSS runs the Diameter device watchdog " +
			"instead (watchdog: {interval, jitter, max_missed}, defaults 30s, 2s, 2; see docs/hss.md); remove idle_timeout")
	}
	if c.CERTimeout < 0 {
		return errors.New("hss config: cer_timeout: must not be negative")
	}
	if c.MaxConnections < 0 {
		return errors.New("hss config: max_connections: must not be negative")
	}
	if err := c.Watchdog.Validate("hss config: watchdog"); err != nil {
		return err
	}
	for i, p := range c.Peers {
		if p.OriginHost == "" {
			return fmt.Errorf("hss config: peers[%d].origin_host: must be set", i)
		}
		if net.ParseIP(p.Address) == nil {
			return fmt.Errorf("hss config: peers[%d].address: %q is not an IP literal", i, p.Address)
		}
	}
	for name, set := range c.CapabilitySets {
		if name == "" {
			return errors.New("hss config: capability_sets: a set has an empty name")
		}
		for i, n := range set.ServerNames {
			if n == "" {
				return fmt.Errorf("hss config: capability_sets.%s.server_names[%d]: must not be empty", name, i)
			}
		}
	}
	return nil
}

// LoadConfig reads a YAML configuration file strictly: an unknown field is an error that names it.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("hss config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("hss config %s: %w", path, err)
	}
	c.applyDefaults()
	if err := c.validateFields(); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
