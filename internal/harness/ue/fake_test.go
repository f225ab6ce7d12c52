package ue_test

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// fakeBAC is test scaffolding standing in for the BAC and the IMS core behind it: a registrar that challenges
// REGISTER with SIP Digest (realm ims.test, qop auth) and checks the answer against passNNNN, and a stateful
// relay that carries INVITE/ACK/BYE/CANCEL between registered phones, record-routing as if the call crossed
// pcscf1, scscf1 (caller side), scscf2 and pcscf2 (callee side).
type fakeBAC struct {
	addr  string
	laddr sip.Addr
	cli   *sipgo.Client
	grant int // registration period granted, seconds

	mu        sync.Mutex
	nonces    map[string]bool
	bindings  map[string]binding
	registers []seenRegister
	relayed   []seenRequest
	acks      map[string]*sip.Request    // last ACK relayed, by Call-ID
	pcscfOf   map[string]string          // the P-CSCF put in a user's Path (default pcscf1); set before registering
	silent    map[sip.RequestMethod]bool // methods the fake neither answers nor relays (an overloaded network)
	refuse    map[sip.RequestMethod]int  // methods the fake answers itself with this status (a core that lost the dialog)
}

type binding struct {
	contact sip.Uri
	source  string
}

type seenRegister struct {
	User    string
	CallID  string
	CSeq    uint32
	Expires int
	Status  int
	At      time.Time
}

