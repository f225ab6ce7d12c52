// Package icscf is the Interrogating-CSCF: the home network's entry point. It asks the HSS where a user is served
// (UAR for REGISTER, LIR for other requests), selects an S-CSCF by capabilities when none is assigned, and runs
// the quasi-pool takeover queries: UAR and LIR with User-Authorization-Type 2 when the stored S-CSCF cannot be
// reached, and LIR with UAT 2 for requests a backup P-CSCF marked with restore=1.
package icscf

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/restore"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// HSS is the Cx side the I-CSCF needs.
type HSS interface {
	UserAuthorization(ctx context.Context, req *cx.UAR) (*cx.UAA, error)
	LocationInfo(ctx context.Context, req *cx.LIR) (*cx.LIA, error)
}

// Config configures an I-CSCF.
type Config struct {
	Host           string     // e.g. icscf.ims.test
	Listen         string     // SIP/UDP listen address
	Domain         string     // home domain
	SCSCFPool      string     // host of the S-CSCF pool record, e.g. scscf.ims.test
	VisitedNetwork string     // Visited-Network-Identifier when the request has no P-Visited-Network-ID (default: Domain)
	Peers          sipx.Peers // source addresses of the lab's SIP nodes by role (docs/security.md)
	Forward        sipx.ForwarderConfig
	// Restore, AcceptRestore and SCSCFFailover are the node's restore.Policy, where the decisions are.
	//
	// Restore enables the S-CSCF takeover of SPEC §4.5/§4.6 (LIR with UAT 2 and another S-CSCF when the stored
	// one cannot be reached); false makes a dead S-CSCF's users unreachable until they re-register, as without
	// quasi-pool. Re-selection at registration (UAR with UAT 2, SPEC §4.4) is standard 3GPP and always on.
	Restore *bool
	// AcceptRestore honours restore=1 from trusted P-CSCFs (the P-CSCF takeover of SPEC §4.1); default Restore.
	AcceptRestore *bool
	// SCSCFFailover sends to an S-CSCF through its per-host SRV record, so a pool member holding a replicated
	// copy of its state is tried when it is down (S-CSCF pool with pool-sync, active-standby or mutual).
	SCSCFFailover bool
}

// Validate names the bad field.
func (c *Config) Validate() error {
	switch {
	case c.Host == "":
		return errors.New("icscf: host: must be set")
	case c.Listen == "":
		return errors.New("icscf: listen: must be set")
	case c.Domain == "":
		return errors.New("icscf: domain: must be set")
	case c.SCSCFPool == "":
		return errors.New("icscf: scscf_pool: must be set")
	}
	return nil
}

// Node is a running I-CSCF.
type Node struct {
	cfg    Config
	policy restore.Policy // from cfg
	hss    HSS
	px     *sipx.Proxy
	log    *slog.Logger
	rec    *obs.Recorder
}

// New builds an I-CSCF on an endpoint.
func New(cfg Config, hss HSS, ep *sipx.Endpoint, res pool.Resolver, health *pool.Health, rec *obs.Recorder, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.VisitedNetwork == "" {
		cfg.VisitedNetwork = cfg.Domain
	}
	if cfg.Restore == nil {
		t := true
		cfg.Restore = &t
	}
	if cfg.AcceptRestore == nil {
		cfg.AcceptRestore = cfg.Restore
	}
	if log == nil {
		log = slog.Default()
	}
	n := &Node{cfg: cfg, hss: hss, log: log, rec: rec,
		policy: restore.Policy{Restore: *cfg.Restore, AcceptRestore: *cfg.AcceptRestore, SCSCFFailover: cfg.SCSCFFailover},
		px: sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Health: health, Rec: rec, Log: log, Trust: sipx.NewTrust(cfg.Peers)},
			cfg.Forward, cfg.Host, cfg.Domain)}
	n.px.Serve(sipx.Handlers{Register: n.onRegister, Request: n.onRequest, Ack: n.onAck})
	return n, nil
}

// Run blocks until ctx is done (the endpoint serves the requests).
func (n *Node) Run(ctx context.Context) error {
	n.px.Start(ctx)
	<-ctx.Done()
	return nil
}

func hostOf(serverName string) string {
	u, err := sipx.ParseNameAddr(serverName)
	if err != nil || u.Host == "" {
		return strings.TrimPrefix(serverName, "sip:")
	}
	return u.Host
}

// candidates is the S-CSCF selection order once the HSS gave capabilities: its preferred names first, then the
// live members of the S-CSCF pool, lowest SRV priority first and, within a priority, ranked by rendezvous hashing
// on the user's identity, skipping the ones already tried. The hash shares users evenly over the pool (load
// sharing) and sends every request of one user to the same survivor: an originating and a terminating request
// that arrive together for a user whose S-CSCF died are taken over by one S-CSCF, not restored twice. When the
// user's S-CSCF failed, the members come from that S-CSCF's per-host record, so its priorities decide who takes
// its users (the spare of an n-plus-1 pool); otherwise from the pool record (where an n-plus-1 spare comes last).
// Every lab S-CSCF offers every capability, so the capability sets only order the choice; they never exclude an
// S-CSCF.
func (n *Node) candidates(ctx context.Context, caps *cx.ServerCapabilities, tried map[string]bool, user, failed string) []string {
	var out []string
	add := func(h string) {
		if h != "" && !tried[h] && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	if caps != nil {
		for _, s := range caps.ServerNames {
			add(hostOf(s))
		}
	}
	record := n.cfg.SCSCFPool
	if failed != "" {
		record = failed
	}
	ts, err := n.px.Fwd.Targets(ctx, sipx.SRVHop(record), nil)
	if err != nil && failed != "" {
		ts, err = n.px.Fwd.Targets(ctx, sipx.SRVHop(n.cfg.SCSCFPool), nil)
	}
	if err != nil {
		n.log.Warn("resolve scscf pool", "pool", record, "err", err)
	}
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].Priority != ts[j].Priority {
			return ts[i].Priority < ts[j].Priority
		}
		return rendezvous(user, ts[i].Name) > rendezvous(user, ts[j].Name)
	})
	for _, t := range ts {
		add(t.Name)
	}
	return out
}

// firstTried returns the S-CSCF of the HSS (the first one tried), "" when none was.
func firstTried(stored string, tried map[string]bool) string {
	if stored != "" && tried[stored] {
		return stored
	}
	return ""
}

// rendezvous is the highest-random-weight score of a host for a user.
func rendezvous(user, host string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(host))
	return h.Sum64()
}

// toSCSCF forwards to one S-CSCF and to it only: the priority-1 target of its per-host record. Failing over to
// another S-CSCF is the I-CSCF's decision (UAT 2 query), not DNS's; except with failover (SCSCFFailover, for
// requests other than REGISTER), where the per-host record leads to a member holding a replicated copy.
func (n *Node) toSCSCF(ctx context.Context, stx sip.ServerTransaction, out *sip.Request, host string, route []string, failover bool) sipx.Outcome {
	o := out.Clone()
	if route != nil {
		sipx.PrependRoute(o, sipx.RouteURI("", host, route...))
	}
	return n.px.Fwd.Forward(ctx, stx, o, restore.SCSCFHop(host, failover))
}
