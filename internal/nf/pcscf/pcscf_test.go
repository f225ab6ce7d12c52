package pcscf_test

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/pcscf"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
	"github.com/imslab/quasipool/internal/runtime/pool"
	"github.com/imslab/quasipool/internal/runtime/repl"
)

const (
	self   = "pcscf1.ims.test"
	peer2  = "pcscf2.ims.test" // the other member of the P-CSCF pool
	user1  = "sip:user0001@ims.test"
	tel1   = "tel:+15550001" // user0001's associated identity
	user2  = "sip:user0002@ims.test"
	token1 = "sip:user0001@bac.ims.test" // user0001's Contact as the BAC registers it
	token2 = "sip:user0002@bac.ims.test"
)

// lab is a P-CSCF (pcscf1) under test with fake peers: the BAC, the I-CSCF, the S-CSCF scscf1 (all configured
// peers), and a stranger and a victim on the lab network (not configured).
type lab struct {
	node     *pcscf.Node
	addr     string
	res      *pool.StaticResolver
	ev       *sipxtest.Events
	bac      *fakePeer
	icscf    *fakePeer
	scscf1   *fakePeer
	stranger *fakePeer
	victim   *fakePeer
}

func target(name string, p *fakePeer) pool.Target {
	return pool.Target{Name: name, Addr: p.Addr(), Priority: 1, Weight: 1}
}

// startLab starts a P-CSCF with the quasi-pool takeover on (restore) or off (load sharing).
func startLab(restore bool) *lab {
	l := &lab{bac: startPeer("bac.ims.test"), icscf: startPeer("icscf.ims.test"),
		scscf1: startPeer("scscf1.ims.test"), stranger: startPeer("attacker.test"),
		victim: startPeer("victim.test")}
	l.res = pool.NewStaticResolver()
	l.res.SetSRV("_sip._udp.icscf.ims.test", target("icscf.ims.test", l.icscf))
	l.res.SetSRV("_sip._udp.scscf1.ims.test", target("scscf1.ims.test", l.scscf1))
	l.res.SetSRV("_sip._udp.bac.ims.test", target("bac.ims.test", l.bac))
	l.icscf.OnRequest(registrar)

	// The endpoint serves only once the node's handlers are registered (sipxtest.Endpoint serves at once, and
	// registering sipgo handlers on a serving endpoint is a data race).
	ep, err := sipx.NewEndpoint(self, "127.0.0.1:0", sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	l.addr = ep.Addr
	l.ev = sipxtest.NewEvents(self)
	node, err := pcscf.New(pcscf.Config{Host: self, Listen: ep.Addr, Domain: "ims.test", ICSCF: "icscf.ims.test",
		PoolHosts: []string{self, peer2},
		Peers:     sipx.Peers{BAC: []string{l.bac.Addr()}, ICSCF: []string{l.icscf.Addr()}, SCSCF: []string{l.scscf1.Addr()}},
		Forward:   sipx.ForwarderConfig{NoAnswer: 300 * time.Millisecond}, Restore: &restore},
		ep, l.res, nil, l.ev.Rec, sipxtest.Log())
	Expect(err).NotTo(HaveOccurred())
	l.node = node
	ctx, cancel := context.WithCancel(context.Background())
	served, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(served); _ = ep.Serve(ctx) }()
	go func() { defer close(done); _ = node.Run(ctx) }()
	DeferCleanup(func() { cancel(); <-done; <-served })
	Eventually(ep.Listening()).Should(BeClosed())
	return l
}

// registrar answers a REGISTER as the I-CSCF (and the S-CSCF behind it) would: 200 with the registered
// Contact, the Service-Route of scscf1 and the implicit registration set (user0001 also has tel:+15550001).
func registrar(req *sip.Request) (int, []sip.Header) {
	if req.Method != sip.REGISTER {
		return 200, nil
	}
	if req.To() == nil || req.Contact() == nil {
		return 400, nil
	}
	impu := sipx.AOR(req.To().Address)
	assoc := "<" + impu + ">"
	if impu == user1 {
		assoc += ", <" + tel1 + ">"
	}
	return 200, []sip.Header{
		sip.NewHeader("Contact", "<"+sipx.AOR(req.Contact().Address)+">;expires=600"),
		sip.NewHeader("Service-Route", "<sip:orig@scscf1.ims.test;lr>"),
		sip.NewHeader("P-Associated-URI", assoc),
	}
}