type seenRequest struct {
	Method string
	CallID string
	Routes []string // Route hosts, top first
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func startFakeBAC(grant int) *fakeBAC {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	la := conn.LocalAddr().(*net.UDPAddr)
	f := &fakeBAC{addr: la.String(), laddr: sip.Addr{IP: la.IP, Port: la.Port}, grant: grant,
		nonces: map[string]bool{}, bindings: map[string]binding{}, acks: map[string]*sip.Request{}}
	log := testLogger().With("node", "fake-bac")
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("fake-bac"),
		sipgo.WithUserAgentTransactionLayerOptions(sip.WithTransactionLayerLogger(log)))
	Expect(err).NotTo(HaveOccurred())
	srv, err := sipgo.NewServer(ua, sipgo.WithServerLogger(log))
	Expect(err).NotTo(HaveOccurred())
	f.cli, err = sipgo.NewClient(ua, sipgo.WithClientAddr(f.addr), sipgo.WithClientConnectionAddr(f.addr))
	Expect(err).NotTo(HaveOccurred())
	srv.OnRegister(f.onRegister)
	srv.OnInvite(f.onInvite)
	srv.OnAck(f.onAck)
	srv.OnBye(f.onBye)
	srv.OnUpdate(f.onUpdate)
	srv.OnCancel(func(req *sip.Request, tx sip.ServerTransaction) {
		_ = tx.Respond(sip.NewResponseFromRequest(req, 481, "Call/Transaction Does Not Exist", nil))
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.ServeUDP(conn)
	}()
	DeferCleanup(func() {
		_ = ua.Close()
		_ = conn.Close()
		<-done
	})
	return f
}

func (f *fakeBAC) onRegister(req *sip.Request, tx sip.ServerTransaction) {
	user := req.To().Address.User
	expires := 600
	if h := req.GetHeader("Expires"); h != nil {
		expires, _ = strconv.Atoi(h.Value())
	}
	seen := seenRegister{User: user, CallID: req.CallID().Value(), CSeq: req.CSeq().SeqNo, Expires: expires,
		At: time.Now()}
	respond := func(res *sip.Response) {
		seen.Status = res.StatusCode
		f.mu.Lock()
		f.registers = append(f.registers, seen)
		f.mu.Unlock()
		_ = tx.Respond(res)
	}
	var params map[string]string
	if h := req.GetHeader("Authorization"); h != nil {
		params = authParams(h.Value())
	}
	if params["response"] == "" {
		nonce := randomHex()
		f.mu.Lock()
		f.nonces[nonce] = true
		f.mu.Unlock()
		res := sip.NewResponseFromRequest(req, 401, "Unauthorized", nil)
		res.AppendHeader(sip.NewHeader("WWW-Authenticate",
			`Digest realm="ims.test", nonce="`+nonce+`", algorithm=MD5, qop="auth"`))
		respond(res)
		return
	}
	f.mu.Lock()
	knownNonce := f.nonces[params["nonce"]]
	f.mu.Unlock()
	number := strings.TrimPrefix(user, "user")
	ha1 := md5hex(params["username"] + ":ims.test:pass" + number)
	ha2 := md5hex("REGISTER:" + params["uri"])
	want := md5hex(ha1 + ":" + params["nonce"] + ":" + params["nc"] + ":" + params["cnonce"] + ":auth:" + ha2)
	if !knownNonce || params["username"] != user+"@ims.test" || params["realm"] != "ims.test" ||
		params["qop"] != "auth" || params["response"] != want {
		respond(sip.NewResponseFromRequest(req, 403, "Forbidden", nil))
		return
	}
	f.mu.Lock()
	if expires == 0 {
		delete(f.bindings, user)
	} else {
		f.bindings[user] = binding{contact: *req.Contact().Address.Clone(), source: req.Source()}
	}
	f.mu.Unlock()
	res := sip.NewResponseFromRequest(req, 200, "OK", nil)
	contact := req.Contact().Clone()
	contact.Params = sip.NewParams()
	contact.Params.Add("expires", strconv.Itoa(min(expires, f.grant)))
	res.AppendHeader(contact)
	pcscf := "pcscf1"
	f.mu.Lock()
	if h, ok := f.pcscfOf[user]; ok {
		pcscf = h
	}
	f.mu.Unlock()
	res.AppendHeader(sip.NewHeader("Path", "<sip:term@"+pcscf+".ims.test;lr>"))
	res.AppendHeader(sip.NewHeader("Service-Route", "<sip:orig@scscf1.ims.test;lr>"))
	res.AppendHeader(sip.NewHeader("P-Associated-URI", "<sip:"+user+"@ims.test>, <tel:+1555"+number+">"))
	respond(res)
}

func (f *fakeBAC) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	if req.To().Params.Has("tag") {
		f.relay(req, tx)
		return
	}
	switch req.Recipient.User {
	case "overloaded": // an overloaded network: 503 with Retry-After 2
		res := sip.NewResponseFromRequest(req, 503, "Service Unavailable (overload)", nil)
		res.AppendHeader(sip.NewHeader("Retry-After", "2"))
		_ = tx.Respond(res)
		return
	case "restoration", "plain504", "late-restoration": // a core without the caller's state (TS 24.229 restoration
		// body), a bare 504, or the restoration 504 after a second
		if req.Recipient.User == "late-restoration" {
			_ = tx.Respond(sip.NewResponseFromRequest(req, 100, "Trying", nil))
			time.Sleep(time.Second)
		}
		res := sip.NewResponseFromRequest(req, 504, "Server Time-out", nil)
		if req.Recipient.User != "plain504" {
			res.SetBody([]byte(`<?xml version="1.0"?><ims-3gpp version="1"><alternative-service><type>restoration</type>` +
				`<reason>not registered here</reason><action>initial-registration</action></alternative-service></ims-3gpp>`))
			ct := sip.ContentTypeHeader("application/3gpp-ims+xml")
			res.AppendHeader(&ct)
		}
		_ = tx.Respond(res)
		return
	}
	f.mu.Lock()
	b, ok := f.bindings[req.Recipient.User]
	f.mu.Unlock()
	if !ok {
		_ = tx.Respond(sip.NewResponseFromRequest(req, 404, "Not Found", nil))
		return
	}
	fwd := req.Clone()
	fwd.Recipient = *b.contact.Clone()
	for _, host := range []string{"pcscf1", "scscf1", "scscf2", "pcscf2"} {
		fwd.PrependHeader(&sip.RecordRouteHeader{Address: sip.Uri{Scheme: "sip", Host: host + ".ims.test",
			UriParams: sip.HeaderParams{{K: "lr"}}}})
	}
	f.forward(req, tx, fwd, b.source)
}

