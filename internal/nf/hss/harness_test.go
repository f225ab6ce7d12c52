package hss_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

const subscribersYAML = `
subscribers:
  - impi: alice@ims.test
    impus: [sip:alice@ims.test, tel:+15550001]
    password: alicepw
    realm: ims.test
  - impi: bob@ims.test
    impus: [sip:bob@ims.test]
    password: bobpw
    realm: ims.test
    unregistered_services: true
  - impi: carol@ims.test
    impus: [sip:carol@ims.test]
    password: carolpw
    realm: ims.test
    visited_networks: [ims.test]
  - impi: dave@ims.test
    impus: [sip:dave@ims.test]
    password: davepw
    realm: ims.test
    auth_scheme: Digest-AKAv1-MD5
generate:
  - prefix: user
    from: 1
    count: 20
    digits: 4
    domain: ims.test
    password_prefix: pass
`

// testHSS is a real HSS on loopback with Cx clients connected to it: client is scscf1, icscf the I-CSCF.
type testHSS struct {
	node    *hss.Node
	client  *cx.Client
	icscf   *cx.Client
	dir     string
	token   string
	clients map[string]*cx.Client // by Server-Name
}

// rawSCSCF is an S-CSCF peer for raw requests (Server-Name scscf1); raw.ims.test is an I-CSCF peer.
const rawSCSCF = "rawscscf.ims.test"

// testPeers are the Cx clients the test HSS accepts, all on loopback.
func testPeers() []cx.Peer {
	return []cx.Peer{
		{OriginHost: "icscf.ims.test", Address: "127.0.0.1"},
		{OriginHost: "raw.ims.test", Address: "127.0.0.1"},
		{OriginHost: "scscf1.ims.test", Address: "127.0.0.1", ServerName: "sip:scscf1.ims.test"},
		{OriginHost: "scscf2.ims.test", Address: "127.0.0.1", ServerName: "sip:scscf2.ims.test"},
		{OriginHost: "scscf3.ims.test", Address: "127.0.0.1", ServerName: "sip:scscf3.ims.test"},
		{OriginHost: rawSCSCF, Address: "127.0.0.1", ServerName: "sip:scscf1.ims.test"},
	}
}

// scscf returns a client connected as the S-CSCF whose Server-Name is name (sip:<origin-host>).
func (h *testHSS) scscf(name string) *cx.Client {
	if c, ok := h.clients[name]; ok {
		return c
	}
	c := newClient(h.node.DiameterAddr(), strings.TrimPrefix(name, "sip:"))
	h.clients[name] = c
	return c
}

func startHSS(edits ...func(*hss.Config)) *testHSS {
	dir := GinkgoT().TempDir()
	subs := filepath.Join(dir, "subscribers.yaml")
	Expect(os.WriteFile(subs, []byte(subscribersYAML), 0o644)).To(Succeed())
	cfg := hss.DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.SubscribersFile = subs
	cfg.EventsFile = filepath.Join(dir, "events.jsonl")
	cfg.CapabilitySets["default"] = cx.ServerCapabilities{Mandatory: []uint32{1}, Optional: []uint32{2},
		ServerNames: []string{"sip:scscf1.ims.test", "sip:scscf2.ims.test"}}
	cfg.Peers = testPeers()
	cfg.APITokenFile = filepath.Join(dir, "api-token")
	for _, e := range edits {
		e(&cfg)
	}
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	logger := slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rec, err := obs.OpenRecorder(cfg.EventsFile, "hss")
	Expect(err).NotTo(HaveOccurred())
	node, err := hss.New(cfg, hss.WithListeners(dl, hl), hss.WithLogger(logger), hss.WithEvents(rec))
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done, 5*time.Second).Should(Receive(BeNil()))
		rec.Close()
	})
	// 30 s: importing a large lab population (12,000 subscribers) takes seconds under the race detector.
	Eventually(node.Ready(), 30*time.Second).Should(BeClosed())

	token, err := os.ReadFile(cfg.APITokenFile)
	Expect(err).NotTo(HaveOccurred())
	h := &testHSS{node: node, dir: dir, token: strings.TrimSpace(string(token)), clients: map[string]*cx.Client{}}
	h.client = h.scscf("sip:scscf1.ims.test")
	h.icscf = newClient(node.DiameterAddr(), "icscf.ims.test")
	return h
}

