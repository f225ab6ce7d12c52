package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
)

// The attacks 1–6 of the security issue (phones and strangers on the lab network are untrusted), tried against the real lab while a
// P-CSCF takeover is under way and legitimate phones keep calling each other. Every attacker is a bare SIP socket
// (or a Cx client) on 127.0.0.1 with a port of its own: no phone logic, it sends whatever the spec builds.

// sipSocket is a bare SIP endpoint on its own UDP socket on 127.0.0.1. It sends what it is given and records every
// request it receives, answering each with a fixed status (an attacker, a sink, or a fake callee).
type sipSocket struct {
	name   string
	addr   string
	cli    *sipgo.Client
	answer int

	mu  sync.Mutex
	got []*sip.Request
}

func newSIPSocket(name string, answer int) *sipSocket {
	GinkgoHelper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	ua, err := sipgo.NewUA(sipgo.WithUserAgent(name))
	Expect(err).NotTo(HaveOccurred())
	srv, err := sipgo.NewServer(ua)
	Expect(err).NotTo(HaveOccurred())
	s := &sipSocket{name: name, addr: conn.LocalAddr().String(), answer: answer}
	record := func(req *sip.Request) {
		s.mu.Lock()
		s.got = append(s.got, req)
		s.mu.Unlock()
	}
	srv.OnAck(func(req *sip.Request, _ sip.ServerTransaction) { record(req) })
	srv.OnNoRoute(func(req *sip.Request, tx sip.ServerTransaction) {
		record(req)
		res := sip.NewResponseFromRequest(req, s.answer, "scripted", nil)
		if to := res.To(); to != nil && !to.Params.Has("tag") {
			to.Params.Add("tag", sip.GenerateTagN(8))
		}
		_ = tx.Respond(res)
	})
	go func() { _ = srv.ServeUDP(conn) }()
	Eventually(func() error { _, err := ua.TransportLayer().GetConnection("udp", s.addr); return err }).Should(Succeed())
	s.cli, err = sipgo.NewClient(ua, sipgo.WithClientAddr(s.addr), sipgo.WithClientConnectionAddr(s.addr))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { ua.Close(); conn.Close() })
	return s
}

// received returns the requests received so far with that Call-ID ("" = all).
func (s *sipSocket) received(callID string) []*sip.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*sip.Request
	for _, r := range s.got {
		if callID == "" || sipCallID(r) == callID {
			out = append(out, r)
		}
	}
	return out
}

// request builds a request from "Name: value" lines (sipxtest.Request defaults for the rest) with the socket's own
// address as Contact.
func (s *sipSocket) request(method sip.RequestMethod, ruri string, hdrs ...string) *sip.Request {
	GinkgoHelper()
	has := false
	for _, h := range hdrs {
		has = has || strings.HasPrefix(strings.ToLower(h), "contact:")
	}
	if !has && (method == sip.INVITE || method == sip.REGISTER) {
		hdrs = append(hdrs, "Contact: <sip:"+s.name+"@"+s.addr+">")
	}
	return sipxtest.Request(method, ruri, hdrs...)
}

// outcome is every answer a request got: provisional statuses and the final response (nil: none in time).
type outcome struct {
	provisional []int
	final       *sip.Response
}

// rang reports a request that got as far as a phone: a 180/183 or a 2xx.
func (o outcome) rang() bool {
	for _, c := range o.provisional {
		if c == 180 || c == 183 {
			return true
		}
	}
	return o.accepted()
}

// accepted reports a 2xx final answer.
func (o outcome) accepted() bool { return o.final != nil && o.final.StatusCode < 300 }

func (o outcome) status() int {
	if o.final == nil {
		return 0
	}
	return o.final.StatusCode
}