// relay forwards an in-dialog request by its Request-URI (the other phone's Contact), dropping the Route set
// as if every proxy on it had done its part.
func (f *fakeBAC) relay(req *sip.Request, tx sip.ServerTransaction) {
	fwd := req.Clone()
	f.see(req)
	for fwd.RemoveHeader("Route") {
	}
	dest := fmt.Sprintf("%s:%d", fwd.Recipient.Host, fwd.Recipient.Port)
	if req.IsAck() {
		f.mu.Lock()
		f.acks[req.CallID().Value()] = req.Clone()
		f.mu.Unlock()
		fwd.SetDestination(dest)
		f.laddr.Copy(&fwd.Laddr)
		_ = f.cli.WriteRequest(fwd, sipgo.ClientRequestAddVia)
		return
	}
	f.forward(req, tx, fwd, dest)
}

func (f *fakeBAC) forward(req *sip.Request, tx sip.ServerTransaction, fwd *sip.Request, dest string) {
	fwd.SetDestination(dest)
	f.laddr.Copy(&fwd.Laddr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx2, err := f.cli.TransactionRequest(ctx, fwd, sipgo.ClientRequestAddVia)
	if err != nil {
		_ = tx.Respond(sip.NewResponseFromRequest(req, 503, "Service Unavailable", nil))
		return
	}
	defer ctx2.Terminate()
	if req.IsInvite() {
		tx.OnCancel(func(c *sip.Request) {
			f.see(c)
			go f.cancelDownstream(fwd)
		})
	}
	for {
		select {
		case res := <-ctx2.Responses():
			res.RemoveHeader("Via")
			res.SetDestination(req.Source())
			_ = tx.Respond(res)
			if !res.IsProvisional() {
				return
			}
		case <-ctx2.Done():
			_ = tx.Respond(sip.NewResponseFromRequest(req, 408, "Request Timeout", nil))
			return
		case <-ctx.Done():
			return
		}
	}
}

func (f *fakeBAC) cancelDownstream(fwd *sip.Request) {
	c := sip.NewRequest(sip.CANCEL, *fwd.Recipient.Clone())
	c.AppendHeader(fwd.Via().Clone())
	maxFwd := sip.MaxForwardsHeader(70)
	c.AppendHeader(&maxFwd)
	c.AppendHeader(sip.HeaderClone(fwd.From()))
	c.AppendHeader(sip.HeaderClone(fwd.To()))
	c.AppendHeader(sip.HeaderClone(fwd.CallID()))
	c.AppendHeader(&sip.CSeqHeader{SeqNo: fwd.CSeq().SeqNo, MethodName: sip.CANCEL})
	c.SetBody(nil)
	c.SetDestination(fwd.Destination())
	f.laddr.Copy(&c.Laddr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = f.cli.Do(ctx, c, sipgo.ClientRequestBuild)
}

func (f *fakeBAC) onAck(req *sip.Request, tx sip.ServerTransaction) { f.relay(req, tx) }
func (f *fakeBAC) onBye(req *sip.Request, tx sip.ServerTransaction) {
	if f.isSilent(sip.BYE) {
		f.see(req) // seen, never answered
		return
	}
	f.relay(req, tx)
}

func (f *fakeBAC) onUpdate(req *sip.Request, tx sip.ServerTransaction) {
	f.mu.Lock()
	code := f.refuse[sip.UPDATE]
	f.mu.Unlock()
	switch {
	case f.isSilent(sip.UPDATE):
		f.see(req)
	case code != 0:
		f.see(req)
		_ = tx.Respond(sip.NewResponseFromRequest(req, code, "Refused by the fake", nil))
	default:
		f.relay(req, tx)
	}
}

// refuseWith makes the fake answer every request of the method with code from now on.
func (f *fakeBAC) refuseWith(m sip.RequestMethod, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse == nil {
		f.refuse = map[sip.RequestMethod]int{}
	}
	f.refuse[m] = code
}

// silence makes the fake drop every request of the method from now on.
func (f *fakeBAC) silence(m sip.RequestMethod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.silent == nil {
		f.silent = map[sip.RequestMethod]bool{}
	}
	f.silent[m] = true
}

func (f *fakeBAC) isSilent(m sip.RequestMethod) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.silent[m]
}

func (f *fakeBAC) see(req *sip.Request) {
	s := seenRequest{Method: string(req.Method), CallID: req.CallID().Value()}
	for _, h := range req.GetHeaders("Route") {
		s.Routes = append(s.Routes, h.(*sip.RouteHeader).Address.Host)
	}
	f.mu.Lock()
	f.relayed = append(f.relayed, s)
	f.mu.Unlock()
}

// invite sends an INVITE for user straight to the phones' socket and returns the final status.
func (f *fakeBAC) invite(ctx context.Context, ueAddr, user string) int {
	host, port, err := net.SplitHostPort(ueAddr)
	Expect(err).NotTo(HaveOccurred())
	p, _ := strconv.Atoi(port)
	req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: user, Host: host, Port: p})
	req.SetDestination(ueAddr)
	f.laddr.Copy(&req.Laddr)
	res, err := f.cli.Do(ctx, req)
	Expect(err).NotTo(HaveOccurred())
	return res.StatusCode
}