func newClient(addr, host string) *cx.Client {
	client, err := cx.NewClient(cx.ClientConfig{Addr: addr, OriginHost: host, OriginRealm: "ims.test",
		DestinationRealm: "ims.test", RequestTimeout: 3 * time.Second},
		cx.WithClientLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- client.Run(ctx) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done, 5*time.Second).Should(Receive(BeNil()))
	})
	Eventually(client.Connected(), 5*time.Second).Should(BeClosed())
	return client
}

func (h *testHSS) api(path string) map[string]any {
	req, err := http.NewRequest(http.MethodGet, "http://"+h.node.HTTPAddr()+path, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	var out map[string]any
	Expect(json.Unmarshal(body, &out)).To(Succeed())
	return out
}

func (h *testHSS) registration(impi string) map[string]any {
	return h.api("/api/v1/subscribers/" + impi + "/registration")
}

func ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	DeferCleanup(cancel)
	return c
}

func restorationFor(impi, pcscf string) *cx.SCSCFRestorationInfo {
	return &cx.SCSCFRestorationInfo{
		UserName: impi,
		Registrations: []cx.RestorationInfo{{
			Path:        fmt.Sprintf("<sip:term@%s;lr>", pcscf),
			Contact:     "<sip:ue-" + impi + "@bac.ims.test;ue=42>;expires=600",
			InitialCSeq: 1,
			CallID:      "reg-" + impi,
		}},
		RegistrationTimeOut: time.Now().Add(10 * time.Minute).Truncate(time.Second),
		AuthScheme:          cx.SchemeSIPDigest,
	}
}

func impuOf(impi string) string { return "sip:" + impi }

// mar sends a SIP Digest MAR from the client's S-CSCF.
func mar(c *cx.Client, impi, scscf string) (*cx.MAA, error) {
	return c.MultimediaAuth(ctx(), &cx.MAR{UserName: impi, PublicIdentity: impuOf(impi), ServerName: scscf,
		NumberAuthItems: 1, AuthItem: cx.AuthItem{Scheme: cx.SchemeSIPDigest}})
}

func sar(c *cx.Client, impi, scscf string, sat cx.ServerAssignmentType, rest *cx.SCSCFRestorationInfo) (*cx.SAA, error) {
	return c.ServerAssignment(ctx(), &cx.SAR{UserName: impi, PublicIdentities: []string{impuOf(impi)}, ServerName: scscf,
		AssignmentType: sat, Restoration: rest})
}

// register runs the S-CSCF side of a registration: MAR then SAR REGISTRATION with restoration info.
func register(c *cx.Client, impi, scscf, pcscf string) {
	_, err := mar(c, impi, scscf)
	Expect(err).NotTo(HaveOccurred())
	_, err = sar(c, impi, scscf, cx.SATRegistration, restorationFor(impi, pcscf))
	Expect(err).NotTo(HaveOccurred())
}

// rawPeer speaks Diameter over a bare TCP connection, for requests the typed client cannot produce.
type rawPeer struct {
	conn net.Conn
}

func dialRaw(addr string) *rawPeer { return dialRawAs(addr, "raw.ims.test") }

// dialRawAs connects and completes a CER as host.
func dialRawAs(addr, host string) *rawPeer {
	p := connectRaw(addr)
	cea := p.roundTrip(cerFrom(host))
	Expect(resultCode(cea)).To(Equal(uint32(2001)))
	return p
}

// connectRaw opens a TCP connection and sends nothing.
func connectRaw(addr string) *rawPeer {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(conn.Close)
	return &rawPeer{conn: conn}
}

func cerFrom(host string) *diam.Message {
	cer := diam.NewRequest(diam.CapabilitiesExchange, 0, cx.Dict())
	cer.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(host))
	cer.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
	cer.NewAVP(avp.HostIPAddress, avp.Mbit, 0, datatype.Address(net.ParseIP("127.0.0.1")))
	cer.NewAVP(avp.VendorID, avp.Mbit, 0, datatype.Unsigned32(10415))
	cer.NewAVP(avp.ProductName, 0, 0, datatype.UTF8String("raw"))
	cer.NewAVP(avp.VendorSpecificApplicationID, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
		diam.NewAVP(avp.VendorID, avp.Mbit, 0, datatype.Unsigned32(10415)),
		diam.NewAVP(avp.AuthApplicationID, avp.Mbit, 0, datatype.Unsigned32(cx.AppID)),
	}})
	return cer
}

