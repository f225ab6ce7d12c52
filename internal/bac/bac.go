// Package bac is the access node (an SBC) in front of the P-CSCFs. It hides the phones behind per-phone tokens,
// picks a P-CSCF from the pool record for a first registration, remembers which P-CSCF each phone registered
// through and sends its later requests by that P-CSCF's per-host record, so a dead P-CSCF is skipped (SPEC §3.1,
// §4.1, §4.3). It asserts nothing itself: it puts the phone's registered identity in P-Preferred-Identity and
// strips identity headers and orig/restore parameters a phone tries to send.
package bac

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/obs"
	"github.com/imslab/quasipool/internal/pool"
	"github.com/imslab/quasipool/internal/sipx"
)

// Config configures the BAC.
type Config struct {
	Host      string     // e.g. bac.ims.test (phones' Contacts become <sip:token@bac.ims.test>)
	Listen    string     // SIP/UDP listen address
	PCSCFPool string     // host of the P-CSCF pool record, e.g. pcscf.ims.test
	Peers     sipx.Peers // source addresses of the lab's SIP nodes by role: network-side requests only from PCSCF
	Forward   sipx.ForwarderConfig
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
	}
	return nil
}

type phone struct {
	Token   string
	IMPU    string
	Source  string  // where the phone sends from (ip:port)
	Addr    string  // where requests for the phone go: its Contact when that is an IP literal with a port, else Source
	Contact sip.Uri // the phone's own Contact URI
	PCSCF   string  // host of the P-CSCF it registered through
	Expires time.Time
}

// Node is a running BAC.
type Node struct {
	cfg Config
	px  *sipx.Proxy
	log *slog.Logger
	rec *obs.Recorder
	now func() time.Time

	mu      sync.Mutex
	byToken map[string]*phone
	addrs   map[string]int // phone source addresses
}

// New builds a BAC on an endpoint.
func New(cfg Config, ep *sipx.Endpoint, res pool.Resolver, health *pool.Health, rec *obs.Recorder, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	n := &Node{cfg: cfg, log: log, rec: rec, now: time.Now, byToken: map[string]*phone{}, addrs: map[string]int{},
		px: sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Health: health, Rec: rec, Log: log, Trust: sipx.NewTrust(cfg.Peers)},
			cfg.Forward, cfg.Host)}
	n.px.Serve(sipx.Handlers{Register: n.onRegister, Request: n.onRequest, Ack: n.onAck})
	return n, nil
}

// Run blocks until ctx is done.
func (n *Node) Run(ctx context.Context) error {
	n.px.Start(ctx)
	<-ctx.Done()
	return nil
}

var tokenChars = regexp.MustCompile(`[^A-Za-z0-9._~-]`)

// tokenFor derives the per-phone token from its public identity (readable in traces: user0001).
func tokenFor(u sip.Uri) string {
	t := tokenChars.ReplaceAllString(u.User, "")
	if t == "" {
		t = tokenChars.ReplaceAllString(u.Host, "")
	}
	return t
}

func (n *Node) isPhone(addr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs[addr] > 0
}

func (n *Node) phoneByToken(token string) *phone {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byToken[token]
}

func (n *Node) tokenURI(token string) sip.Uri {
	return sip.Uri{Scheme: "sip", User: token, Host: n.cfg.Host, UriParams: sip.NewParams()}
}

// sanitize removes what a phone may not assert: identity headers and orig/restore on its Route entries.
func sanitize(out *sip.Request) {
	sipx.RemoveHeaders(out, sipx.HdrPAssertedIdentity)
	sipx.RemoveHeaders(out, sipx.HdrPPreferredIdentity)
	routes := sipx.Routes(out)
	sipx.RemoveHeaders(out, "Route")
	for i := len(routes) - 1; i >= 0; i-- {
		u := routes[i]
		u.UriParams = u.UriParams.Clone()
		u.UriParams.Remove(sipx.ParamOrig)
		u.UriParams.Remove(sipx.ParamRestore)
		sipx.PrependRoute(out, u)
	}
}