// register registers a user through the BAC as the BAC does (Contact: its token).
func (l *lab) register(impu, token string) *sip.Response {
	req := sipxtest.Request(sip.REGISTER, "sip:ims.test", "To: <"+impu+">", "From: <"+impu+">;tag=reg",
		"Contact: <"+token+">;expires=600")
	return l.bac.MustSend(req, l.addr)
}

// invite builds an initial INVITE from user0001 to user0002 with extra headers.
func invite(hdrs ...string) *sip.Request {
	return sipxtest.Request(sip.INVITE, user2, append([]string{"To: <" + user2 + ">"}, hdrs...)...)
}

// inDialog builds a BYE of an established dialog (To tag present) with extra headers.
func inDialog(ruri string, hdrs ...string) *sip.Request {
	return sipxtest.Request(sip.BYE, ruri, append([]string{"To: <" + user2 + ">;tag=callee"}, hdrs...)...)
}

func pai(req *sip.Request) []string { return sipx.HeaderValues(req, sipx.HdrPAssertedIdentity) }

func topRoute(req *sip.Request) sip.Uri {
	r := req.Route()
	Expect(r).NotTo(BeNil(), "no Route on %s", req.Method)
	return r.Address
}

// refused returns the reasons of the refused events recorded so far.
func (l *lab) refused() []string {
	var out []string
	for _, e := range l.ev.Of("refused") {
		r, _ := e["reason"].(string)
		out = append(out, r)
	}
	return out
}

