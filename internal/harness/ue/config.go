package ue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the configuration of one ue process (YAML file, all fields optional).
type Config struct {
	// Listen is the one UDP address every phone uses (default 127.0.0.1:5100).
	Listen string `yaml:"listen"`
	// Advertise is the ip:port put in Contact and Via when Listen is a wildcard address (Docker).
	Advertise string `yaml:"advertise"`
	// Domain is the home domain and digest realm (default ims.test).
	Domain string `yaml:"domain"`
	// DNSServer is the lab DNS (ip:port) asked for the BAC's SRV record (default 127.0.0.1:1053).
	DNSServer string `yaml:"dns_server"`
	// ProxyHost is the outbound proxy's host name; the phones look up _sip._udp.<ProxyHost> ("" = bac.<domain>).
	ProxyHost string `yaml:"proxy_host"`
	// Proxy (ip:port) skips DNS and sends everything to this address.
	Proxy string `yaml:"proxy"`
	// Users is the range of subscribers this process simulates.
	Users UserRange `yaml:"users"`
	// Expires is the registration period asked for, in seconds (default 600).
	Expires int `yaml:"expires"`
	// RegisterRate spreads the initial registrations, per second (default 50).
	RegisterRate float64 `yaml:"register_rate"`
	// RefreshPhase is when a phone's first registration refresh falls: "lockstep" (default; about half the
	// granted period after its initial registration, so phones registered together refresh together) or "steady"
	// (at a uniform random point of its refresh interval, drawn from the seed, as in a network that has been
	// running for hours: at any instant the registrations have spread ages). Later refreshes follow every period.
	RefreshPhase string `yaml:"refresh_phase"`
	// SessionExpires turns on RFC 4028 session timers (0 = off): a caller asks for this session interval in its
	// INVITE (Session-Expires, refresher=uac), the callee confirms it in the 200, and the caller refreshes the
	// answered call with an in-dialog UPDATE every half interval. A refresh that times out or gets 408/481, or no
	// successful refresh before the interval runs out, ends the call as cut (Record.Ended "cut", Record.CutNs),
	// and so does a callee that hears no refresh before the interval runs out.
	SessionExpires time.Duration `yaml:"session_expires"`
	// RegisterRetry is the pause before a phone whose registration failed tries again (default 30s).
	RegisterRetry time.Duration `yaml:"register_retry"`
	// Deregister sends REGISTER with Expires 0 for every registered phone on shutdown.
	Deregister bool `yaml:"deregister"`
	// Manual starts no registration and no traffic: a test drives the phones through Phone.Register/Call.
	// Registered phones still refresh on their own (and retry a failed refresh).
	Manual bool `yaml:"manual"`
	// CallRate is the aggregate rate of outgoing calls, per second (0 = no calls; Poisson arrivals).
	CallRate float64 `yaml:"call_rate"`
	// ProbeInterval makes every phone call the next phone of the range (the last calls the first) once per
	// interval, from a random phase, even while it is in other calls. Each phone then places and receives one
	// call per interval, so the time a user stays unreachable after a fault is measured, not the traffic's gaps.
	// 0 = off. Works alongside CallRate.
	ProbeInterval time.Duration `yaml:"probe_interval"`
	// HoldTime is how long an answered outgoing call lasts before the caller sends BYE (default 5s).
	HoldTime time.Duration `yaml:"hold_time"`
	// RingTime is how long a phone rings (180) before it answers (200) an incoming call (default 100ms).
	RingTime time.Duration `yaml:"ring_time"`
	// CallTimeout is how long a caller waits for a final answer before it sends CANCEL (default 10s).
	CallTimeout time.Duration `yaml:"call_timeout"`
	// OnRestoration504 is what a phone does when a call it places is refused with 504 and the 3GPP restoration
	// body (<alternative-service> restoration, action initial-registration): "reregister" (default, as a 3GPP
	// phone does) registers again at once with a new Call-ID, "ignore" waits for the next periodic refresh.
	OnRestoration504 string `yaml:"on_restoration_504"`
	// Mix is the fraction of the phones that place calls (default 1).
	Mix *float64 `yaml:"mix"`
	// CalleeFrom and CalleeCount name a fixed callee range (e.g. phones of another ue process). With
	// CalleeCount 0 the callees are the registered phones of this process.
	CalleeFrom  int `yaml:"callee_from"`
	CalleeCount int `yaml:"callee_count"`
	// Model is the traffic model of real subscribers (nil = none): per-user Poisson calls at BHCA, a
	// holding-time distribution, idle and MT-only shares. It works alongside CallRate and ProbeInterval.
	Model *Model `yaml:"model"`
	// Reachability configures the reachability probes after a fault (StartReachability).
	Reachability Reachability `yaml:"reachability"`
	// RecordsFile receives one JSON line per call and per registration ("" = none, "-" = stdout).
	RecordsFile string `yaml:"records_file"`
	// EventsFile receives the node's events (node_ready, node_stopped) ("" = none, "-" = stdout).
	EventsFile string `yaml:"events_file"`
	// Seed drives every random choice (0 = pick one; it is logged so a run can be repeated).
	Seed   int64 `yaml:"seed"`
	Timers struct {
		// T1 is the RFC 3261 T1 timer (0 = sipgo's 500ms). sipgo's timers are process-wide: every sipgo stack
		// of the process gets it, so leave it 0 in tests that run several nodes in one process.
		T1 time.Duration `yaml:"t1"`
	} `yaml:"timers"`
	Log struct {
		Format string `yaml:"format"`
		Level  string `yaml:"level"`
	} `yaml:"log"`
}