// reinvite sends a re-INVITE inside the dialog of the ACK it relayed for callID (as the caller would, towards
// the callee) with the given To tag ("" = the callee's), and returns the final status and body.
func (f *fakeBAC) reinvite(ctx context.Context, ueAddr, callID, toTag string) (int, string) {
	f.mu.Lock()
	ack := f.acks[callID]
	f.mu.Unlock()
	Expect(ack).NotTo(BeNil())
	req := sip.NewRequest(sip.INVITE, *ack.Recipient.Clone())
	req.AppendHeader(sip.HeaderClone(ack.From()))
	to := sip.HeaderClone(ack.To()).(*sip.ToHeader)
	if toTag != "" {
		to.Params.Add("tag", toTag)
	}
	req.AppendHeader(to)
	req.AppendHeader(sip.HeaderClone(ack.CallID()))
	req.AppendHeader(&sip.CSeqHeader{SeqNo: 10, MethodName: sip.INVITE})
	req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", Host: f.laddr.IP.String(), Port: f.laddr.Port}})
	req.SetDestination(ueAddr)
	f.laddr.Copy(&req.Laddr)
	res, err := f.cli.Do(ctx, req)
	Expect(err).NotTo(HaveOccurred())
	return res.StatusCode, string(res.Body())
}

func (f *fakeBAC) registersOf(user string) []seenRegister {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seenRegister
	for _, r := range f.registers {
		if r.User == user {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeBAC) relayedFor(callID string) []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seenRequest
	for _, r := range f.relayed {
		if r.CallID == callID {
			out = append(out, r)
		}
	}
	return out
}

// methods lists the methods of the requests relayed so far, in order.
func (f *fakeBAC) methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.relayed {
		out = append(out, r.Method)
	}
	return out
}

func (f *fakeBAC) bound() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for u := range f.bindings {
		out = append(out, u)
	}
	return out
}

var authParamRE = regexp.MustCompile(`(\w+)=(?:"([^"]*)"|([^,\s]+))`)

func authParams(v string) map[string]string {
	out := map[string]string{}
	for _, m := range authParamRE.FindAllStringSubmatch(strings.TrimPrefix(v, "Digest "), -1) {
		out[m[1]] = m[2] + m[3]
	}
	return out
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startDNS serves _sip._udp.bac.ims.test → bac.ims.test:port and bac.ims.test → 127.0.0.1 (no additional
// section, so the phones ask for the A record themselves).
func startDNS(port int) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	mux := dns.NewServeMux()
	mux.HandleFunc("ims.test.", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		q := r.Question[0]
		switch {
		case q.Qtype == dns.TypeSRV && strings.EqualFold(q.Name, "_sip._udp.bac.ims.test."):
			m.Answer = append(m.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeSRV,
				Class: dns.ClassINET, Ttl: 1}, Priority: 1, Weight: 10, Port: uint16(port), Target: "bac.ims.test."})
		case q.Qtype == dns.TypeA && strings.EqualFold(q.Name, "bac.ims.test."):
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA,
				Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(127, 0, 0, 1)})
		default:
			m.SetRcode(r, dns.RcodeNameError)
		}
		_ = w.WriteMsg(m)
	})
	started := make(chan struct{})
	s := &dns.Server{PacketConn: pc, Handler: mux, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = s.ActivateAndServe() }()
	Eventually(started).Should(BeClosed())
	DeferCleanup(func() { _ = s.Shutdown() })
	return pc.LocalAddr().String()
}
