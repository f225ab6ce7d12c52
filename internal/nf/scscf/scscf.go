// Package scscf is the Serving-CSCF: registrar with SIP Digest authentication against the HSS (MAR), server
// assignment with SCSCF-Restoration-Info (SAR), originating and terminating call routing, and the quasi-pool
// takeover: a user it does not know but the HSS says is registered is restored from the HSS (SAR
// UNREGISTERED_USER returns the restoration info) and served without a re-registration.
package scscf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/restore"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
	"github.com/imslab/quasipool/internal/runtime/repl"
)

// HSS is the Cx side the S-CSCF needs.
type HSS interface {
	MultimediaAuth(ctx context.Context, req *cx.MAR) (*cx.MAA, error)
	ServerAssignment(ctx context.Context, req *cx.SAR) (*cx.SAA, error)
}

// Config configures an S-CSCF.
type Config struct {
	Host      string     // its host name, e.g. scscf1.ims.test (Service-Route, Record-Route, Server-Name)
	Listen    string     // SIP/UDP listen address
	Domain    string     // home domain, e.g. ims.test
	ICSCF     string     // host of the home I-CSCF (originating requests to home users go there)
	PoolHosts []string   // the S-CSCF pool members' hosts (a peer's per-host SRV record may fail over to us)
	Peers     sipx.Peers // source addresses of the lab's SIP nodes by role (docs/security.md)
	Expires   struct{ Min, Max, Default time.Duration }
	NonceTTL  time.Duration
	Forward   sipx.ForwarderConfig
	// Restore is the node's restore.Policy, where the decisions are. It enables the quasi-pool takeover (default
	// true); false makes the S-CSCF refuse users it does not know, as a load-sharing S-CSCF without restoration
	// would: 504 with the restoration body for an originating request, 480 for a terminating one
	// (docs/schemes.md).
	Restore *bool
	// Replication, when set, copies every registration (binding) to the pool peers and keeps theirs (pool-sync,
	// active-standby, mutual; internal/runtime/repl).
	Replication *repl.Config
}

// Validate names the bad field.
func (c *Config) Validate() error {
	switch {
	case c.Host == "":
		return errors.New("scscf: host: must be set")
	case c.Listen == "":
		return errors.New("scscf: listen: must be set")
	case c.Domain == "":
		return errors.New("scscf: domain: must be set")
	case c.ICSCF == "":
		return errors.New("scscf: icscf: must be set")
	}
	return nil
}

func (c *Config) defaults() {
	if c.Expires.Min == 0 {
		c.Expires.Min = 5 * time.Second
	}
	if c.Expires.Max == 0 {
		c.Expires.Max = 2 * time.Hour
	}
	if c.Expires.Default == 0 {
		c.Expires.Default = 600 * time.Second
	}
	if c.NonceTTL == 0 {
		c.NonceTTL = 60 * time.Second
	}
	if c.Restore == nil {
		t := true
		c.Restore = &t
	}
}

// ServerName is the S-CSCF's name towards the HSS.
func (c *Config) ServerName() string { return "sip:" + c.Host }

// binding is one registered user (an implicit registration set).
type binding struct {
	IMPI     string
	IMPUs    []string
	Contact  string  // the Contact header value as registered, e.g. <sip:user0001@bac.ims.test>;expires=600
	ContactU sip.Uri // its URI
	Path     []string
	CallID   string
	CSeq     uint32
	Expires  time.Time
	Restored bool // taken over from another S-CSCF through the HSS
	// Replicated marks a pool peer's binding copied to us (pool-sync, active-standby, mutual): served as our own, but
	// its expiry is the owner's business (no SAR), and a REGISTER for it is a new registration here.
	Replicated bool
}

type challenge struct {
	impi, impu, realm, ha1 string
	qop                    string // the qop offered ("auth"); the response must use it
	created                time.Time
}

// Node is a running S-CSCF.
type Node struct {
	cfg    Config
	policy restore.Policy // from cfg
	hss    HSS
	px     *sipx.Proxy
	log    *slog.Logger
	rec    *obs.Recorder
	now    func() time.Time

	repl *repl.Replicator

	mu       sync.Mutex
	regs     map[string]*binding // IMPU → binding
	nonces   map[string]*challenge
	failures map[string]int // IMPI → consecutive wrong digest responses
}

// New builds an S-CSCF on an endpoint, with its forwarder and HSS client.
func New(cfg Config, hss HSS, ep *sipx.Endpoint, res pool.Resolver, health *pool.Health, rec *obs.Recorder, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	self := slices.Clone(cfg.PoolHosts)
	if !slices.Contains(self, cfg.Host) {
		self = append(self, cfg.Host)
	}
	n := &Node{
		cfg: cfg, policy: restore.Policy{Restore: *cfg.Restore}, hss: hss, log: log, rec: rec, now: time.Now,
		regs: map[string]*binding{}, nonces: map[string]*challenge{}, failures: map[string]int{},
		px: sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Health: health, Rec: rec, Log: log, Trust: sipx.NewTrust(cfg.Peers)},
			cfg.Forward, self...),
	}
	n.px.Serve(sipx.Handlers{Register: n.onRegister, Request: n.onRequest})
	r, err := repl.Open(cfg.Replication, replState{n}, rec, log)
	if err != nil {
		return nil, fmt.Errorf("scscf: %w", err)
	}
	n.repl = r
	return n, nil
}

// Run serves until ctx is done and de-registers nothing: a killed S-CSCF's users stay registered in the HSS.
func (n *Node) Run(ctx context.Context) error {
	n.px.Start(ctx)
	defer n.repl.Start(ctx)()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			n.expire(ctx)
		}
	}
}

// Registered returns the number of registered users (IMPUs) held locally.
func (n *Node) Registered() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.regs)
}

// expire removes lapsed registrations (SAR TIMEOUT_DEREGISTRATION) and stale nonces.
func (n *Node) expire(ctx context.Context) {
	now := n.now()
	var lapsed []*binding
	n.mu.Lock()
	seen := map[*binding]bool{}
	for impu, b := range n.regs {
		if now.After(b.Expires) {
			delete(n.regs, impu)
			if !seen[b] {
				seen[b] = true
				lapsed = append(lapsed, b)
			}
		}
	}
	for k, c := range n.nonces {
		if now.Sub(c.created) > n.cfg.NonceTTL {
			delete(n.nonces, k)
		}
	}
	n.mu.Unlock()
	for _, b := range lapsed {
		if b.Replicated {
			continue // the owner de-registers it
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := n.hss.ServerAssignment(cctx, &cx.SAR{UserName: b.IMPI, PublicIdentities: b.IMPUs[:1],
			ServerName: n.cfg.ServerName(), AssignmentType: cx.SATTimeoutDeregistration, UserDataAlreadyAvailable: true})
		cancel()
		n.rec.Emit(obs.Registration{IMPU: b.IMPUs[0], IMPI: b.IMPI, Event: "expired"})
		if err != nil {
			n.log.Warn("sar timeout deregistration", "impi", b.IMPI, "err", err)
		}
	}
}

func (n *Node) lookup(impu string) *binding {
	n.mu.Lock()
	defer n.mu.Unlock()
	b := n.regs[impu]
	if b != nil && n.now().After(b.Expires) {
		return nil
	}
	return b
}

func (n *Node) store(b *binding) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, u := range b.IMPUs {
		n.regs[u] = b
	}
}

func (n *Node) remove(b *binding) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, u := range b.IMPUs {
		if n.regs[u] == b {
			delete(n.regs, u)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprint(err)
}