// Refresh phases (Config.RefreshPhase).
const (
	RefreshLockstep = "lockstep"
	RefreshSteady   = "steady"
)

// MinSessionExpires is the shortest session interval the phones use (RFC 4028 asks for at least 90 s on the
// Internet; a lab run of a minute needs shorter ones, and Session-Expires is in whole seconds).
const MinSessionExpires = 2 * time.Second

// UserRange names the subscribers prefix+number, zero-padded to at least Digits: user0001…user9999, then
// user10000… (as the HSS generates them), password passNNNN.
type UserRange struct {
	From           int    `yaml:"from"`            // first number (0 = 1)
	Count          int    `yaml:"count"`           // number of phones (default 1)
	Digits         int    `yaml:"digits"`          // minimum zero-padded width (default 4); larger numbers get more digits
	Prefix         string `yaml:"prefix"`          // user name prefix (default user)
	PasswordPrefix string `yaml:"password_prefix"` // password = prefix + number (default pass)
}

// MaxUser is the largest subscriber number a phone may use (user999999; topology.MaxLabSubscribers).
const MaxUser = 999_999

// User returns the user name of subscriber n (user0001, user10000).
func (r UserRange) User(n int) string { return r.Prefix + r.pad(n) }

// Password returns the SIP Digest password of subscriber n (pass0001).
func (r UserRange) Password(n int) string { return r.PasswordPrefix + r.pad(n) }

func (r UserRange) pad(n int) string {
	s := strconv.Itoa(n)
	for len(s) < r.Digits {
		s = "0" + s
	}
	return s
}

func (c *Config) proxyHost() string {
	if c.ProxyHost != "" {
		return c.ProxyHost
	}
	return "bac." + c.Domain
}

// DefaultConfig returns the configuration of the default lab (one phone, user0001).
func DefaultConfig() Config {
	c := Config{}
	c.applyDefaults()
	return c
}

func (c *Config) applyDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Listen, "127.0.0.1:5100")
	def(&c.Domain, "ims.test")
	def(&c.DNSServer, "127.0.0.1:1053")
	def(&c.Users.Prefix, "user")
	def(&c.Users.PasswordPrefix, "pass")
	if c.Users.From == 0 {
		c.Users.From = 1
	}
	if c.Users.Count == 0 {
		c.Users.Count = 1
	}
	if c.Users.Digits == 0 {
		c.Users.Digits = 4
	}
	if c.Expires == 0 {
		c.Expires = 600
	}
	if c.RegisterRate == 0 {
		c.RegisterRate = 50
	}
	if c.RegisterRetry == 0 {
		c.RegisterRetry = 30 * time.Second
	}
	if c.HoldTime == 0 {
		c.HoldTime = 5 * time.Second
	}
	if c.RingTime == 0 {
		c.RingTime = 100 * time.Millisecond
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = 10 * time.Second
	}
	if c.Mix == nil {
		one := 1.0
		c.Mix = &one
	}
	def(&c.OnRestoration504, RestorationReregister)
	def(&c.RefreshPhase, RefreshLockstep)
	if c.Model != nil {
		c.Model.applyDefaults()
	}
	c.Reachability.ApplyDefaults()
}