// replaceContact puts the phone's token URI in place of its Contact.
func (n *Node) replaceContact(out *sip.Request, token string) {
	c := out.Contact()
	if c == nil {
		return
	}
	nc := &sip.ContactHeader{Address: n.tokenURI(token), Params: c.Params.Clone()}
	sipx.RemoveHeaders(out, "Contact")
	out.AppendHeader(nc)
}

// onRegister: first registration by the pool record, later ones by the per-host record of the P-CSCF used.
func (n *Node) onRegister(r *sipx.Request) {
	ctx, req, stx := r.Ctx, r.Req, r.Tx
	to, contact := req.To(), req.Contact()
	if to == nil || contact == nil {
		n.px.Respond(stx, req, 400, "Bad Request (To and Contact needed)")
		return
	}
	token := tokenFor(to.Address)
	if token == "" {
		n.px.Respond(stx, req, 400, "Bad Request (no user)")
		return
	}
	n.mu.Lock()
	ph := n.byToken[token]
	if ph == nil {
		ph = &phone{Token: token, IMPU: sipx.AOR(to.Address)}
		n.byToken[token] = ph
	}
	if ph.Source != req.Source() {
		if ph.Source != "" {
			n.addrs[ph.Source]--
		}
		ph.Source = req.Source()
		n.addrs[ph.Source]++
	}
	ph.Contact = contact.Address
	ph.Addr = ph.Source
	if ip := net.ParseIP(contact.Address.Host); ip != nil && contact.Address.Port != 0 {
		// No NAT in the lab: a phone that names its address is reached there (SIPp registers from one
		// process and answers calls in another).
		ph.Addr = sipx.HostPort(contact.Address.Host, contact.Address.Port)
	}
	pcscf := ph.PCSCF
	n.mu.Unlock()

	out := req.Clone()
	sanitize(out)
	sipx.RemoveHeaders(out, "Route")
	n.replaceContact(out, token)
	hop := sipx.SRVHop(n.cfg.PCSCFPool)
	if pcscf != "" {
		hop = sipx.SRVHop(pcscf)
	}
	phoneContact := contact.Address
	o := n.px.Fwd.Forward(ctx, stx, out, hop, sipx.WithResponseHook(func(res *sip.Response) {
		// The phone must see its own Contact in the answer.
		if c, ok := res.GetHeader("Contact").(*sip.ContactHeader); ok && c != nil {
			nc := &sip.ContactHeader{Address: phoneContact, Params: c.Params.Clone()}
			sipx.RemoveHeaders(res, "Contact")
			res.AppendHeader(nc)
		}
	}))
	if o.Final != nil && o.Final.StatusCode == 200 {
		exp := 0
		if c, ok := o.Final.GetHeader("Contact").(*sip.ContactHeader); ok && c != nil && c.Params != nil {
			if v, ok := c.Params.Get("expires"); ok {
				exp, _ = strconv.Atoi(v)
			}
		}
		n.mu.Lock()
		if exp > 0 {
			ph.PCSCF = o.Target.Name
			ph.Expires = n.now().Add(time.Duration(exp) * time.Second)
		} else {
			ph.PCSCF = ""
			ph.Expires = time.Time{}
		}
		n.mu.Unlock()
		if pcscf != "" && o.Target.Name != pcscf {
			n.rec.Emit("pcscf_change", map[string]any{"impu": ph.IMPU, "from": pcscf, "to": o.Target.Name, "method": "REGISTER"})
		}
	}
	n.px.Finish(stx, req, o)
}

// onRequest: from a phone, to the P-CSCF it registered through; from the network, to the phone of the token.
func (n *Node) onRequest(r *sipx.Request) {
	ctx, req, stx := r.Ctx, r.Req, r.Tx
	if n.isPhone(req.Source()) {
		n.fromPhone(ctx, stx, req)
		return
	}
	n.toPhone(ctx, stx, req)
}

