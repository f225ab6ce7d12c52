package hss_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/hss"
	"github.com/imslab/quasipool/internal/nf/hss/store"
	"github.com/imslab/quasipool/internal/proto/cx"
)

// events returns the HSS's events of one kind.
func (h *testHSS) events(kind string) []map[string]any {
	f, err := os.Open(filepath.Join(h.dir, "events.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil && e["kind"] == kind {
			out = append(out, e)
		}
	}
	return out
}

// closedByPeer waits for the HSS to close the connection (EOF or reset, not our read deadline).
func (p *rawPeer) closedByPeer() error {
	_ = p.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := io.ReadAll(p.conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return nil
}

func sarRaw(host, impi, server string, sat cx.ServerAssignmentType) *diam.Message {
	return cxRequestAs(host, cx.CmdSA,
		diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String(impi)),
		cxAVP(601, datatype.UTF8String("sip:"+impi)),
		cxAVP(602, datatype.UTF8String(server)),
		cxAVP(614, datatype.Enumerated(sat)),
		cxAVP(624, datatype.Enumerated(0)))
}

// Each spec is an attack that worked before the HSS knew its peers.
var _ = Describe("HSS Cx peers", Label("integration"), func() {
	It("answers a CER from an unknown Origin-Host with 3010, closes the connection and records the refusal", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS()
		p := connectRaw(h.node.DiameterAddr())
		cea := p.roundTrip(cerFrom("evil.ims.test"))
		Expect(resultCode(cea)).To(Equal(uint32(3010)))
		Expect(cea.Header.CommandFlags & diam.ErrorFlag).NotTo(BeZero())
		var codes []uint32
		for _, a := range cea.AVP {
			codes = append(codes, a.Code)
		}
		Expect(codes).To(ContainElements(uint32(avp.OriginHost), uint32(avp.OriginRealm), uint32(avp.HostIPAddress),
			uint32(avp.VendorID), uint32(avp.ProductName)), "RFC 6733 §5.3.2: the AVPs every CEA carries")
		Expect(p.closedByPeer()).To(Succeed())
		Eventually(func() []map[string]any { return h.events("cx_refused") }).Should(ContainElement(And(
			HaveKeyWithValue("peer", "evil.ims.test"), HaveKeyWithValue("reason", cx.RefusedUnknownPeer),
			HaveKeyWithValue("remote", ContainSubstring("127.0.0.1:")))))
	})

	It("answers a CER with a known Origin-Host from another address with 3010", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 2 * time.Second}
		conn, err := d.Dial("tcp", h.node.DiameterAddr())
		if err != nil {
			Skip("cannot connect from 127.0.0.2: " + err.Error())
		}
		DeferCleanup(conn.Close)
		p := &rawPeer{conn: conn}
		Expect(resultCode(p.roundTrip(cerFrom("scscf1.ims.test")))).To(Equal(uint32(3010)))
		Expect(p.closedByPeer()).To(Succeed())
		Eventually(func() []map[string]any { return h.events("cx_refused") }).Should(ContainElement(
			HaveKeyWithValue("reason", cx.RefusedWrongAddress)))
	})

	It("refuses a request whose Origin-Host differs from the CER's and leaves the user alone", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS()
		register(h.client, "user0004@ims.test", scscf1, "pcscf1.ims.test")
		p := dialRaw(h.node.DiameterAddr()) // an I-CSCF peer
		ans := p.roundTrip(sarRaw("scscf2.ims.test", "user0004@ims.test", scscf2, cx.SATUnregisteredUser))
		Expect(resultCode(ans)).To(Equal(uint32(3010)))
		Expect(h.registration("user0004@ims.test")).To(And(HaveKeyWithValue("state", "registered"),
			HaveKeyWithValue("server_name", scscf1)))
	})

	DescribeTable("refuses an S-CSCF's SAR naming another S-CSCF with 5003 and keeps the stored one",
		func(_ SpecContext, sat cx.ServerAssignmentType) {
			h := startHSS()
			register(h.client, "user0005@ims.test", scscf1, "pcscf1.ims.test")
			_, err := sar(h.scscf(scscf2), "user0005@ims.test", "sip:scscf3.ims.test", sat, nil)
			res, ok := cx.ResultOf(err)
			Expect(ok).To(BeTrue(), "%v", err)
			Expect(res).To(Equal(cx.AuthorizationRejected))
			Expect(h.registration("user0005@ims.test")).To(And(HaveKeyWithValue("state", "registered"),
				HaveKeyWithValue("server_name", scscf1)))
		},
		Entry("REGISTRATION", cx.SATRegistration, SpecTimeout(15*time.Second)),
		Entry("UNREGISTERED_USER", cx.SATUnregisteredUser, SpecTimeout(15*time.Second)),
	)

	It("refuses a MAR from an S-CSCF naming another S-CSCF", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS()
		a, err := mar(h.scscf(scscf2), "user0006@ims.test", scscf1)
		Expect(a).To(Or(BeNil(), HaveField("AuthItems", BeEmpty())))
		res, _ := cx.ResultOf(err)
		Expect(res).To(Equal(cx.AuthorizationRejected))
		Expect(h.registration("user0006@ims.test")).To(And(HaveKeyWithValue("auth_pending", ""), HaveKeyWithValue("server_name", "")))
	})

	It("refuses a MAR from the I-CSCF: no HA1 in the answer", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS()
		a, err := mar(h.icscf, "user0007@ims.test", scscf1)
		Expect(a).To(Or(BeNil(), HaveField("AuthItems", BeEmpty())))
		res, ok := cx.ResultOf(err)
		Expect(ok).To(BeTrue(), "%v", err)
		Expect(res).To(Equal(cx.AuthorizationRejected))
		// The same on the wire: no SIP-Auth-Data-Item (612) at all.
		p := dialRaw(h.node.DiameterAddr())
		ans := p.roundTrip(cxRequest(cx.CmdMA,
			diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String("user0007@ims.test")),
			cxAVP(601, datatype.UTF8String("sip:user0007@ims.test")),
			cxAVP(607, datatype.Unsigned32(1)),
			cxAVP(612, &diam.GroupedAVP{AVP: []*diam.AVP{cxAVP(608, datatype.UTF8String(cx.SchemeSIPDigest))}}),
			cxAVP(602, datatype.UTF8String(scscf1))))
		Expect(resultCode(ans)).To(Equal(uint32(5003)))
		for _, a := range ans.AVP {
			Expect(a.Code).NotTo(Equal(uint32(612)))
		}
		Eventually(func() []map[string]any { return h.events("cx_refused") }).Should(ContainElement(And(
			HaveKeyWithValue("reason", cx.RefusedCommandNotAllowed), HaveKeyWithValue("cmd", "MAR"))))
	})

	It("refuses UAR and LIR from an S-CSCF", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS()
		_, err := h.client.LocationInfo(ctx(), &cx.LIR{PublicIdentity: "sip:bob@ims.test"})
		res, _ := cx.ResultOf(err)
		Expect(res).To(Equal(cx.AuthorizationRejected))
	})

	It("closes a connection that sends no CER in time", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS(func(c *hss.Config) { c.CERTimeout = 300 * time.Millisecond })
		p := connectRaw(h.node.DiameterAddr())
		Expect(p.closedByPeer()).To(Succeed())
		Eventually(func() []map[string]any { return h.events("cx_refused") }).Should(ContainElement(
			HaveKeyWithValue("reason", cx.RefusedCERTimeout)))
	})

	It("closes connections beyond the cap at accept and keeps serving the others", SpecTimeout(15*time.Second), func(_ SpecContext) {
		h := startHSS(func(c *hss.Config) { c.MaxConnections = 3 })
		_ = dialRaw(h.node.DiameterAddr()) // scscf1, icscf and this one: the cap
		extra := connectRaw(h.node.DiameterAddr())
		Expect(extra.closedByPeer()).To(Succeed())
		Eventually(func() []map[string]any { return h.events("cx_refused") }).Should(ContainElement(
			HaveKeyWithValue("reason", cx.RefusedConnectionCap)))
		_, err := h.icscf.LocationInfo(ctx(), &cx.LIR{PublicIdentity: "sip:bob@ims.test"})
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses to start without peers unless allow_any_peer is set", func() {
		cfg := hss.DefaultConfig()
		_, err := hss.New(cfg)
		Expect(err).To(MatchError(ContainSubstring("peers")))
		cfg.AllowAnyPeer = true
		_, err = hss.New(cfg)
		Expect(err).NotTo(HaveOccurred())
	})
})