// send sends req to dst as a client transaction from the socket's address and collects the answers for up to 8 s.
// A 2xx to an INVITE is acknowledged (a real attacker would take the call).
func (s *sipSocket) send(sctx context.Context, req *sip.Request, dst string) outcome {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(sctx, 8*time.Second)
	defer cancel()
	req.SetDestination(dst)
	tx, err := s.cli.TransactionRequest(ctx, req)
	Expect(err).NotTo(HaveOccurred())
	defer tx.Terminate()
	var o outcome
	for {
		select {
		case res := <-tx.Responses():
			if res == nil {
				continue
			}
			if res.IsProvisional() {
				o.provisional = append(o.provisional, res.StatusCode)
				continue
			}
			o.final = res
			if req.IsInvite() && res.IsSuccess() {
				_ = s.cli.WriteRequest(ackFor(req, res, dst))
			}
			fmt.Fprintf(GinkgoWriter, "%s: %s %s → %s: %d %s\n", s.name, req.Method, req.Recipient.String(), dst, res.StatusCode, res.Reason)
			return o
		case <-tx.Done():
			fmt.Fprintf(GinkgoWriter, "%s: %s %s → %s: no final answer (%v)\n", s.name, req.Method, req.Recipient.String(), dst, tx.Err())
			return o
		case <-ctx.Done():
			fmt.Fprintf(GinkgoWriter, "%s: %s %s → %s: no final answer in time\n", s.name, req.Method, req.Recipient.String(), dst)
			return o
		}
	}
}

// register sends a REGISTER for user from the socket (its own address as Contact); with a password it answers the
// challenge. It returns the last final response.
func (s *sipSocket) register(sctx context.Context, bac, user, password string) *sip.Response {
	GinkgoHelper()
	aor := "sip:" + user + "@ims.test"
	req := s.request(sip.REGISTER, "sip:ims.test", "From: <"+aor+">;tag="+sip.GenerateTagN(8), "To: <"+aor+">",
		"Contact: <sip:"+user+"@"+s.addr+">", "Expires: 600")
	o := s.send(sctx, req, bac)
	Expect(o.final).NotTo(BeNil(), "%s: no answer to REGISTER %s", s.name, user)
	if o.final.StatusCode != 401 || password == "" {
		return o.final
	}
	ctx, cancel := context.WithTimeout(sctx, 8*time.Second)
	defer cancel()
	res, err := s.cli.DoDigestAuth(ctx, req, o.final, sipgo.DigestAuth{Username: user + "@ims.test", Password: password})
	Expect(err).NotTo(HaveOccurred())
	return res
}

// ackFor builds the ACK of a 2xx to inv (RFC 3261 §13.2.2.4): to the remote target along the Record-Route set.
func ackFor(inv *sip.Request, res *sip.Response, dst string) *sip.Request {
	target := inv.Recipient
	if c := res.Contact(); c != nil {
		target = c.Address
	}
	ack := sip.NewRequest(sip.ACK, target)
	rr := res.GetHeaders("Record-Route")
	for i := len(rr) - 1; i >= 0; i-- {
		if h, ok := rr[i].(*sip.RecordRouteHeader); ok {
			ack.AppendHeader(&sip.RouteHeader{Address: h.Address})
		}
	}
	for _, name := range []string{"From", "Call-ID"} {
		if h := inv.GetHeader(name); h != nil {
			ack.AppendHeader(sip.HeaderClone(h))
		}
	}
	if h := res.GetHeader("To"); h != nil {
		ack.AppendHeader(sip.HeaderClone(h))
	}
	if cs := inv.CSeq(); cs != nil {
		ack.AppendHeader(&sip.CSeqHeader{SeqNo: cs.SeqNo, MethodName: sip.ACK})
	}
	ack.AppendHeader(sip.NewHeader("Max-Forwards", "70"))
	ack.SetDestination(dst)
	return ack
}

func sipCallID(m sip.Message) string {
	if c := m.CallID(); c != nil {
		return c.Value()
	}
	return ""
}

// identities are the identities a request names for its caller: From, P-Asserted-Identity, P-Preferred-Identity.
func identities(req *sip.Request) []string {
	var out []string
	if f := req.From(); f != nil {
		out = append(out, f.Address.User)
	}
	for _, name := range []string{"P-Asserted-Identity", "P-Preferred-Identity"} {
		for _, h := range req.GetHeaders(name) {
			var u sip.Uri
			var p sip.HeaderParams
			if _, err := sip.ParseAddressValue(h.Value(), &u, &p); err == nil {
				out = append(out, u.User)
			}
		}
	}
	return out
}

// startRecordedPhones is startPhones with a records file, so the callee side of every call can be checked.
func startRecordedPhones(dnsAddr, records string, from, count int) *ue.UE {
	cfg := ue.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DNSServer = dnsAddr
	cfg.Users.From, cfg.Users.Count = from, count
	cfg.Manual = true
	cfg.RingTime = 50 * time.Millisecond
	cfg.CallTimeout = 8 * time.Second
	cfg.RecordsFile = records
	u, err := ue.New(cfg, ue.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done, 15*time.Second).Should(Receive())
	})
	Eventually(u.Ready(), 10*time.Second).Should(BeClosed())
	return u
}