var _ = Describe("P-CSCF", Label("integration"), func() {
	var l *lab

	Context("with the quasi-pool takeover", func() {
		BeforeEach(func() { l = startLab(true) })

		Describe("registration", func() {
			It("adds Path, forwards the BAC's REGISTER to the I-CSCF and keeps the 200's registration", func(ctx SpecContext) {
				res := l.register(user1, token1)
				Expect(res.StatusCode).To(Equal(200))
				reg := l.icscf.Last(sip.REGISTER)
				Expect(reg).NotTo(BeNil())
				Expect(sipx.FirstHeader(reg, sipx.HdrPath)).To(Equal("<sip:term@" + self + ";lr>"))
				Expect(sipx.FirstHeader(reg, sipx.HdrPVisitedNetworkID)).To(Equal(`"ims.test"`))

				// Recorded: the user's next call goes by its Service-Route, not to the I-CSCF.
				Expect(l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token1+">"), l.addr).StatusCode).
					To(Equal(200))
				Expect(l.scscf1.Count(sip.INVITE)).To(Equal(1))
				Expect(l.icscf.Count(sip.INVITE)).To(Equal(0))
			}, SpecTimeout(10*time.Second))

			// The expiry the 200 grants decides whether the P-CSCF keeps the registration, by the rule of the
			// I-CSCF's UAR type and the S-CSCF's SAR type (vocab): the Contact's expires parameter wins over the
			// Expires header.
			DescribeTable("keeps the registration a 200 grants, forgets it for an expiry of 0",
				func(ctx SpecContext, hdrs []string, kept bool) {
					Expect(l.register(user1, token1).StatusCode).To(Equal(200))
					l.icscf.OnRequest(func(req *sip.Request) (int, []sip.Header) {
						if req.Method != sip.REGISTER {
							return 200, nil
						}
						out := []sip.Header{sip.NewHeader("Service-Route", "<sip:orig@scscf1.ims.test;lr>")}
						for _, h := range hdrs {
							name, value, _ := strings.Cut(h, ": ")
							out = append(out, sip.NewHeader(name, value))
						}
						return 200, out
					})
					Expect(l.register(user1, token1).StatusCode).To(Equal(200))
					Expect(l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token1+">"), l.addr).StatusCode).
						To(Equal(200))
					if kept {
						Expect(l.scscf1.Count(sip.INVITE)).To(Equal(1), "by the Service-Route: registered")
						Expect(l.icscf.Count(sip.INVITE)).To(Equal(0))
					} else {
						Expect(l.icscf.Count(sip.INVITE)).To(Equal(1), "to the I-CSCF with restore=1: not registered here")
						Expect(l.scscf1.Count(sip.INVITE)).To(Equal(0))
					}
				},
				Entry("Contact: <…>;expires=0", SpecTimeout(10*time.Second),
					[]string{"Contact: <" + token1 + ">;expires=0"}, false),
				Entry("Contact: <…>;expires=0 with Expires: 600", SpecTimeout(10*time.Second),
					[]string{"Contact: <" + token1 + ">;expires=0", "Expires: 600"}, false),
				Entry("Expires: 0 and a Contact without the parameter", SpecTimeout(10*time.Second),
					[]string{"Contact: <" + token1 + ">", "Expires: 0"}, false),
				Entry("no Contact (the S-CSCF's 200 to a de-registration)", SpecTimeout(10*time.Second), []string{}, false),
				Entry("Contact: <…>;expires=600 with Expires: 0", SpecTimeout(10*time.Second),
					[]string{"Contact: <" + token1 + ">;expires=600", "Expires: 0"}, true),
				Entry("Expires: 600 and a Contact without the parameter", SpecTimeout(10*time.Second),
					[]string{"Contact: <" + token1 + ">", "Expires: 600"}, true),
			)

			It("refuses a REGISTER from anyone but the BAC", func(ctx SpecContext) {
				req := sipxtest.Request(sip.REGISTER, "sip:ims.test", "To: <"+user1+">", "Contact: <sip:user0001@127.0.0.1:5999>")
				Expect(l.stranger.MustSend(req, l.addr).StatusCode).To(Equal(403))
				Expect(l.icscf.Count(sip.REGISTER)).To(Equal(0))
				Expect(l.refused()).To(ContainElement("register_not_from_bac"))
			}, SpecTimeout(10*time.Second))
		})

		Describe("originating requests", func() {
			It("routes a registered caller by its Service-Route, asserting the BAC's P-Preferred-Identity", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(200))
				got := l.scscf1.Last(sip.INVITE)
				Expect(got).NotTo(BeNil())
				Expect(topRoute(got).User).To(Equal("orig"))
				Expect(topRoute(got).Host).To(Equal("scscf1.ims.test"))
				Expect(pai(got)).To(Equal([]string{"<" + user1 + ">"}))
				Expect(got.GetHeader(sipx.HdrPPreferredIdentity)).To(BeNil())
				Expect(sipx.FirstHeader(got, "Record-Route")).To(ContainSubstring(self))
			}, SpecTimeout(10*time.Second))

			It("asserts an associated identity of the registration", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				Expect(l.bac.MustSend(invite("P-Preferred-Identity: <"+tel1+">", "Contact: <"+token1+">"), l.addr).StatusCode).
					To(Equal(200))
				Expect(pai(l.scscf1.Last(sip.INVITE))).To(Equal([]string{"<" + tel1 + ">"}))
			}, SpecTimeout(10*time.Second))

			It("takes over a caller it does not hold: I-CSCF with orig;restore=1, PAI from the BAC's PPI", func(ctx SpecContext) {
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(200))
				got := l.icscf.Last(sip.INVITE)
				Expect(got).NotTo(BeNil())
				top := topRoute(got)
				Expect(top.Host).To(Equal("icscf.ims.test"))
				Expect(sipx.HasParam(top, sipx.ParamOrig)).To(BeTrue())
				Expect(sipx.ParamValue(top, sipx.ParamRestore)).To(Equal("1"))
				Expect(pai(got)).To(Equal([]string{"<" + user1 + ">"}))
				Expect(l.scscf1.Count(sip.INVITE)).To(Equal(0))
				Expect(l.ev.Of("restore")).To(ContainElement(HaveKeyWithValue("reason", "not_registered_here")))
			}, SpecTimeout(10*time.Second))

			It("takes over through the I-CSCF when the caller's S-CSCF does not answer", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				l.scscf1.OnRequest(func(*sip.Request) (int, []sip.Header) { return 0, nil }) // scscf1 is gone
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(200))
				got := l.icscf.Last(sip.INVITE)
				Expect(got).NotTo(BeNil())
				Expect(sipx.ParamValue(topRoute(got), sipx.ParamRestore)).To(Equal("1"))
				Expect(pai(got)).To(Equal([]string{"<" + user1 + ">"}))
				Expect(l.ev.Of("restore")).To(ContainElement(HaveKeyWithValue("reason", "scscf_unreachable")))
			}, SpecTimeout(10*time.Second))

			It("relays a 504 the caller's live S-CSCF answers, without a restoration (the failure is beyond it)", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				l.scscf1.OnRequest(func(*sip.Request) (int, []sip.Header) { return 504, nil }) // e.g. the HSS is down
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(504))
				Expect(vocab.IsRestoration(res)).To(BeFalse(), "not the 3GPP restoration body: the phone must not re-register")
				Expect(l.icscf.Count(sip.INVITE)).To(Equal(0), "no restoration through the I-CSCF")
				Expect(l.ev.Of("restore")).To(BeEmpty())
			}, SpecTimeout(10*time.Second))

			It("refuses an originating request from a stranger (attack 2 without the BAC): nothing forwarded", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				res := l.stranger.MustSend(invite("P-Preferred-Identity: <"+user1+">", "P-Asserted-Identity: <"+user1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(403))
				Expect(l.scscf1.Count(sip.INVITE)).To(Equal(0))
				Expect(l.icscf.Count(sip.INVITE)).To(Equal(0))
				Expect(l.refused()).To(ContainElement("not_from_bac_or_core"))
			}, SpecTimeout(10*time.Second))

			It("drops a P-Asserted-Identity the BAC passes on and asserts its own", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				res := l.bac.MustSend(invite("P-Asserted-Identity: <"+user2+">", "P-Preferred-Identity: <"+user1+">",
					"Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(200))
				Expect(pai(l.scscf1.Last(sip.INVITE))).To(Equal([]string{"<" + user1 + ">"}))
			}, SpecTimeout(10*time.Second))

			It("refuses a forged P-Asserted-Identity with a Route carrying restore=1 from the BAC (attack 4)", func(ctx SpecContext) {
				res := l.bac.MustSend(invite("P-Asserted-Identity: <"+user1+">", "P-Preferred-Identity: <"+user1+">",
					"Route: <sip:icscf.ims.test;lr;orig;restore=1>", "Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(403))
				Expect(l.refused()).To(ContainElement("marker_from_untrusted"))

				res = l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Route: <sip:"+self+";lr;restore=1>",
					"Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(403))
				Consistently(func() int { return l.icscf.Count(sip.INVITE) + l.scscf1.Count(sip.INVITE) }, "300ms").
					Should(BeZero())
			}, SpecTimeout(10*time.Second))

			It("refuses the identity of a user registered here with another Contact (attack 2 through the BAC)", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token2+">"), l.addr)
				Expect(res.StatusCode).To(Equal(403))
				Expect(l.refused()).To(ContainElement("identity_of_other_contact"))
				Expect(l.scscf1.Count(sip.INVITE) + l.icscf.Count(sip.INVITE)).To(BeZero())
			}, SpecTimeout(10*time.Second))

			It("refuses an identity that is not one of the registration of the request's Contact", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				// user0002 is not held here: without the binding check this became a restore=1 takeover of user0002.
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user2+">", "Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(403))
				Expect(l.refused()).To(ContainElement("identity_not_of_contact"))
				Expect(l.scscf1.Count(sip.INVITE) + l.icscf.Count(sip.INVITE)).To(BeZero())
			}, SpecTimeout(10*time.Second))

			It("answers 403 without an identity and 400 to an unparsable one", func(ctx SpecContext) {
				Expect(l.bac.MustSend(invite(), l.addr).StatusCode).To(Equal(403))
				Expect(l.bac.MustSend(invite("P-Preferred-Identity: garbage"), l.addr).StatusCode).To(Equal(400))
				Expect(l.bac.MustSend(invite("P-Preferred-Identity: <sip:@>"), l.addr).StatusCode).To(Equal(400))
				Expect(l.scscf1.Count(sip.INVITE) + l.icscf.Count(sip.INVITE)).To(BeZero())
			}, SpecTimeout(10*time.Second))
		})

		Describe("a pool peer's replicated registration (pool-sync)", func() {
			BeforeEach(func() {
				l.node.ApplyReplicated(repl.Message{Op: repl.OpPut, From: peer2, Key: user1, Data: []byte(`{"impu":"` + user1 +
					`","contact":"` + token1 + `","service_route":["<sip:orig@scscf1.ims.test;lr>"],"associated":["` + user1 +
					`","` + tel1 + `"],"expires":"` + time.Now().Add(time.Hour).Format(time.RFC3339) + `"}`)})
			})

			It("serves the peer's user by its Service-Route, no restore", func(ctx SpecContext) {
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+tel1+">", "Contact: <"+token1+">"), l.addr)
				Expect(res.StatusCode).To(Equal(200))
				Expect(pai(l.scscf1.Last(sip.INVITE))).To(Equal([]string{"<" + tel1 + ">"}))
				Expect(l.icscf.Count(sip.INVITE)).To(BeZero())
			}, SpecTimeout(10*time.Second))

			It("binds the identity to the replicated registration's Contact", func(ctx SpecContext) {
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token2+">"), l.addr)
				Expect(res.StatusCode).To(Equal(403))
				Expect(l.refused()).To(ContainElement("identity_of_other_contact"))
			}, SpecTimeout(10*time.Second))

			It("forgets it when the peer deletes it: the caller is taken over again", func(ctx SpecContext) {
				l.node.ApplyReplicated(repl.Message{Op: repl.OpDelete, From: peer2, Key: user1})
				res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token2+">"), l.addr)
				Expect(res.StatusCode).To(Equal(200))
				Expect(sipx.ParamValue(topRoute(l.icscf.Last(sip.INVITE)), sipx.ParamRestore)).To(Equal("1"))
			}, SpecTimeout(10*time.Second))
		})

		Describe("terminating requests", func() {
			It("passes a request from the S-CSCF on to the BAC", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				req := sipxtest.Request(sip.INVITE, token1, "To: <"+user1+">", "From: <"+user2+">;tag=a",
					"Route: <sip:term@"+self+";lr>", "P-Asserted-Identity: <"+user2+">")
				Expect(l.scscf1.MustSend(req, l.addr).StatusCode).To(Equal(200))
				got := l.bac.Last(sip.INVITE)
				Expect(got).NotTo(BeNil())
				Expect(got.Route()).To(BeNil())
				Expect(sipx.FirstHeader(got, "Record-Route")).To(ContainSubstring(self))
				Expect(pai(got)).To(Equal([]string{"<" + user2 + ">"}))
			}, SpecTimeout(10*time.Second))

			It("takes over a callee it does not hold when the S-CSCF sends it", func(ctx SpecContext) {
				req := sipxtest.Request(sip.INVITE, token1, "To: <"+user1+">", "Route: <sip:term@"+peer2+";lr>")
				Expect(l.scscf1.MustSend(req, l.addr).StatusCode).To(Equal(200))
				Expect(l.bac.Count(sip.INVITE)).To(Equal(1))
			}, SpecTimeout(10*time.Second))

			It("refuses a terminating request from a stranger or from the BAC (attack 3)", func(ctx SpecContext) {
				Expect(l.register(user1, token1).StatusCode).To(Equal(200))
				req := sipxtest.Request(sip.INVITE, token1, "To: <"+user1+">", "Route: <sip:term@"+self+";lr>")
				Expect(l.stranger.MustSend(req, l.addr).StatusCode).To(Equal(403))
				Expect(l.bac.MustSend(req, l.addr).StatusCode).To(Equal(403))
				Expect(l.refused()).To(ContainElements("not_from_bac_or_core", "terminating_not_from_scscf"))
				Consistently(func() int { return l.bac.Count(sip.INVITE) }, "300ms").Should(BeZero())
			}, SpecTimeout(10*time.Second))
		})

		Describe("in-dialog requests (attack 5)", func() {
			It("refuses a request from the BAC without our Record-Route", func(ctx SpecContext) {
				victim := "<sip:" + l.victim.Addr() + ";lr>"
				Expect(l.bac.MustSend(inDialog(user2, "Route: "+victim), l.addr).StatusCode).To(Equal(403))
				Expect(l.bac.MustSend(inDialog("sip:x@"+l.victim.Addr()), l.addr).StatusCode).To(Equal(403))
				Expect(l.refused()).To(ContainElement("not_our_dialog"))
				Consistently(func() int { return l.victim.Count("") }, "300ms").Should(BeZero())
			}, SpecTimeout(10*time.Second))

			It("refuses a request from a stranger even with our Record-Route", func(ctx SpecContext) {
				req := inDialog(user2, "Route: <sip:"+self+";lr>", "Route: <sip:"+l.victim.Addr()+";lr>")
				Expect(l.stranger.MustSend(req, l.addr).StatusCode).To(Equal(403))
				Consistently(func() int { return l.victim.Count("") }, "300ms").Should(BeZero())
			}, SpecTimeout(10*time.Second))

			It("relays our own dialog from the BAC without the PAI it forged", func(ctx SpecContext) {
				req := inDialog(user2, "Route: <sip:"+self+";lr>", "Route: <sip:scscf1.ims.test;lr>", "P-Asserted-Identity: <"+user2+">",
					"P-Preferred-Identity: <"+user2+">")
				Expect(l.bac.MustSend(req, l.addr).StatusCode).To(Equal(200))
				got := l.scscf1.Last(sip.BYE)
				Expect(got).NotTo(BeNil())
				Expect(got.GetHeader(sipx.HdrPAssertedIdentity)).To(BeNil())
				Expect(got.GetHeader(sipx.HdrPPreferredIdentity)).To(BeNil())
				Expect(topRoute(got).Host).To(Equal("scscf1.ims.test"))
			}, SpecTimeout(10*time.Second))

			It("relays a pool peer's dialog after a takeover", func(ctx SpecContext) {
				req := inDialog(user2, "Route: <sip:"+peer2+";lr>", "Route: <sip:scscf1.ims.test;lr>")
				Expect(l.bac.MustSend(req, l.addr).StatusCode).To(Equal(200))
				Expect(l.scscf1.Count(sip.BYE)).To(Equal(1))
			}, SpecTimeout(10*time.Second))

			It("relays a request of the core towards the BAC", func(ctx SpecContext) {
				req := sipxtest.Request(sip.BYE, token1, "To: <"+user1+">;tag=x", "Route: <sip:"+self+";lr>")
				Expect(l.scscf1.MustSend(req, l.addr).StatusCode).To(Equal(200))
				Expect(l.bac.Count(sip.BYE)).To(Equal(1))
			}, SpecTimeout(10*time.Second))

			It("refuses restore=1 on a Route entry of an in-dialog request from the BAC", func(ctx SpecContext) {
				req := inDialog(user2, "Route: <sip:"+self+";lr>", "Route: <sip:icscf.ims.test;lr;restore=1>")
				Expect(l.bac.MustSend(req, l.addr).StatusCode).To(Equal(403))
				Consistently(func() int { return l.icscf.Count("") }, "300ms").Should(BeZero())
			}, SpecTimeout(10*time.Second))
		})

		Describe("malformed requests", func() {
			It("answers 400 to a request without From, To or Call-ID", func(ctx SpecContext) {
				for _, drop := range []string{"From", "To", "Call-ID"} {
					Expect(rawExchange(l.addr, drop)).To(HavePrefix("SIP/2.0 400"), "without %s", drop)
				}
			}, SpecTimeout(10*time.Second))

			It("answers 400 to a REGISTER from the BAC without To", func(ctx SpecContext) {
				req := sipxtest.Request(sip.REGISTER, "sip:ims.test", "Contact: <"+token1+">;expires=600")
				req.RemoveHeader("To")
				Expect(l.bac.MustSend(req, l.addr).StatusCode).To(Equal(400))
				Expect(l.icscf.Count(sip.REGISTER)).To(BeZero())
			}, SpecTimeout(10*time.Second))
		})
	})

	Context("without the takeover (load sharing)", func() {
		BeforeEach(func() { l = startLab(false) })

		It("answers 504 with the restoration body for a caller it does not hold", func(ctx SpecContext) {
			res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token1+">"), l.addr)
			Expect(res.StatusCode).To(Equal(504))
			Expect(vocab.IsRestoration(res)).To(BeTrue())
			Expect(string(res.Body())).To(ContainSubstring("initial-registration"))
			Expect(l.icscf.Count(sip.INVITE) + l.scscf1.Count(sip.INVITE)).To(BeZero())
		}, SpecTimeout(10*time.Second))

		It("answers 504 with the restoration body when the caller's S-CSCF does not answer", func(ctx SpecContext) {
			Expect(l.register(user1, token1).StatusCode).To(Equal(200))
			l.scscf1.OnRequest(func(*sip.Request) (int, []sip.Header) { return 0, nil })
			res := l.bac.MustSend(invite("P-Preferred-Identity: <"+user1+">", "Contact: <"+token1+">"), l.addr)
			Expect(res.StatusCode).To(Equal(504))
			Expect(vocab.IsRestoration(res)).To(BeTrue())
			Expect(l.icscf.Count(sip.INVITE)).To(BeZero())
		}, SpecTimeout(10*time.Second))

		It("answers 480 to a terminating request for a callee it does not hold", func(ctx SpecContext) {
			req := sipxtest.Request(sip.INVITE, token1, "To: <"+user1+">", "Route: <sip:term@"+self+";lr>")
			Expect(l.scscf1.MustSend(req, l.addr).StatusCode).To(Equal(480))
			Expect(l.bac.Count(sip.INVITE)).To(BeZero())
		}, SpecTimeout(10*time.Second))
	})
})