var _ = Describe("HSS HTTP API protection", Label("integration"), func() {
	var h *testHSS
	BeforeEach(func() { h = startHSS() })

	call := func(method, path, host, token, ctype, body string) (int, string) {
		GinkgoHelper()
		req, err := http.NewRequest(method, "http://"+h.node.HTTPAddr()+path, strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		if host != "" {
			req.Host = host
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const eve = `{"impi":"eve@ims.test","impus":["sip:eve@ims.test"],"realm":"ims.test","password":"x"}`
	eveExists := func() bool {
		st, _ := call("GET", "/api/v1/subscribers/eve@ims.test", "", h.token, "", "")
		return st == http.StatusOK
	}

	It("writes a random token file readable by the owner only", SpecTimeout(10*time.Second), func(_ SpecContext) {
		st, err := os.Stat(filepath.Join(h.dir, "api-token"))
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		Expect(h.token).To(HaveLen(64))
	})
	It("answers 401 without a token or with a wrong one", SpecTimeout(10*time.Second), func(_ SpecContext) {
		st, _ := call("GET", "/api/v1/subscribers", "", "", "", "")
		Expect(st).To(Equal(http.StatusUnauthorized))
		st, _ = call("GET", "/api/v1/subscribers", "", "not-the-token", "", "")
		Expect(st).To(Equal(http.StatusUnauthorized))
		st, _ = call("POST", "/api/v1/subscribers", "", "", "application/json", eve)
		Expect(st).To(Equal(http.StatusUnauthorized))
		Expect(eveExists()).To(BeFalse())
	})
	It("answers 415 to a text/plain POST (a web page's simple request) and creates nothing", SpecTimeout(10*time.Second), func(_ SpecContext) {
		st, _ := call("POST", "/api/v1/subscribers", "", h.token, "text/plain", eve)
		Expect(st).To(Equal(http.StatusUnsupportedMediaType))
		Expect(eveExists()).To(BeFalse())
	})
	It("refuses a Host it does not serve (DNS rebinding), even with the token, and for /metrics", SpecTimeout(10*time.Second), func(_ SpecContext) {
		st, _ := call("GET", "/api/v1/subscribers", "attacker.example:8090", h.token, "", "")
		Expect(st).To(Equal(http.StatusMisdirectedRequest))
		st, _ = call("POST", "/api/v1/subscribers", "attacker.example", h.token, "application/json", eve)
		Expect(st).To(Equal(http.StatusMisdirectedRequest))
		Expect(eveExists()).To(BeFalse())
		st, _ = call("GET", "/metrics", "attacker.example", "", "", "")
		Expect(st).To(Equal(http.StatusMisdirectedRequest))
	})
	It("serves a valid token with JSON, under the HSS's names, and /metrics without a token", SpecTimeout(10*time.Second), func(_ SpecContext) {
		st, body := call("POST", "/api/v1/subscribers", "", h.token, "application/json; charset=utf-8", eve)
		Expect(st).To(Equal(http.StatusCreated), body)
		Expect(eveExists()).To(BeTrue())
		for _, host := range []string{"hss.ims.test", "hss.ims.test:8090", "localhost:8090", "127.0.0.1"} {
			st, _ = call("GET", "/api/v1/subscribers?limit=1", host, h.token, "", "")
			Expect(st).To(Equal(http.StatusOK), host)
		}
		st, body = call("GET", "/metrics", "", "", "", "")
		Expect(st).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("go_gc_duration_seconds"))
	})
})

var _ = Describe("MAR", Label("unit"), func() {
	It("writes nothing when the S-CSCF is already the pending one", func() {
		db, err := store.Open(GinkgoT().TempDir(), store.Options{NoSync: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(db.Close)
		_, _, err = db.Import(context.Background(), store.Generate("user", 1, 1, 4, "ims.test", "pass"))
		Expect(err).NotTo(HaveOccurred())
		p := hss.NewProcedures(db, map[string]cx.ServerCapabilities{"default": {}})
		q := &cx.MAR{Envelope: cx.Envelope{OriginHost: "scscf1.ims.test"}, UserName: "user0001@ims.test",
			PublicIdentity: "sip:user0001@ims.test", ServerName: scscf1, NumberAuthItems: 1,
			AuthItem: cx.AuthItem{Scheme: cx.SchemeSIPDigest}}
		_, err = p.MultimediaAuth(context.Background(), q)
		Expect(err).NotTo(HaveOccurred())
		before := db.Stats()
		for range 3 {
			a, err := p.MultimediaAuth(context.Background(), q)
			Expect(err).NotTo(HaveOccurred())
			Expect(a.AuthItems).To(HaveLen(1))
		}
		Expect(db.Stats()).To(Equal(before), "no commit for a MAR that changes nothing")
		q2 := *q
		q2.ServerName, q2.OriginHost = scscf2, "scscf2.ims.test"
		_, err = p.MultimediaAuth(context.Background(), &q2)
		Expect(err).NotTo(HaveOccurred())
		Expect(db.Stats().Commits).To(Equal(before.Commits+1), "another S-CSCF is written")
		reg, err := db.GetRegistration("user0001@ims.test")
		Expect(err).NotTo(HaveOccurred())
		Expect(reg.AuthPending).To(Equal(scscf2))
	})
})