// readRecords reads the phones' records file.
func readRecords(path string) []ue.Record {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []ue.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r ue.Record
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// traffic keeps legitimate phones calling each other, one call at a time, until stopped.
type traffic struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	res  []trafficCall
}

type trafficCall struct {
	from, to string
	res      ue.CallResult
}

func startTraffic(phones *ue.UE, pairs [][2]string) *traffic {
	t := &traffic{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(t.done)
		for i := 0; ; i++ {
			select {
			case <-t.stop:
				return
			default:
			}
			p := pairs[i%len(pairs)]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, _ := phones.Phone(p[0]).Call(ctx, "sip:"+p[1]+"@ims.test", 200*time.Millisecond)
			cancel()
			t.mu.Lock()
			t.res = append(t.res, trafficCall{from: p[0], to: p[1], res: res})
			t.mu.Unlock()
		}
	}()
	return t
}

// await waits until at least n calls were placed.
func (t *traffic) await(n int, within time.Duration) {
	GinkgoHelper()
	Eventually(func() int { t.mu.Lock(); defer t.mu.Unlock(); return len(t.res) }, within, 100*time.Millisecond).
		Should(BeNumerically(">=", n), "legitimate calls placed")
}

// finish stops the traffic after the call in progress and returns every call placed.
func (t *traffic) finish() []trafficCall {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	Eventually(t.done, 60*time.Second).Should(BeClosed())
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]trafficCall(nil), t.res...)
}

