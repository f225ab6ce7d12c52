package icscf_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/icscf"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// fakeHSS is the Cx side of the specs: it records every UAR and LIR (with its User-Authorization-Type) and answers
// them with scripted functions.
type fakeHSS struct {
	mu   sync.Mutex
	uars []cx.UAR
	lirs []cx.LIR
	uaa  func(q *cx.UAR) (*cx.UAA, error)
	lia  func(q *cx.LIR) (*cx.LIA, error)
}

func (h *fakeHSS) UserAuthorization(_ context.Context, q *cx.UAR) (*cx.UAA, error) {
	h.mu.Lock()
	h.uars = append(h.uars, *q)
	f := h.uaa
	h.mu.Unlock()
	if f == nil {
		return nil, &cx.Error{Command: "UAR", Result: cx.ErrorUserUnknown}
	}
	return f(q)
}

func (h *fakeHSS) LocationInfo(_ context.Context, q *cx.LIR) (*cx.LIA, error) {
	h.mu.Lock()
	h.lirs = append(h.lirs, *q)
	f := h.lia
	h.mu.Unlock()
	if f == nil {
		return nil, &cx.Error{Command: "LIR", Result: cx.ErrorUserUnknown}
	}
	return f(q)
}

func (h *fakeHSS) onUAR(f func(q *cx.UAR) (*cx.UAA, error)) {
	h.mu.Lock()
	h.uaa = f
	h.mu.Unlock()
}

func (h *fakeHSS) onLIR(f func(q *cx.LIR) (*cx.LIA, error)) {
	h.mu.Lock()
	h.lia = f
	h.mu.Unlock()
}

func (h *fakeHSS) UARs() []cx.UAR {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]cx.UAR(nil), h.uars...)
}

func (h *fakeHSS) LIRs() []cx.LIR {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]cx.LIR(nil), h.lirs...)
}

// uats lists the User-Authorization-Types of the UARs.
func (h *fakeHSS) uarTypes() []cx.UserAuthorizationType {
	var out []cx.UserAuthorizationType
	for _, q := range h.UARs() {
		out = append(out, q.AuthorizationType)
	}
	return out
}

// lirUAT2 lists, per LIR, whether it asked with UAT 2.
func (h *fakeHSS) lirUAT2() []bool {
	var out []bool
	for _, q := range h.LIRs() {
		out = append(out, q.AuthorizationType != nil && *q.AuthorizationType == cx.UATRegistrationAndCapabilities)
	}
	return out
}

// Scripted HSS answers.
func stored(name string) func(*cx.UAR) (*cx.UAA, error) {
	return func(q *cx.UAR) (*cx.UAA, error) {
		if q.AuthorizationType == cx.UATRegistrationAndCapabilities {
			return &cx.UAA{Result: cx.Success, ServerCapabilities: &cx.ServerCapabilities{}}, nil
		}
		return &cx.UAA{Result: cx.Success, ServerName: "sip:" + name}, nil
	}
}

func located(name string) func(*cx.LIR) (*cx.LIA, error) {
	return func(q *cx.LIR) (*cx.LIA, error) {
		a := &cx.LIA{Result: cx.Success, ServerName: "sip:" + name}
		if q.AuthorizationType != nil && *q.AuthorizationType == cx.UATRegistrationAndCapabilities {
			a.ServerCapabilities = &cx.ServerCapabilities{}
		}
		return a, nil
	}
}

const (
	icscfHost = "icscf.ims.test"
	scscf1    = "scscf1.ims.test"
	scscf2    = "scscf2.ims.test"
	user1     = "sip:user0001@ims.test"
	user2     = "sip:user0002@ims.test"
)

// lab is an I-CSCF under test and the fake nodes around it. The P-CSCF, the S-CSCFs and the BAC are trusted by
// their addresses (Config.Peers); the phone and the stranger are not named anywhere.
type lab struct {
	addr                   string
	hss                    *fakeHSS
	ev                     *sipxtest.Events
	pcscf, bac, phone      *peer
	stranger, victim       *peer
	scscf1, scscf2, scscfX *peer // scscfX: an S-CSCF peer that sends (originating S-CSCF of a caller)
}

func newLab(configure ...func(*icscf.Config)) *lab {
	l := &lab{hss: &fakeHSS{}, ev: sipxtest.NewEvents("icscf")}
	l.pcscf = startPeer("pcscf1.ims.test")
	l.bac = startPeer("bac.ims.test")
	l.phone = startPeer("phone.ims.test")
	l.stranger = startPeer("stranger.example")
	l.victim = startPeer("victim.example")
	l.scscf1 = startPeer(scscf1)
	l.scscf2 = startPeer(scscf2)
	l.scscfX = startPeer("scscf3.ims.test")
	t := func(p *peer, prio uint16) pool.Target {
		return pool.Target{Name: p.Name, Addr: p.Addr(), Priority: prio, Weight: 10}
	}
	// Per-host records as the topology writes them: the member first, the others behind it (who takes its users).
	res := pool.NewStaticResolver().
		SetSRV("_sip._udp."+scscf1, t(l.scscf1, 1), t(l.scscf2, 2)).
		SetSRV("_sip._udp."+scscf2, t(l.scscf2, 1), t(l.scscf1, 2)).
		SetSRV("_sip._udp.scscf.ims.test", t(l.scscf1, 1), t(l.scscf2, 1))
	// The node's handlers are registered on the endpoint before it serves (as nfrun does): sipgo's handler map has
	// no lock, and sipxtest.Endpoint serves at once.
	ep, err := sipx.NewEndpoint(icscfHost, "127.0.0.1:0", sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	l.addr = ep.Addr
	cfg := icscf.Config{Host: icscfHost, Listen: ep.Addr, Domain: "ims.test", SCSCFPool: "scscf.ims.test",
		Peers: sipx.Peers{BAC: []string{l.bac.Addr()}, PCSCF: []string{l.pcscf.Addr()},
			SCSCF: []string{l.scscf1.Addr(), l.scscf2.Addr(), l.scscfX.Addr()}},
		Forward: sipx.ForwarderConfig{NoAnswer: 300 * time.Millisecond}}
	for _, c := range configure {
		c(&cfg)
	}
	n, err := icscf.New(cfg, l.hss, ep, res, nil, l.ev.Rec, sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	served, ran := make(chan struct{}), make(chan struct{})
	go func() { defer close(served); _ = ep.Serve(ctx) }()
	go func() { defer close(ran); _ = n.Run(ctx) }()
	DeferCleanup(func() { cancel(); <-ran; <-served })
	Eventually(ep.Listening()).Should(BeClosed())
	return l
}

// silent makes a peer a dead S-CSCF: it receives and never answers.
func silent(p *peer) {
	p.OnRequest(func(*sip.Request) (int, []sip.Header) { return 0, nil })
}

// refusals returns the reasons of the refused events.
func (l *lab) refusals() []string {
	var out []string
	for _, e := range l.ev.Of("refused") {
		out = append(out, e["reason"].(string))
	}
	return out
}

// topRoute is the first Route entry of a request (it must have one).
func topRoute(req *sip.Request) sip.Uri {
	rs := sipx.Routes(req)
	Expect(rs).NotTo(BeEmpty(), "no Route on %s", req.Method)
	return rs[0]
}

var errUnreachable = errors.New("diameter: no connection to the HSS")