func (n *Node) fromPhone(ctx context.Context, stx sip.ServerTransaction, req *sip.Request) {
	out := req.Clone()
	sanitize(out)
	n.px.PopSelf(out)
	if sipx.HasToTag(req) {
		// In-dialog: follow the route set the phone learnt from Record-Route.
		if from := req.From(); from != nil {
			if ph := n.phoneByToken(tokenFor(from.Address)); ph != nil {
				n.replaceContact(out, ph.Token)
			}
		}
		if out.Route() == nil && sipx.IsHost(out.Recipient, n.cfg.Host) {
			n.toPhone(ctx, stx, out) // both phones behind this BAC and no route set: deliver directly
			return
		}
		n.px.Finish(stx, req, n.px.Fwd.Forward(ctx, stx, out, sipx.NextHop(out)))
		return
	}
	from := req.From()
	if from == nil {
		n.px.Respond(stx, req, 400, "Bad Request")
		return
	}
	ph := n.phoneByToken(tokenFor(from.Address))
	if ph == nil || ph.PCSCF == "" || n.now().After(ph.Expires) {
		n.px.Respond(stx, req, 403, "Forbidden (not registered)")
		return
	}
	sipx.RemoveHeaders(out, "Route")
	out.AppendHeader(sip.NewHeader(sipx.HdrPPreferredIdentity, "<"+ph.IMPU+">"))
	n.replaceContact(out, ph.Token)
	o := n.px.Fwd.Forward(ctx, stx, out, sipx.SRVHop(ph.PCSCF))
	if o.Target.Name != "" && o.Target.Name != ph.PCSCF && o.Final != nil {
		n.rec.Emit("pcscf_change", map[string]any{"impu": ph.IMPU, "from": ph.PCSCF, "to": o.Target.Name, "method": string(req.Method)})
	}
	n.px.Finish(stx, req, o)
}

// toPhone delivers a request whose Request-URI is a phone token to the phone, with its own Contact as
// Request-URI; the phone's answers carry its token instead of its address.
func (n *Node) toPhone(ctx context.Context, stx sip.ServerTransaction, req *sip.Request) {
	ph := n.phoneByToken(req.Recipient.User)
	if ph == nil || !sipx.IsHost(req.Recipient, n.cfg.Host) {
		n.px.Respond(stx, req, 404, "Not Found")
		return
	}
	out := req.Clone()
	n.px.PopSelf(out)
	out.Recipient = ph.Contact
	sipx.RemoveHeaders(out, "Route")
	token := ph.Token
	o := n.px.Fwd.Forward(ctx, stx, out, sipx.AddrHop(ph.Addr), sipx.WithResponseHook(func(res *sip.Response) {
		if c, ok := res.GetHeader("Contact").(*sip.ContactHeader); ok && c != nil {
			nc := &sip.ContactHeader{Address: n.tokenURI(token), Params: c.Params.Clone()}
			sipx.RemoveHeaders(res, "Contact")
			res.AppendHeader(nc)
		}
	}))
	n.px.Finish(stx, req, o)
}

// onAck forwards an ACK for a 2xx: from a phone along its route set, from the network to the phone.
func (n *Node) onAck(r *sipx.Request) {
	ctx, req := r.Ctx, r.Req
	if n.isPhone(req.Source()) {
		out := req.Clone()
		sanitize(out)
		n.px.PopSelf(out)
		n.px.SendAck(ctx, out)
		return
	}
	ph := n.phoneByToken(req.Recipient.User)
	if ph == nil {
		return
	}
	out := req.Clone()
	out.Recipient = ph.Contact
	sipx.RemoveHeaders(out, "Route")
	sipx.PrependRoute(out, sip.Uri{Scheme: "sip", Host: hostOnly(ph.Addr), Port: portOnly(ph.Addr), UriParams: sip.HeaderParams{{K: "lr"}}})
	n.px.SendAck(ctx, out)
}