// Validate checks the configuration and names the bad field.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("ue config: %s: %s", field, fmt.Sprintf(format, a...))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("listen", "%v", err)
	}
	if ap, err := netip.ParseAddrPort(c.Listen); err == nil && ap.Addr().IsUnspecified() && c.Advertise == "" {
		return bad("advertise", "required when listen (%s) is a wildcard address", c.Listen)
	}
	if c.Advertise != "" {
		if _, err := netip.ParseAddrPort(c.Advertise); err != nil {
			return bad("advertise", "must be ip:port: %v", err)
		}
	}
	if c.Domain == "" {
		return bad("domain", "must not be empty")
	}
	if c.Proxy != "" {
		if _, err := netip.ParseAddrPort(c.Proxy); err != nil {
			return bad("proxy", "must be ip:port: %v", err)
		}
	} else {
		if _, _, err := net.SplitHostPort(c.DNSServer); err != nil {
			return bad("dns_server", "%v", err)
		}
	}
	u := c.Users
	switch {
	case u.Digits < 1 || u.Digits > 9:
		return bad("users.digits", "must be 1..9, is %d", u.Digits)
	case u.From < 0:
		return bad("users.from", "must not be negative, is %d", u.From)
	case u.Count < 1:
		return bad("users.count", "must be at least 1, is %d", u.Count)
	case u.Prefix == "":
		return bad("users.prefix", "must not be empty")
	case u.From+u.Count-1 > MaxUser:
		return bad("users.count", "users %d..%d go beyond user%d, the largest the lab provisions", u.From,
			u.From+u.Count-1, MaxUser)
	}
	switch {
	case c.Expires < 1:
		return bad("expires", "must be at least 1 (seconds), is %d", c.Expires)
	case c.RegisterRate <= 0 || math.IsInf(c.RegisterRate, 0) || math.IsNaN(c.RegisterRate):
		return bad("register_rate", "must be a positive number, is %v", c.RegisterRate)
	case c.RegisterRetry < 0:
		return bad("register_retry", "must not be negative")
	case c.CallRate < 0 || math.IsInf(c.CallRate, 0) || math.IsNaN(c.CallRate):
		return bad("call_rate", "must be zero or a positive number, is %v", c.CallRate)
	case c.ProbeInterval < 0:
		return bad("probe_interval", "must not be negative, is %s", c.ProbeInterval)
	case c.HoldTime < 0:
		return bad("hold_time", "must not be negative")
	case c.RingTime < 0:
		return bad("ring_time", "must not be negative")
	case c.CallTimeout <= 0:
		return bad("call_timeout", "must be positive")
	case c.Mix != nil && (*c.Mix < 0 || *c.Mix > 1 || math.IsNaN(*c.Mix)):
		return bad("mix", "must be between 0 and 1, is %v", *c.Mix)
	case c.CalleeFrom < 0:
		return bad("callee_from", "must not be negative")
	case c.CalleeCount < 0:
		return bad("callee_count", "must not be negative")
	case c.CalleeCount > 0 && c.CalleeFrom+c.CalleeCount-1 > MaxUser:
		return bad("callee_count", "callees %d..%d go beyond user%d", c.CalleeFrom, c.CalleeFrom+c.CalleeCount-1,
			MaxUser)
	case c.Timers.T1 < 0:
		return bad("timers.t1", "must not be negative")
	case c.RefreshPhase != RefreshLockstep && c.RefreshPhase != RefreshSteady:
		return bad("refresh_phase", "must be %s or %s, is %q", RefreshLockstep, RefreshSteady, c.RefreshPhase)
	case c.SessionExpires < 0 || c.SessionExpires > 0 && (c.SessionExpires < MinSessionExpires ||
		c.SessionExpires%time.Second != 0):
		return bad("session_expires", "must be 0 (off) or whole seconds of at least %s, is %s", MinSessionExpires,
			c.SessionExpires)
	case c.OnRestoration504 != RestorationReregister && c.OnRestoration504 != RestorationIgnore:
		return bad("on_restoration_504", "must be %s or %s, is %q", RestorationReregister, RestorationIgnore, c.OnRestoration504)
	}
	if c.Model != nil {
		if err := c.Model.Validate("model"); err != nil {
			return fmt.Errorf("ue config: %w", err)
		}
	}
	if err := c.Reachability.Validate("reachability"); err != nil {
		return fmt.Errorf("ue config: %w", err)
	}
	if c.Reachability.Interval > 0 {
		if last := u.From + u.Count + c.Reachability.Probers - 1; last > MaxUser {
			return bad("reachability.probers", "prober users up to %d go beyond user%d", last, MaxUser)
		}
	}
	return nil
}

// LoadConfig reads a YAML configuration file strictly (an unknown field is an error that names it) and fills
// the defaults. Validate is left to the caller, so flags can still change fields.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("ue config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("ue config %s: %w", path, err)
	}
	c.applyDefaults()
	return c, nil
}