func (p *rawPeer) send(b []byte) {
	_, err := p.conn.Write(b)
	Expect(err).NotTo(HaveOccurred())
}

// rawAnswer is an answer read without the dictionary, so answers to unknown commands can be checked too.
type rawAnswer struct {
	Header *diam.Header
	AVP    []rawAVP
}

type rawAVP struct {
	Code, Vendor uint32
	Data         []byte
}

func parseAVPs(b []byte) []rawAVP {
	var out []rawAVP
	for len(b) >= 8 {
		code := binary.BigEndian.Uint32(b[0:4])
		l := int(uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]))
		Expect(l).To(BeNumerically(">=", 8))
		Expect(l).To(BeNumerically("<=", len(b)))
		a := rawAVP{Code: code}
		if b[4]&0x80 != 0 {
			a.Vendor = binary.BigEndian.Uint32(b[8:12])
			a.Data = b[12:l]
		} else {
			a.Data = b[8:l]
		}
		out = append(out, a)
		b = b[min((l+3)&^3, len(b)):]
	}
	return out
}

func (p *rawPeer) recv() (*rawAnswer, error) {
	_ = p.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	hdr := make([]byte, 20)
	if _, err := io.ReadFull(p.conn, hdr); err != nil {
		return nil, err
	}
	h, err := diam.DecodeHeader(hdr)
	if err != nil {
		return nil, err
	}
	body := make([]byte, int(h.MessageLength)-20)
	if _, err := io.ReadFull(p.conn, body); err != nil {
		return nil, err
	}
	return &rawAnswer{Header: h, AVP: parseAVPs(body)}, nil
}

func (p *rawPeer) roundTrip(m *diam.Message) *rawAnswer {
	b, err := m.Serialize()
	Expect(err).NotTo(HaveOccurred())
	p.send(b)
	ans, err := p.recv()
	Expect(err).NotTo(HaveOccurred())
	Expect(ans.Header.HopByHopID).To(Equal(m.Header.HopByHopID))
	return ans
}

func resultCode(m *rawAnswer) uint32 {
	for _, a := range m.AVP {
		if a.Code == avp.ResultCode {
			return binary.BigEndian.Uint32(a.Data)
		}
	}
	return 0
}

func failedAVPCodes(m *rawAnswer) []uint32 {
	var out []uint32
	for _, a := range m.AVP {
		if a.Code == avp.FailedAVP {
			for _, in := range parseAVPs(a.Data) {
				out = append(out, in.Code)
			}
		}
	}
	return out
}

// cxRequest builds a Cx request from raw.ims.test with the envelope AVPs; extra AVPs follow.
func cxRequest(code uint32, extra ...*diam.AVP) *diam.Message {
	return cxRequestAs("raw.ims.test", code, extra...)
}

// cxRequestAs builds a Cx request whose Origin-Host is host.
func cxRequestAs(host string, code uint32, extra ...*diam.AVP) *diam.Message {
	m := diam.NewRequest(code, cx.AppID, cx.Dict())
	m.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String(fmt.Sprintf("raw.ims.test;%d", time.Now().UnixNano())))
	m.NewAVP(avp.VendorSpecificApplicationID, avp.Mbit, 0, &diam.GroupedAVP{AVP: []*diam.AVP{
		diam.NewAVP(avp.VendorID, avp.Mbit, 0, datatype.Unsigned32(10415)),
		diam.NewAVP(avp.AuthApplicationID, avp.Mbit, 0, datatype.Unsigned32(cx.AppID)),
	}})
	m.NewAVP(avp.AuthSessionState, avp.Mbit, 0, datatype.Enumerated(1))
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(host))
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
	m.NewAVP(avp.DestinationRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
	for _, a := range extra {
		m.AddAVP(a)
	}
	return m
}

func cxAVP(code uint32, d datatype.Type) *diam.AVP {
	return diam.NewAVP(code, avp.Mbit|avp.Vbit, 10415, d)
}