// rawExchange sends an OPTIONS-less MESSAGE without one of From, To, Call-ID from a fresh socket and returns the
// first line of the answer.
func rawExchange(addr, drop string) string {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	lines := []string{
		"MESSAGE " + user2 + " SIP/2.0",
		"Via: SIP/2.0/UDP " + c.LocalAddr().String() + ";branch=z9hG4bK-" + sip.GenerateBranchN(10),
		"From: <" + user1 + ">;tag=f",
		"To: <" + user2 + ">",
		"Call-ID: raw-" + sip.GenerateBranchN(10),
		"CSeq: 1 MESSAGE",
		"Max-Forwards: 70",
		"Content-Length: 0",
	}
	var msg []string
	for _, line := range lines {
		if !strings.HasPrefix(line, drop+":") {
			msg = append(msg, line)
		}
	}
	dst, err := net.ResolveUDPAddr("udp", addr)
	Expect(err).NotTo(HaveOccurred())
	_, err = c.WriteTo([]byte(strings.Join(msg, "\r\n")+"\r\n\r\n"), dst)
	Expect(err).NotTo(HaveOccurred())
	Expect(c.SetReadDeadline(time.Now().Add(3 * time.Second))).To(Succeed())
	buf := make([]byte, 4096)
	n, _, err := c.ReadFrom(buf)
	Expect(err).NotTo(HaveOccurred(), "no answer without %s", drop)
	first, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return first
}
