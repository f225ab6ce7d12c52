// Package bac is the access node (an SBC) in front of the P-CSCFs. It hides the phones behind per-phone tokens,
// picks a P-CSCF from the pool record for a first registration, remembers which P-CSCF each phone registered
// through and sends its later requests by that P-CSCF's per-host record, so a dead P-CSCF is skipped (SPEC §3.1,
// §4.1, §4.3). It asserts nothing itself: it puts the phone's registered identity in P-Preferred-Identity and
// strips identity headers and orig/restore parameters a phone tries to send.
//
// Phones are untrusted (docs/security.md). A phone's binding (source, Contact, delivery address, P-CSCF) changes
// only when a 200 answers its REGISTER; a phone is recognised by the address it sends from and its current
// registration, never by From; requests towards phones are taken only from the P-CSCFs; a phone's in-dialog
// requests go only along a route set whose top Route is a P-CSCF; bindings expire with their registration and
// the table is capped.
//
// The BAC has one socket (phones and core share it; a P-CSCF is told by its configured source address) or, with
// WithAccess, a socket on each side: phones only on the access socket, P-CSCFs only on the core socket.
package bac

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// Defaults of Config.
const (
	DefaultMaxPhones  = 200000
	DefaultSweepEvery = 10 * time.Second
	// RetryAfter is the Retry-After (seconds) of the 503 answering a registration beyond MaxPhones.
	RetryAfter = 60
)

// Config configures the BAC.
type Config struct {
	Host      string     // e.g. bac.ims.test (phones' Contacts become <sip:token@bac.ims.test>)
	Listen    string     // SIP/UDP listen address (core side; both sides without an access socket)
	PCSCFPool string     // host of the P-CSCF pool record, e.g. pcscf.ims.test
	Peers     sipx.Peers // source addresses of the lab's SIP nodes by role: network-side requests only from PCSCF
	// PCSCFHosts are the P-CSCF pool members' host names (pcscf1.ims.test, …): a phone's in-dialog request is
	// relayed only when its top Route names one of them (or the pool record).
	PCSCFHosts []string
	// MaxPhones caps the bindings held (0: DefaultMaxPhones); a registration beyond it is answered 503.
	MaxPhones int
	// SweepEvery is how often expired bindings are removed (0: DefaultSweepEvery).
	SweepEvery time.Duration
	Forward    sipx.ForwarderConfig
}

// Validate names the bad field.
func (c *Config) Validate() error {
	switch {
	case c.Host == "":
		return errors.New("bac: host: must be set")
	case c.Listen == "":
		return errors.New("bac: listen: must be set")
	case c.PCSCFPool == "":
		return errors.New("bac: pcscf_pool: must be set")
	case c.MaxPhones < 0:
		return errors.New("bac: max_phones: must not be negative")
	case c.SweepEvery < 0:
		return errors.New("bac: sweep_every: must not be negative")
	}
	return nil
}

// Option adjusts a BAC's collaborators.
type Option func(*options)

type options struct {
	access *sipx.Endpoint
	now    func() time.Time
}

// WithAccess gives the BAC a second endpoint on the access network: phones are served only there (requests
// arriving on it are never network-side, whoever sends them) and requests to phones leave from it; the main
// endpoint then serves only the P-CSCFs. The caller serves the endpoint.
func WithAccess(ep *sipx.Endpoint) Option { return func(o *options) { o.access = ep } }

// WithClock sets the clock bindings expire by (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// side is which socket a request arrived on.
type side int

const (
	sideBoth   side = iota // one socket serves phones and core
	sideCore               // the core socket of a two-socket BAC: P-CSCFs only
	sideAccess             // the access socket of a two-socket BAC: phones only
)

// Node is a running BAC.
type Node struct {
	cfg    Config
	core   *sipx.Proxy // towards the P-CSCFs
	access *sipx.Proxy // towards the phones (the same proxy as core with one socket)
	log    *slog.Logger
	rec    *obs.Recorder
	now    func() time.Time
	pcscfs map[string]bool // P-CSCF host names (lower case, no trailing dot)
	tab    *table
}

