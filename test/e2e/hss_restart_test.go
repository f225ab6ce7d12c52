package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/imslab/quasipool/internal/proto/cx"
)

// freePort returns a loopback address with a port that was free a moment ago.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

type hssProc struct {
	session          *gexec.Session
	diameter, httpAt string
	dataDir          string
}

// hssTokens maps an HSS's HTTP address to its API token file.
var hssTokens sync.Map

// hssPeerConfig admits the test's clients on loopback: an I-CSCF and two S-CSCFs.
const hssPeerConfig = `peers:
  - {origin_host: icscf.ims.test, address: 127.0.0.1}
  - {origin_host: scscf1.ims.test, address: 127.0.0.1, server_name: "sip:scscf1.ims.test"}
  - {origin_host: scscf2.ims.test, address: 127.0.0.1, server_name: "sip:scscf2.ims.test"}
`

// cxClient connects a Cx client as host; it is stopped when the spec ends.
func cxClient(addr, host string) *cx.Client {
	client, err := cx.NewClient(cx.ClientConfig{Addr: addr, OriginHost: host, OriginRealm: "ims.test",
		DestinationRealm: "ims.test", ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond,
		WatchdogInterval: time.Second}, cx.WithClientLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
	Expect(err).NotTo(HaveOccurred())
	cctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go func() { _ = client.Run(cctx) }()
	Eventually(client.Connected(), 10*time.Second).Should(BeClosed())
	return client
}

func startHSSProc(dataDir, diameter, httpAt string) *hssProc {
	conf := filepath.Join(filepath.Dir(dataDir), "hss-peers.yaml")
	Expect(os.WriteFile(conf, []byte(hssPeerConfig), 0o644)).To(Succeed())
	hssTokens.Store(httpAt, filepath.Join(dataDir, "api-token"))
	cmd := exec.Command(hssBin, "--config", conf, "--data-dir", dataDir, "--diameter-listen", diameter, "--http-listen", httpAt,
		"--lab-subscribers")
	s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	Eventually(s.Err, 20*time.Second).Should(gbytes.Say("hss ready"))
	DeferCleanup(func() { s.Kill().Wait(5 * time.Second) })
	return &hssProc{session: s, diameter: diameter, httpAt: httpAt, dataDir: dataDir}
}

// registrationOf reads a registration from the HSS's API with its token.
func registrationOf(httpAt, impi string) map[string]any {
	GinkgoHelper()
	tokenFile, ok := hssTokens.Load(httpAt)
	Expect(ok).To(BeTrue(), "no HSS started at %s", httpAt)
	token, err := os.ReadFile(tokenFile.(string))
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/api/v1/subscribers/%s/registration", httpAt, impi), nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	Expect(resp.StatusCode).To(Equal(200), string(b))
	var out map[string]any
	Expect(json.Unmarshal(b, &out)).To(Succeed())
	return out
}

var _ = Describe("HSS process", Label("e2e"), func() {
	It("keeps every acknowledged registration across SIGKILL and restart, and the client reconnects", SpecTimeout(90*time.Second), func(sctx SpecContext) {
		dataDir := filepath.Join(GinkgoT().TempDir(), "hss")
		diameter, httpAt := freePort(), freePort()
		p := startHSSProc(dataDir, diameter, httpAt)

		client := cxClient(diameter, "scscf1.ims.test")

		// Register 200 users; every SAA received is an acknowledged write.
		const n = 200
		for i := 1; i <= n; i++ {
			impi := fmt.Sprintf("user%04d@ims.test", i)
			_, err := client.MultimediaAuth(sctx, &cx.MAR{UserName: impi, PublicIdentity: "sip:" + impi,
				ServerName: "sip:scscf1.ims.test", NumberAuthItems: 1, AuthItem: cx.AuthItem{Scheme: cx.SchemeSIPDigest}})
			Expect(err).NotTo(HaveOccurred())
			_, err = client.ServerAssignment(sctx, &cx.SAR{UserName: impi, PublicIdentities: []string{"sip:" + impi},
				ServerName: "sip:scscf1.ims.test", AssignmentType: cx.SATRegistration,
				Restoration: &cx.SCSCFRestorationInfo{UserName: impi, AuthScheme: cx.SchemeSIPDigest,
					RegistrationTimeOut: time.Now().Add(time.Hour),
					Registrations: []cx.RestorationInfo{{Path: "<sip:term@pcscf2.ims.test;lr>",
						Contact: fmt.Sprintf("<sip:%d@bac.ims.test>", i), CallID: fmt.Sprintf("call-%d", i), InitialCSeq: 1}}}})
			Expect(err).NotTo(HaveOccurred())
		}

		Expect(p.session.Command.Process.Signal(syscall.SIGKILL)).To(Succeed())
		Eventually(p.session, 10*time.Second).Should(gexec.Exit())

		startHSSProc(dataDir, diameter, httpAt)
		Eventually(client.Connected(), 10*time.Second).Should(BeClosed())
		icscf := cxClient(diameter, "icscf.ims.test")

		for i := 1; i <= n; i++ {
			impi := fmt.Sprintf("user%04d@ims.test", i)
			uaa, err := icscf.UserAuthorization(sctx, &cx.UAR{UserName: impi, PublicIdentity: "sip:" + impi,
				VisitedNetworkIdentifier: "ims.test"})
			Expect(err).NotTo(HaveOccurred())
			Expect(uaa.Result).To(Equal(cx.SubsequentRegistration), impi)
			Expect(uaa.ServerName).To(Equal("sip:scscf1.ims.test"), impi)
		}
		// The reconnected scscf1 client still writes; scscf2 takes a user over.
		_, err := client.ServerAssignment(sctx, &cx.SAR{UserName: "user0001@ims.test", PublicIdentities: []string{"sip:user0001@ims.test"},
			ServerName: "sip:scscf1.ims.test", AssignmentType: cx.SATReRegistration})
		Expect(err).NotTo(HaveOccurred())
		saa, err := cxClient(diameter, "scscf2.ims.test").ServerAssignment(sctx, &cx.SAR{UserName: "user0150@ims.test", PublicIdentities: []string{"sip:user0150@ims.test"},
			ServerName: "sip:scscf2.ims.test", AssignmentType: cx.SATUnregisteredUser})
		Expect(err).NotTo(HaveOccurred())
		Expect(saa.Restoration).To(HaveLen(1))
		Expect(saa.Restoration[0].Registrations[0].Contact).To(Equal("<sip:150@bac.ims.test>"))
		reg := registrationOf(httpAt, "user0200@ims.test")
		Expect(reg).To(HaveKeyWithValue("state", "registered"))
		Expect(reg["restoration"]).To(HaveKeyWithValue("restoration_info", ContainElement(HaveKeyWithValue("call_id", "call-200"))))
	})
})
