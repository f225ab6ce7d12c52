package e2e_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// rawPhone is a bare sipgo UA, for checks that do not need the simulated phones.
type rawPhone struct {
	cli          *sipgo.Client
	addr         string
	lastRegister *sip.Request
}

func newRawPhone() *rawPhone {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("e2e-phone"))
	Expect(err).NotTo(HaveOccurred())
	srv, err := sipgo.NewServer(ua)
	Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.ServeUDP(conn) }()
	addr := conn.LocalAddr().String()
	Eventually(func() error { _, err := ua.TransportLayer().GetConnection("udp", addr); return err }).Should(Succeed())
	cli, err := sipgo.NewClient(ua, sipgo.WithClientAddr(addr), sipgo.WithClientConnectionAddr(addr))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { ua.Close(); conn.Close() })
	return &rawPhone{cli: cli, addr: addr}
}

func (p *rawPhone) register(ctx context.Context, bac, user, password string, expires int) *sip.Response {
	req := sip.NewRequest(sip.REGISTER, sip.Uri{Scheme: "sip", Host: "ims.test"})
	aor := sip.Uri{Scheme: "sip", User: user, Host: "ims.test"}
	req.AppendHeader(&sip.FromHeader{Address: aor, Params: sip.HeaderParams{{K: "tag", V: sip.GenerateTagN(8)}}})
	req.AppendHeader(&sip.ToHeader{Address: aor})
	host, port, _ := net.SplitHostPort(p.addr)
	var pn int
	fmt.Sscan(port, &pn)
	req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: user, Host: host, Port: pn}})
	req.AppendHeader(sip.NewHeader("Expires", fmt.Sprint(expires)))
	req.SetDestination(bac)
	p.lastRegister = req
	res, err := p.cli.Do(ctx, req)
	Expect(err).NotTo(HaveOccurred())
	if res.StatusCode != 401 {
		return res
	}
	res, err = p.cli.DoDigestAuth(ctx, req, res, sipgo.DigestAuth{Username: user + "@ims.test", Password: password})
	Expect(err).NotTo(HaveOccurred())
	return res
}

func registrationState(httpAt, impi string) map[string]any { return registrationOf(httpAt, impi) }

var _ = Describe("SIP core", Label("e2e"), Ordered, func() {
	var (
		l   *lab
		bac string
	)
	BeforeAll(func() { l = startLab(); bac = l.bac() })

	It("registers a phone through BAC, P-CSCF, I-CSCF and S-CSCF with SIP Digest", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		p := newRawPhone()
		ctx, cancel := context.WithTimeout(sctx, 20*time.Second)
		defer cancel()
		res := p.register(ctx, bac, "user0001", "pass0001", 600)
		Expect(res.StatusCode).To(Equal(200), res.String())
		Expect(res.GetHeader("Service-Route").Value()).To(MatchRegexp(`sip:orig@scscf\d\.ims\.test;lr`))
		Expect(res.GetHeader("Path").Value()).To(MatchRegexp(`<sip:term@pcscf\d\.ims\.test;lr>`))
		Expect(res.Contact().Address.Port).NotTo(BeZero(), "the phone gets its own Contact back, not the BAC token")

		reg := registrationState(l.hssHTTP(), "user0001@ims.test")
		Expect(reg).To(HaveKeyWithValue("state", "registered"))
		Expect(reg["server_name"]).To(MatchRegexp(`sip:scscf\d\.ims\.test`))
		Expect(reg["restoration"]).To(HaveKeyWithValue("restoration_info", ContainElement(And(
			HaveKeyWithValue("path", MatchRegexp(`<sip:term@pcscf\d\.ims\.test;lr>`)),
			HaveKeyWithValue("contact", ContainSubstring("user0001@bac.ims.test")),
		))))

		By("re-registering on the same S-CSCF")
		res = p.register(ctx, bac, "user0001", "pass0001", 300)
		Expect(res.StatusCode).To(Equal(200))
		Expect(registrationState(l.hssHTTP(), "user0001@ims.test")["server_name"]).To(Equal(reg["server_name"]))

		By("de-registering")
		res = p.register(ctx, bac, "user0001", "pass0001", 0)
		Expect(res.StatusCode).To(Equal(200))
		Expect(registrationState(l.hssHTTP(), "user0001@ims.test")).To(HaveKeyWithValue("state", "not_registered"))
	})

	It("challenges a wrong password again, then answers 403", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		p := newRawPhone()
		ctx, cancel := context.WithTimeout(sctx, 20*time.Second)
		defer cancel()
		res := p.register(ctx, bac, "user0002", "wrong", 600)
		Expect(res.StatusCode).To(Equal(401), "a first wrong answer gets a new challenge")
		req := p.lastRegister
		res, err := p.cli.DoDigestAuth(ctx, req, res, sipgo.DigestAuth{Username: "user0002@ims.test", Password: "wrong"})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.StatusCode).To(Equal(403))
		Expect(registrationState(l.hssHTTP(), "user0002@ims.test")).To(HaveKeyWithValue("state", "not_registered"))
	})

	It("drops garbage, answers a malformed REGISTER with 400, and keeps serving", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		conn, err := net.Dial("udp", bac)
		Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		_, _ = conn.Write([]byte("\x00\xff garbage that is not SIP\r\n\r\n"))
		_, _ = conn.Write([]byte("INVITE sip:x SIP/2.0\r\nVia: broken\r\n\r\n"))
		local := conn.LocalAddr().String()
		noContact := "REGISTER sip:ims.test SIP/2.0\r\nVia: SIP/2.0/UDP " + local + ";branch=z9hG4bK-bad1\r\n" +
			"From: <sip:user0005@ims.test>;tag=1\r\nTo: <sip:user0005@ims.test>\r\nCall-ID: bad-1\r\nCSeq: 1 REGISTER\r\n" +
			"Max-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
		_, err = conn.Write([]byte(noContact))
		Expect(err).NotTo(HaveOccurred())
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := conn.Read(buf)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(buf[:n])).To(HavePrefix("SIP/2.0 400"))

		p := newRawPhone()
		ctx, cancel := context.WithTimeout(sctx, 20*time.Second)
		defer cancel()
		Expect(p.register(ctx, bac, "user0005", "pass0005", 600).StatusCode).To(Equal(200))
	})

	It("refuses an unknown user with 403", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		p := newRawPhone()
		ctx, cancel := context.WithTimeout(sctx, 20*time.Second)
		defer cancel()
		res := p.register(ctx, bac, "nobody", "x", 600)
		Expect(res.StatusCode).To(Equal(403))
	})
})