// New builds a BAC on an endpoint.
func New(cfg Config, ep *sipx.Endpoint, res pool.Resolver, health *pool.Health, rec *obs.Recorder, log *slog.Logger, opts ...Option) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.now == nil {
		o.now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.MaxPhones == 0 {
		cfg.MaxPhones = DefaultMaxPhones
	}
	if cfg.SweepEvery == 0 {
		cfg.SweepEvery = DefaultSweepEvery
	}
	n := &Node{cfg: cfg, log: log, rec: rec, now: o.now, pcscfs: map[string]bool{}, tab: newTable(cfg.MaxPhones)}
	for _, h := range append([]string{cfg.PCSCFPool}, cfg.PCSCFHosts...) {
		n.pcscfs[hostKey(h)] = true
	}
	n.core = sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Health: health, Rec: rec, Log: log, Trust: sipx.NewTrust(cfg.Peers)},
		cfg.Forward, cfg.Host)
	if o.access == nil {
		n.access = n.core
		n.core.Serve(n.handlers(sideBoth))
		return n, nil
	}
	// Nobody is trusted on the access side: the prelude strips identity and markers from every sender there.
	n.access = sipx.NewProxy(sipx.Deps{EP: o.access, Res: res, Rec: rec, Log: log}, cfg.Forward, cfg.Host)
	n.core.Serve(n.handlers(sideCore))
	n.access.Serve(n.handlers(sideAccess))
	return n, nil
}

func (n *Node) handlers(s side) sipx.Handlers {
	return sipx.Handlers{
		Register: func(r *sipx.Request) { n.onRegister(s, r) },
		Request:  func(r *sipx.Request) { n.onRequest(s, r) },
		Ack:      func(r *sipx.Request) { n.onAck(s, r) },
	}
}

// Run removes expired bindings until ctx is done.
func (n *Node) Run(ctx context.Context) error {
	n.core.Start(ctx)
	if n.access != n.core {
		n.access.Start(ctx)
	}
	t := time.NewTicker(n.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if k := n.tab.sweep(n.now()); k > 0 {
				n.log.Debug("bindings expired", "count", k, "held", n.tab.len())
			}
		}
	}
}

// Bindings returns the number of bindings held (expired ones not yet swept included).
func (n *Node) Bindings() int { return n.tab.len() }

var tokenChars = regexp.MustCompile(`[^A-Za-z0-9._~-]`)

// tokenFor derives the per-phone token from its public identity (readable in traces: user0001).
func tokenFor(u sip.Uri) string {
	t := tokenChars.ReplaceAllString(u.User, "")
	if t == "" {
		t = tokenChars.ReplaceAllString(u.Host, "")
	}
	return t
}

func hostKey(h string) string { return strings.ToLower(strings.TrimSuffix(h, ".")) }

// isPCSCFRoute reports a Route entry a phone's in-dialog request may follow: a P-CSCF host name, no port (the
// next hop is the host's SRV record, as for the P-CSCF's own Record-Route).
func (n *Node) isPCSCFRoute(u sip.Uri) bool { return u.Port == 0 && n.pcscfs[hostKey(u.Host)] }

func (n *Node) tokenURI(token string) sip.Uri {
	return sip.Uri{Scheme: "sip", User: token, Host: n.cfg.Host, UriParams: sip.NewParams()}
}

// isToken reports a Request-URI that names a phone at this BAC.
func (n *Node) isToken(u sip.Uri) bool { return u.User != "" && sipx.IsHost(u, n.cfg.Host) }

// refuse answers 403 (when there is a transaction: not for an ACK) and records a "refused" event.
func (n *Node) refuse(r *sipx.Request, reason string) {
	if r.Tx != nil {
		n.core.Refuse(r, reason)
		return
	}
	n.rec.Emit(obs.Refused{Reason: reason, Method: string(r.Req.Method), CallID: sipx.CallID(r.Req),
		Peer: r.Source(), Role: r.Role.String()})
	n.log.Info("refused", "reason", reason, "method", string(r.Req.Method), "call_id", sipx.CallID(r.Req), "peer", r.Source())
}

// sanitize removes what a phone may not assert: identity headers and orig/restore on its Route entries. The
// prelude already did for a sender outside the trust domain; a phone is never in it.
func sanitize(out *sip.Request) {
	sipx.RemoveHeaders(out, sipx.HdrPAssertedIdentity)
	sipx.RemoveHeaders(out, sipx.HdrPPreferredIdentity)
	routes := sipx.Routes(out)
	if len(routes) == 0 {
		return
	}
	sipx.RemoveHeaders(out, "Route")
	for i := len(routes) - 1; i >= 0; i-- {
		u := routes[i]
		if u.UriParams != nil {
			u.UriParams = u.UriParams.Clone()
			u.UriParams.Remove(sipx.ParamOrig)
			u.UriParams.Remove(sipx.ParamRestore)
		}
		sipx.PrependRoute(out, u)
	}
}

// replaceContact puts the phone's token URI in place of its Contact.
func (n *Node) replaceContact(out sipx.Msg, token string) {
	c, ok := out.GetHeader("Contact").(*sip.ContactHeader)
	if !ok || c == nil {
		return
	}
	nc := &sip.ContactHeader{Address: n.tokenURI(token), Params: c.Params.Clone()}
	sipx.RemoveHeaders(out, "Contact")
	out.AppendHeader(nc)
}
