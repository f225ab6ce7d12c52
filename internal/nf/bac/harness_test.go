package bac_test

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/bac"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/runtime/overload"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

const bacHost = "bac.ims.test"

// clock is a settable clock for expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testbed is a BAC under test with two fake P-CSCFs, two phones and an attacker on loopback.
type testbed struct {
	node     *bac.Node
	core     *sipx.Endpoint
	access   *sipx.Endpoint // nil with one socket
	pcscf1   *peer
	pcscf2   *peer
	phone    *peer
	phone2   *peer
	attacker *peer
	ev       *sipxtest.Events
	clock    *clock
}

type tbOpts struct {
	maxPhones int
	twoSocket bool
	overload  *overload.Controller // the endpoints' (one process: one controller on both sockets, as cmd/bac)
}

// pcscfAnswer is a P-CSCF's scripted answer: 200 to a REGISTER with the Contact and expires=600, 200 otherwise.
func pcscfAnswer(expires string) sipxtest.Answer {
	return func(req *sip.Request) (int, []sip.Header) {
		if req.Method == sip.REGISTER {
			return 200, []sip.Header{registeredContact(req, expires)}
		}
		return 200, nil
	}
}

func registeredContact(req *sip.Request, expires string) sip.Header {
	c := req.Contact()
	p := sip.NewParams()
	p.Add("expires", expires)
	return &sip.ContactHeader{Address: c.Address, Params: p}
}

func startTestbed(o tbOpts) *testbed {
	tb := &testbed{
		core:     newEndpoint(),
		pcscf1:   startPeer("pcscf1.ims.test"),
		pcscf2:   startPeer("pcscf2.ims.test"),
		phone:    startPeer("phone"),
		phone2:   startPeer("phone2"),
		attacker: startPeer("attacker"),
		ev:       sipxtest.NewEvents("bac"),
		clock:    &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
	}
	tb.pcscf1.OnRequest(pcscfAnswer("600"))
	tb.pcscf2.OnRequest(pcscfAnswer("600"))
	t1 := pool.Target{Name: "pcscf1.ims.test", Addr: tb.pcscf1.Addr(), Priority: 1, Weight: 1}
	t2 := pool.Target{Name: "pcscf2.ims.test", Addr: tb.pcscf2.Addr(), Priority: 2, Weight: 1}
	res := pool.NewStaticResolver().
		SetSRV("_sip._udp.pcscf.ims.test", t1, t2).
		SetSRV("_sip._udp.pcscf1.ims.test", t1, t2).
		SetSRV("_sip._udp.pcscf2.ims.test", pool.Target{Name: "pcscf2.ims.test", Addr: tb.pcscf2.Addr(), Priority: 1, Weight: 1}, t1)
	cfg := bac.Config{Host: bacHost, Listen: tb.core.Addr, PCSCFPool: "pcscf.ims.test",
		PCSCFHosts: []string{"pcscf1.ims.test", "pcscf2.ims.test"},
		Peers:      sipx.Peers{PCSCF: []string{tb.pcscf1.Addr(), tb.pcscf2.Addr()}},
		MaxPhones:  o.maxPhones, SweepEvery: 20 * time.Millisecond,
		Forward: sipx.ForwarderConfig{NoAnswer: 500 * time.Millisecond}}
	opts := []bac.Option{bac.WithClock(tb.clock.Now)}
	tb.core.Overload = o.overload
	if o.twoSocket {
		tb.access = newEndpoint()
		tb.access.Overload = o.overload
		opts = append(opts, bac.WithAccess(tb.access))
	}
	n, err := bac.New(cfg, tb.core, res, nil, tb.ev.Rec, sipxtest.Log(), opts...)
	Expect(err).NotTo(HaveOccurred())
	tb.node = n
	serve(tb.core)
	if tb.access != nil {
		serve(tb.access)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	DeferCleanup(func() { cancel(); <-done })
	return tb
}

// newEndpoint binds an endpoint for the BAC without serving it yet: the node registers its handlers first, as
// in cmd/bac (sipxtest.Endpoint serves at once, and handlers registered afterwards race with the server's reads
// as far as the race detector can tell: a datagram is no happens-before edge).
func newEndpoint() *sipx.Endpoint {
	ep, err := sipx.NewEndpoint(bacHost, "127.0.0.1:0", sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	return ep
}

// serve serves an endpoint until the spec ends.
func serve(ep *sipx.Endpoint) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ep.Serve(ctx) }()
	DeferCleanup(func() { cancel(); <-done })
	Eventually(ep.Listening()).Should(BeClosed())
}

// phoneSide is where phones send: the access socket with two sockets, else the one socket.
func (tb *testbed) phoneSide() string {
	if tb.access != nil {
		return tb.access.Addr
	}
	return tb.core.Addr
}

// register sends a REGISTER for user from p, with p's address as Contact, and returns the final answer.
func (tb *testbed) register(p *peer, user string, hdrs ...string) *sip.Response {
	h := append([]string{"From: <sip:" + user + "@ims.test>;tag=r" + sip.GenerateBranchN(6), "To: <sip:" + user + "@ims.test>",
		"Contact: <sip:" + user + "@" + p.Addr() + ">", "Expires: 600"}, hdrs...)
	return p.MustSend(sipxtest.Request(sip.REGISTER, "sip:ims.test", h...), tb.phoneSide())
}

// invite sends an initial INVITE from p with the given From user to callee.
func (tb *testbed) invite(p *peer, fromUser, ruri string, hdrs ...string) *sip.Response {
	h := append([]string{"From: <sip:" + fromUser + "@ims.test>;tag=i" + sip.GenerateBranchN(6),
		"Contact: <sip:" + fromUser + "@" + p.Addr() + ">"}, hdrs...)
	return p.MustSend(sipxtest.Request(sip.INVITE, ruri, h...), tb.phoneSide())
}

// mt sends a terminating INVITE from a P-CSCF to a phone token at the BAC's core address.
func (tb *testbed) mt(from *peer, user string) *sip.Response {
	return from.MustSend(sipxtest.Request(sip.INVITE, "sip:"+user+"@"+bacHost,
		"From: <sip:user0100@ims.test>;tag=mt"+sip.GenerateBranchN(6), "To: <sip:"+user+"@ims.test>",
		"P-Asserted-Identity: <sip:user0100@ims.test>", "Contact: <sip:caller@pcscf1.ims.test>"), tb.core.Addr)
}

// ppi is the P-Preferred-Identity of a request, "" when none.
func ppi(req *sip.Request) string {
	if req == nil {
		return ""
	}
	return sipx.FirstHeader(req, sipx.HdrPPreferredIdentity)
}

// refusals returns the reasons of the refused events.
func (tb *testbed) refusals() []string {
	var out []string
	for _, e := range tb.ev.Of("refused") {
		r, _ := e["reason"].(string)
		out = append(out, r)
	}
	return out
}

func contactOf(m interface{ GetHeader(string) sip.Header }) string {
	if c, ok := m.GetHeader("Contact").(*sip.ContactHeader); ok && c != nil {
		return strings.TrimSpace(c.Address.String())
	}
	return ""
}