var _ = Describe("Attacks from the lab network during a P-CSCF takeover", Label("e2e", "attack"), Ordered, ContinueOnFailure, func() {
	const victim = "user0001@ims.test"
	var (
		l        *lab
		phones   *ue.UE
		records  string
		witness  *sipSocket // user0007, registered legitimately, called by no legitimate phone: any INVITE it gets is an attack
		dead     string     // the P-CSCF user0001 registered through, killed
		affected []string   // phones registered through it
		regCount = map[string]int{}
		load     *traffic
		// rogueCalls are the Call-IDs of every request an attacker sent: no phone may see one of them.
		rogueCalls []string
	)
	users := []string{"user0001", "user0002", "user0003", "user0004", "user0005", "user0006"}

	BeforeAll(func(sctx SpecContext) {
		l = startLab()
		records = filepath.Join(GinkgoT().TempDir(), "records.jsonl")
		phones = startRecordedPhones(l.dns(), records, 1, 6)
		registerAll(sctx, phones, 1, 6)
		witness = newSIPSocket("witness", 486)
		Expect(witness.register(sctx, l.bac(), "user0007", "pass0007").StatusCode).To(Equal(200))

		dead = shortName(phones.Phone("user0001").Registration().PCSCF)
		Expect(dead).To(MatchRegexp(`^pcscf\d$`))
		for _, u := range users {
			r := phones.Phone(u).Registration()
			regCount[u] = r.Count
			if shortName(r.PCSCF) == dead {
				affected = append(affected, u)
			}
		}
		By(fmt.Sprintf("SIGKILL %s (user0001's P-CSCF; affected: %v); legitimate calls in both directions keep going", dead, affected))
		l.kill(dead)
		var pairs [][2]string
		for i, u := range users {
			next := users[(i+1)%len(users)]
			pairs = append(pairs, [2]string{u, next}, [2]string{next, u})
		}
		load = startTraffic(phones, pairs)
		DeferCleanup(func() { load.finish() })
	}, NodeTimeout(120*time.Second))

	// sent notes an attacker's request so that the callee side can be checked for it later.
	sent := func(req *sip.Request) *sip.Request { rogueCalls = append(rogueCalls, sipCallID(req)); return req }
	refusedAt := func(node, peer string, method sip.RequestMethod) bool {
		return hasEvent(l.events(node), "refused", map[string]any{"peer": peer, "method": string(method)})
	}
	nodeAddr := func(node string) string {
		var k int
		switch {
		case node == "bac":
			return l.bac()
		case node == "icscf":
			return l.icscf()
		case strings.HasPrefix(node, "pcscf"):
			fmt.Sscanf(node, "pcscf%d", &k)
			return l.port(10 + k)
		default:
			fmt.Sscanf(node, "scscf%d", &k)
			return l.port(20 + k)
		}
	}
	// sarUnregistered counts the HSS's SAR UNREGISTERED_USER answers for user0001 (an S-CSCF taking the user over).
	sarUnregistered := func() int {
		return countEvents(l, []string{"hss"}, "cx_answer", map[string]any{"cmd": "SAR", "sat": float64(3), "impu": "sip:" + victim})
	}
	// otherSCSCF is an S-CSCF that does not serve user0001: one that would have to restore it.
	otherSCSCF := func() string {
		serving := shortName(strings.TrimPrefix(registrationOf(l.hssHTTP(), victim)["server_name"].(string), "sip:"))
		for _, n := range []string{"scscf1", "scscf2", "scscf3"} {
			if n != serving {
				return n
			}
		}
		return ""
	}
	// notDelivered checks that nothing with that Call-ID reached the fake callee.
	notDelivered := func(callID string) {
		GinkgoHelper()
		Consistently(func() []*sip.Request { return witness.received(callID) }, time.Second, 100*time.Millisecond).
			Should(BeEmpty(), "the request reached the callee user0007")
	}

	It("attack 2: a phone that sent a REGISTER cannot call as user0001 (From, P-Asserted-Identity, P-Preferred-Identity)", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		rogue := newSIPSocket("rogue2", 480)
		By("the rogue sends a REGISTER for a user of its own choosing (no credentials): it is challenged")
		Expect(rogue.register(sctx, l.bac(), "user0009", "").StatusCode).To(Equal(401))

		By("then an INVITE to user0007 that claims to be user0001, which is being taken over by a backup P-CSCF")
		inv := sent(rogue.request(sip.INVITE, "sip:user0007@ims.test", "From: <sip:"+victim+">;tag="+sip.GenerateTagN(8),
			"P-Asserted-Identity: <sip:"+victim+">", "P-Preferred-Identity: <sip:"+victim+">"))
		o := rogue.send(sctx, inv, l.bac())
		Expect(o.rang()).To(BeFalse(), "the call was placed (status %d)", o.status())
		notDelivered(sipCallID(inv))
		Expect(refusedAt("bac", rogue.addr, sip.INVITE)).To(BeTrue(), "the BAC recorded a refused event for the rogue's INVITE")
	})

	It("attack 3: a request from a sender that is not a network node is not delivered to a phone by its BAC token", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		rogue := newSIPSocket("rogue3", 480)
		for _, callee := range []string{"user0007", "user0002"} {
			By("INVITE sip:" + callee + "@bac.ims.test straight to the BAC")
			inv := sent(rogue.request(sip.INVITE, "sip:"+callee+"@bac.ims.test", "From: <sip:user0003@ims.test>;tag="+sip.GenerateTagN(8),
				"To: <sip:"+callee+"@ims.test>", "P-Asserted-Identity: <sip:user0003@ims.test>",
				"Record-Route: <sip:pcscf2.ims.test;lr>", "Record-Route: <sip:scscf1.ims.test;lr>"))
			o := rogue.send(sctx, inv, l.bac())
			Expect(o.rang()).To(BeFalse(), "the phone of %s rang (status %d, provisional %v)", callee, o.status(), o.provisional)
			notDelivered(sipCallID(inv))
		}
		Expect(refusedAt("bac", rogue.addr, sip.INVITE)).To(BeTrue(), "the BAC recorded a refused event")
	})

	It("attack 4: the I-CSCF and an S-CSCF refuse orig, restore=1 and a forged identity from outside, with or without the marker", SpecTimeout(90*time.Second), func(sctx SpecContext) {
		rogue := newSIPSocket("rogue4", 480)
		before := sarUnregistered()
		target := otherSCSCF()
		Expect(target).NotTo(BeEmpty())
		forged := func(route string) *sip.Request {
			return sent(rogue.request(sip.INVITE, "sip:user0007@ims.test", "From: <sip:"+victim+">;tag="+sip.GenerateTagN(8),
				"Route: "+route, "P-Asserted-Identity: <sip:"+victim+">"))
		}
		for _, c := range []struct{ node, route string }{
			{"icscf", "<sip:icscf.ims.test;lr;orig>"},
			{"icscf", "<sip:icscf.ims.test;lr;orig;restore=1>"},
			{target, "<sip:orig@" + target + ".ims.test;lr;restore=1>"},
			{target, "<sip:" + target + ".ims.test;lr>"}, // no marker: the S-CSCF must not take the identity or restore
		} {
			By(c.node + " ← INVITE with Route " + c.route + " and P-Asserted-Identity user0001")
			inv := forged(c.route)
			o := rogue.send(sctx, inv, nodeAddr(c.node))
			Expect(o.status()).To(Equal(403), "refused")
			notDelivered(sipCallID(inv))
			Expect(sarUnregistered()).To(Equal(before), "no S-CSCF took user0001 over (SAR UNREGISTERED_USER) for the rogue")
		}
		Expect(refusedAt("icscf", rogue.addr, sip.INVITE)).To(BeTrue(), "the I-CSCF recorded a refused event")
		Expect(refusedAt(target, rogue.addr, sip.INVITE)).To(BeTrue(), "%s recorded a refused event", target)
		Expect(registrationOf(l.hssHTTP(), victim)["server_name"]).NotTo(Equal("sip:"+target+".ims.test"),
			"the HSS still names user0001's own S-CSCF")
	})

	It("attack 5: a P-CSCF, the I-CSCF and the S-CSCFs do not relay an in-dialog request to an address the sender chose", SpecTimeout(90*time.Second), func(sctx SpecContext) {
		rogue := newSIPSocket("rogue5", 480)
		sink := newSIPSocket("sink", 200)
		var live string
		for _, n := range []string{"pcscf1", "pcscf2", "pcscf3"} {
			if n != dead && live == "" {
				live = n
			}
		}
		inDialog := func(method sip.RequestMethod, route bool) *sip.Request {
			hdrs := []string{"From: <sip:" + victim + ">;tag=" + sip.GenerateTagN(8), "To: <sip:user0002@ims.test>;tag=" + sip.GenerateTagN(8),
				"P-Asserted-Identity: <sip:" + victim + ">"}
			if route {
				hdrs = append(hdrs, "Route: <sip:"+sink.addr+";lr>")
			}
			return sent(rogue.request(method, "sip:user0002@"+sink.addr, hdrs...))
		}
		for _, node := range []string{live, "icscf", "scscf1", "scscf2"} {
			for _, m := range []sip.RequestMethod{sip.BYE, sip.INVITE} {
				for _, route := range []bool{true, false} {
					By(fmt.Sprintf("%s ← %s with a To tag, Request-URI the sink, Route to the sink: %v", node, m, route))
					o := rogue.send(sctx, inDialog(m, route), nodeAddr(node))
					Expect(o.accepted()).To(BeFalse(), "status %d", o.status())
				}
			}
			Expect(refusedAt(node, rogue.addr, sip.BYE)).To(BeTrue(), "%s recorded a refused event for the BYE", node)
		}
		Consistently(func() []*sip.Request { return sink.received("") }, 2*time.Second, 100*time.Millisecond).
			Should(BeEmpty(), "a node relayed a rogue's request to the sink")

		// With the node's own Route entry first (as in a dialog it Record-Routed), the node pops it; from outside the
		// trust domain the next hop must then still be a host of the home network (sipx.Proxy.InDialog), so a
		// forged route set that leads to an address of the sender's choosing is refused too.
		sink2 := newSIPSocket("sink-own-route", 200)
		for _, node := range []string{live, "scscf1"} {
			By(node + " ← BYE with a To tag and the route set <" + node + ">, <sink>: refused, nothing relayed")
			bye := sent(rogue.request(sip.BYE, "sip:user0002@"+sink2.addr, "From: <sip:"+victim+">;tag="+sip.GenerateTagN(8),
				"To: <sip:user0002@ims.test>;tag="+sip.GenerateTagN(8), "P-Asserted-Identity: <sip:"+victim+">",
				"Route: <sip:"+node+".ims.test;lr>", "Route: <sip:"+sink2.addr+";lr>"))
			o := rogue.send(sctx, bye, nodeAddr(node))
			Expect(o.accepted()).To(BeFalse(), "%s: status %d", node, o.status())
		}
		Consistently(func() []*sip.Request { return sink2.received("") }, 2*time.Second, 100*time.Millisecond).
			Should(BeEmpty(), "a node relayed a rogue's request with its own Route first to the sink")
	})

	It("attack 6: the HSS gives no HA1 to a Diameter peer it does not know, and refuses a SAR naming another S-CSCF", SpecTimeout(90*time.Second), func(sctx SpecContext) {
		client := func(origin string) *cx.Client {
			c, err := cx.NewClient(cx.ClientConfig{Addr: l.port(1), OriginHost: origin, OriginRealm: "ims.test",
				DestinationRealm: "ims.test", ReconnectMin: 200 * time.Millisecond, ReconnectMax: time.Second,
				WatchdogInterval: time.Second}, cx.WithClientLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
			Expect(err).NotTo(HaveOccurred())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = c.Run(ctx) }()
			DeferCleanup(func() { cancel(); Eventually(done, 10*time.Second).Should(BeClosed()) })
			return c
		}
		mar := func(c *cx.Client, server string) (*cx.MAA, error) {
			ctx, cancel := context.WithTimeout(sctx, 5*time.Second)
			defer cancel()
			return c.MultimediaAuth(ctx, &cx.MAR{UserName: victim, PublicIdentity: "sip:" + victim, ServerName: server,
				NumberAuthItems: 1, AuthItem: cx.AuthItem{Scheme: cx.SchemeSIPDigest}})
		}
		ha1 := func(a *cx.MAA) string {
			if a == nil {
				return ""
			}
			for _, it := range a.AuthItems {
				if it.Digest != nil && it.Digest.HA1 != "" {
					return it.Digest.HA1
				}
			}
			return ""
		}
		serving := registrationOf(l.hssHTTP(), victim)["server_name"].(string)

		By("Origin-Host rogue.ims.test: the CER is refused (3010), no connection, no HA1")
		rogue := client("rogue.ims.test")
		Consistently(rogue.Connected(), 3*time.Second, 100*time.Millisecond).ShouldNot(BeClosed(), "the HSS accepted an unknown peer")
		maa, err := mar(rogue, "sip:scscf1.ims.test")
		Expect(err).To(HaveOccurred(), "MAR from an unknown peer answered")
		Expect(ha1(maa)).To(BeEmpty(), "HA1 of user0001 handed to an unknown peer")
		Expect(hasEvent(l.events("hss"), "cx_refused", map[string]any{"peer": "rogue.ims.test"})).To(BeTrue(), "the HSS recorded cx_refused")

		// On loopback every node connects from 127.0.0.1, so the HSS cannot tell this process from the real scscf1
		// by its address: it may well accept the connection (and would answer a MAR naming scscf1 itself). What it
		// must refuse is a request naming an S-CSCF other than the one the peer is configured as.
		By("Origin-Host scscf1.ims.test (a spoof the address check cannot see on loopback): MAR and SAR naming scscf2 are refused")
		spoof := client("scscf1.ims.test")
		other := "sip:scscf2.ims.test"
		maa, err = mar(spoof, other)
		Expect(err).To(HaveOccurred(), "MAR naming another S-CSCF answered")
		Expect(ha1(maa)).To(BeEmpty())
		ctx, cancel := context.WithTimeout(sctx, 5*time.Second)
		defer cancel()
		saa, err := spoof.ServerAssignment(ctx, &cx.SAR{UserName: victim, PublicIdentities: []string{"sip:" + victim},
			ServerName: other, AssignmentType: cx.SATUnregisteredUser})
		Expect(err).To(HaveOccurred(), "SAR UNREGISTERED_USER naming another S-CSCF answered")
		Expect(saa == nil || len(saa.Restoration) == 0).To(BeTrue(), "user0001's restoration info handed out")
		select {
		case <-spoof.Connected():
			fmt.Fprintln(GinkgoWriter, "attack 6: the spoofed scscf1.ims.test connection was accepted (loopback)")
		default:
			fmt.Fprintln(GinkgoWriter, "attack 6: the spoofed scscf1.ims.test connection was refused")
		}
		Expect(registrationOf(l.hssHTTP(), victim)["server_name"]).To(Equal(serving), "user0001 still assigned to its S-CSCF")
		Expect(hasEvent(l.events("hss"), "cx_refused", map[string]any{"peer": "scscf1.ims.test"})).To(BeTrue(), "the HSS recorded cx_refused")
	})

	It("legitimate calls went on: every call succeeded, the affected users were taken over without re-registering, no callee saw a caller that did not call", SpecTimeout(120*time.Second), func(sctx SpecContext) {
		load.await(2*len(users), 90*time.Second) // every pair at least once, in both directions
		calls := load.finish()
		var failed []string
		moOK, mtOK := map[string]bool{}, map[string]bool{}
		for _, c := range calls {
			if c.res.Result != "ok" {
				failed = append(failed, fmt.Sprintf("%s → %s: %s (%d)", c.from, c.to, c.res.Result, c.res.Status))
				continue
			}
			moOK[c.from], mtOK[c.to] = true, true
		}
		fmt.Fprintf(GinkgoWriter, "legitimate traffic: %d calls, %d failed, affected users %v\n", len(calls), len(failed), affected)
		Expect(failed).To(BeEmpty(), "legitimate calls failed during the attacks (%d calls)", len(calls))
		for _, u := range affected {
			Expect(moOK[u]).To(BeTrue(), "%s (affected) placed a successful call", u)
			Expect(mtOK[u]).To(BeTrue(), "%s (affected) received a successful call", u)
			Expect(phones.Phone(u).Registration().Count).To(Equal(regCount[u]), "%s did not re-register: taken over", u)
		}

		By("the callee side: every call a phone received came from the phone its From names, and no rogue call arrived")
		var recs []ue.Record
		Eventually(func() int { recs = readRecords(records); return len(recs) }).Should(BeNumerically(">", 0))
		placed := map[string]map[string]bool{} // caller IMPU → Call-IDs it placed
		for _, r := range recs {
			if r.Type == "call" && r.Direction == "mo" {
				if placed[r.IMPU] == nil {
					placed[r.IMPU] = map[string]bool{}
				}
				placed[r.IMPU][r.CallID] = true
			}
		}
		for _, r := range recs {
			if r.Type != "call" || r.Direction != "mt" {
				continue
			}
			Expect(rogueCalls).NotTo(ContainElement(r.CallID), "%s received a rogue's call (from %s)", r.IMPU, r.From)
			Expect(placed[r.From][r.CallID]).To(BeTrue(), "%s received call %s as from %s, which that phone did not place", r.IMPU, r.CallID, r.From)
		}
		for _, req := range witness.received("") {
			Expect(identities(req)).NotTo(ContainElement("user0001"), "user0007 was called as user0001: %s", req.StartLine())
		}
		Expect(witness.received("")).To(BeEmpty(), "user0007 (called by no legitimate phone) received requests")
	})

	It("attack 1: a REGISTER for user0001 that is answered 401 does not move user0001's calls to the sender", SpecTimeout(90*time.Second), func(sctx SpecContext) {
		rogue := newSIPSocket("rogue1", 480)
		By("the rogue registers as user0001 without credentials, with its own address as Contact")
		Expect(rogue.register(sctx, l.bac(), "user0001", "").StatusCode).To(Equal(401))

		By("the next call to user0001 reaches user0001's phone, not the rogue")
		res := tryCall(sctx, phones, "user0002", "user0001")
		Expect(rogue.received(res.CallID)).To(BeEmpty(), "the INVITE for user0001 reached the rogue")
		Expect(rogue.received("")).To(BeEmpty(), "the rogue received requests")
		Expect(res.Result).To(Equal("ok"), "user0002 → user0001 after the rogue REGISTER: %d", res.Status)
		Expect(tryCall(sctx, phones, "user0001", "user0003").Result).To(Equal("ok"), "user0001 can still call")

		By("and the rogue cannot call as user0001 either")
		inv := sent(rogue.request(sip.INVITE, "sip:user0007@ims.test", "From: <sip:"+victim+">;tag="+sip.GenerateTagN(8),
			"P-Preferred-Identity: <sip:"+victim+">"))
		o := rogue.send(sctx, inv, l.bac())
		Expect(o.rang()).To(BeFalse(), "the rogue's call as user0001 was placed (status %d)", o.status())
		notDelivered(sipCallID(inv))
		Expect(refusedAt("bac", rogue.addr, sip.INVITE)).To(BeTrue(), "the BAC recorded a refused event")
	})

	It("shows the refusals in the run report, by node", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		s, err := report.Build(l.dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Security).NotTo(BeNil(), "no refusal in any node's events")
		fmt.Fprintf(GinkgoWriter, "security.refused: %v\n", s.Security.Refused)
		for _, node := range []string{"bac", "icscf", "hss"} {
			Expect(s.Security.Refused).To(HaveKey(node), "refusals at %s", node)
		}
		pcscfs := 0
		for node := range s.Security.Refused {
			if strings.HasPrefix(node, "pcscf") {
				pcscfs++
			}
		}
		Expect(pcscfs).To(BeNumerically(">=", 1), "refusals at a P-CSCF")
		md, err := os.ReadFile(filepath.Join(l.dir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## Refused requests"))
	})
})
