package interop_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/imslab/quasipool/internal/harness/testutil"
)

// silence is how long the run leaves Cx idle before the re-registration: more than RFC 6733's watchdog interval
// Tw (30 s) with cdp's jitter, so each side's watchdog fires once, and more than the 30 s after which an HSS
// without a watchdog used to close a quiet connection (issue 34).
const silence = 42 * time.Second

// Ports of the run, offsets in a block of free ports.
const (
	portDiameter = iota
	portHTTP
	portICSCF
	portSCSCF
	portICSCFCdp
	portSCSCFCdp
	portPhoneA // user0001's Contact and the caller's port
	portRegA   // user0001's REGISTERs
	portPhoneB // user0002's Contact and the callee's port
	portRegB   // user0002's REGISTERs
	portProbe  // UDP datagrams that show the capture is running
	nPorts
)

const (
	loopback   = "127.0.0.1"
	domain     = "ims.test"
	hssHost    = "hss.ims.test"
	icscfHost  = "icscf.ims.test"
	scscfHost  = "scscf.ims.test"
	askDigest  = ", algorithm=3GPP-Digest" // the first REGISTER's Authorization asks the S-CSCF for "SIP Digest"
	letHSSPick = ""                        // no algorithm: the S-CSCF's default, HSS-Selected ("unknown")
)

var _ = Describe("Kamailio's IMS CSCFs on our HSS", Label("e2e"), Ordered, ContinueOnFailure, func() {
	var (
		dir, sippBin string
		base         int
		capt         *capture
		hssEvents    string
		silenceFrom  time.Time
		silenceTo    time.Time
	)
	port := func(i int) int { return base + i }
	addr := func(i int) string { return net.JoinHostPort(loopback, strconv.Itoa(port(i))) }

	// sipp runs one scenario of sipp/ to completion and fails the spec unless it exits 0. fields is its one
	// injection line; user, when set, authenticates as user@ims.test with the lab password.
	sipp := func(name, remote, fields, user string, localPort int) *gexec.Session {
		GinkgoHelper()
		xml, err := filepath.Abs(filepath.Join("sipp", name))
		Expect(err).NotTo(HaveOccurred())
		work := filepath.Join(dir, fmt.Sprintf("sipp-%s-%d-%d", strings.TrimSuffix(name, ".xml"), localPort, time.Now().UnixNano()))
		Expect(os.MkdirAll(work, 0o755)).To(Succeed())
		args := []string{"-sf", xml, "-m", "1", "-i", loopback, "-p", strconv.Itoa(localPort), "-timeout", "15s",
			"-timeout_error", "-trace_err", "-trace_msg", "-nostdin"}
		if remote != "" {
			args = append([]string{remote}, args...)
		}
		if fields != "" {
			csv := filepath.Join(work, "fields.csv")
			Expect(os.WriteFile(csv, []byte("SEQUENTIAL\n"+fields+"\n"), 0o644)).To(Succeed())
			args = append(args, "-inf", csv)
		}
		if user != "" {
			args = append(args, "-au", user+"@"+domain, "-ap", "pass"+user[len(user)-4:], "-auth_uri", domain)
		}
		cmd := exec.Command(sippBin, args...)
		cmd.Dir = work
		s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			s.Kill()
			if CurrentSpecReport().Failed() {
				logs, _ := filepath.Glob(filepath.Join(work, "*_errors.log"))
				for _, f := range logs {
					b, _ := os.ReadFile(f)
					GinkgoWriter.Printf("---- %s ----\n%s\n", f, b)
				}
			}
		})
		return s
	}
	register := func(user string, contactPort, fromPort int, algorithm string, expires int) {
		GinkgoHelper()
		s := sipp("register.xml", addr(portICSCF),
			fmt.Sprintf("%s;pass%s;%d;%s;%d", user, user[len(user)-4:], contactPort, algorithm, expires), user, fromPort)
		Eventually(s, 20*time.Second).Should(gexec.Exit(0), "REGISTER of %s (Expires %d) through the I-CSCF", user, expires)
	}

	BeforeAll(func(ctx SpecContext) {
		var err error
		sippBin, err = exec.LookPath("sipp")
		if err != nil {
			err = fmt.Errorf("sipp not installed (apt-get install sip-tester)")
		}
		require(err, "IMSLAB_REQUIRE_SIPP")
		require(checkTshark(), "IMSLAB_REQUIRE_TSHARK")
		kamailio, err := checkKamailio()
		require(err, "IMSLAB_REQUIRE_KAMAILIO")
		Expect(hssBin).NotTo(BeEmpty())

		dir = GinkgoT().TempDir()
		base, err = testutil.FreeBlock(nPorts)
		Expect(err).NotTo(HaveOccurred())
		capt = startCapture(filepath.Join(dir, "cx.pcapng"), port(portDiameter), port(portProbe))

		// Our HSS, the real process, with the two Kamailio CSCFs as its only Cx peers.
		scscfName := "sip:" + addr(portSCSCF)
		hssEvents = filepath.Join(dir, "hss-events.jsonl")
		cfg := fmt.Sprintf(`origin_host: %s
origin_realm: %s
diameter_listen: %s
http_listen: %s
data_dir: %s
lab_subscribers: true
lab_subscriber_count: 10
events_file: %s
peers:
  - {origin_host: %s, address: %s}
  - {origin_host: %s, address: %s, server_name: %q}
`, hssHost, domain, addr(portDiameter), addr(portHTTP), filepath.Join(dir, "hss-data"), hssEvents,
			icscfHost, loopback, scscfHost, loopback, scscfName)
		hssCfg := filepath.Join(dir, "hss.yaml")
		Expect(os.WriteFile(hssCfg, []byte(cfg), 0o644)).To(Succeed())
		hssLog, err := os.Create(filepath.Join(dir, "hss.log"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(hssLog.Close)
		hss, err := gexec.Start(exec.Command(hssBin, "--config", hssCfg), hssLog, hssLog)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { hss.Terminate().Wait(10 * time.Second) })
		Eventually(hss.Err, 20*time.Second).Should(gbytes.Say("hss ready"))

		// cdp connects to the HSS by name: "localhost" resolves everywhere without touching /etc/hosts; the HSS
		// keeps its own Origin-Host, which cdp does not check against the peer's name.
		common := cscf{Debug: 2, IP: loopback, Domain: domain, Realm: domain, HSSHost: "localhost", HSSPort: port(portDiameter)}
		s := common
		s.Name, s.SIPPort, s.OriginHost, s.AcceptorPort = "scscf", port(portSCSCF), scscfHost, port(portSCSCFCdp)
		s.ServerName, s.Algorithm, s.ICSCF = scscfName, "HSS-Selected", addr(portICSCF)
		i := common
		i.Name, i.SIPPort, i.OriginHost, i.AcceptorPort = "icscf", port(portICSCF), icscfHost, port(portICSCFCdp)
		i.SCSCFName, i.SCSCFURI = "scscf1", scscfName
		startKamailio(kamailio, s.render(dir), filepath.Join(dir, "scscf.log"))
		startKamailio(kamailio, i.render(dir), filepath.Join(dir, "icscf.log"))

		// Ready when both CSCFs' capability exchanges are answered.
		Eventually(func() ([]string, error) {
			msgs, err := capt.decode()
			var ceas []string
			for _, m := range msgs {
				if m.Cmd == cmdCE && !m.Request && m.Result == 2001 {
					ceas = append(ceas, m.String())
				}
			}
			return ceas, err
		}, 30*time.Second, 500*time.Millisecond).Should(HaveLen(2), "CEA 2001 to the I-CSCF and the S-CSCF (logs in %s)", dir)
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				for _, f := range []string{"hss.log", "scscf.log", "icscf.log"} {
					b, _ := os.ReadFile(filepath.Join(dir, f))
					if len(b) > 20000 {
						b = b[len(b)-20000:]
					}
					GinkgoWriter.Printf("---- %s (end) ----\n%s\n", f, b)
				}
			}
		})
	}, NodeTimeout(3*time.Minute))

	It("registers user0001 through the S-CSCF letting the HSS choose the scheme", SpecTimeout(30*time.Second), func(_ SpecContext) {
		register("user0001", port(portPhoneA), port(portRegA), letHSSPick, 600)
	})

	It("registers user0002 asking for SIP Digest", SpecTimeout(30*time.Second), func(_ SpecContext) {
		register("user0002", port(portPhoneB), port(portRegB), askDigest, 600)
	})

	It("connects user0001's call to user0002 through the S-CSCF, with an LIR at the I-CSCF", SpecTimeout(45*time.Second), func(_ SpecContext) {
		callee := sipp("callee.xml", "", "", "", port(portPhoneB))
		caller := sipp("caller.xml", addr(portSCSCF), "user0001;user0002", "", port(portPhoneA))
		Eventually(caller, 30*time.Second).Should(gexec.Exit(0), "caller: INVITE, 180, 200, ACK, BYE, 200")
		Eventually(callee, 10*time.Second).Should(gexec.Exit(0), "callee: INVITE, 180, 200, ACK, BYE, 200")
	})

	It("re-registers user0001 after 42 s without Cx traffic", SpecTimeout(silence+30*time.Second), func(_ SpecContext) {
		silenceFrom = time.Now()
		time.Sleep(silence) // the idle period is what this spec is about: nothing to wait for
		silenceTo = time.Now()
		register("user0001", port(portPhoneA), port(portRegA), letHSSPick, 600)
		AddReportEntry("re-registration after the silence", time.Since(silenceTo).Round(time.Millisecond).String())
	})

	It("de-registers both users", SpecTimeout(45*time.Second), func(_ SpecContext) {
		register("user0001", port(portPhoneA), port(portRegA), letHSSPick, 0)
		register("user0002", port(portPhoneB), port(portRegB), askDigest, 0)
	})

	It("shows the whole exchange in the capture: one connection per CSCF, every request answered with success, the watchdog during the silence", SpecTimeout(30*time.Second), func(_ SpecContext) {
		time.Sleep(300 * time.Millisecond) // the last answers' segments reach the capture buffer
		capt.stop()
		msgs, err := capt.decode()
		Expect(err).NotTo(HaveOccurred())
		lines := make([]string, len(msgs))
		for i, m := range msgs {
			lines[i] = m.String()
		}
		GinkgoWriter.Printf("Cx exchange (%d messages):\n%s\n", len(msgs), strings.Join(lines, "\n"))
		Expect(silenceFrom.IsZero()).To(BeFalse(), "the silence did not run")
		AddReportEntry("DWRs during the silence", strings.Join(dwrs(msgs, silenceFrom, silenceTo), "\n"))
		problems := checkCx(msgs, cxExpectations{
			sarTypes:     []int{1, 1, 2, 5, 5}, // REGISTRATION ×2, RE_REGISTRATION, USER_DEREGISTRATION ×2
			schemesSeen:  []string{"unknown", "SIP Digest"},
			schemesNever: []string{"Digest-MD5"},
			silenceFrom:  silenceFrom, silence: silenceTo,
		})
		for _, r := range refusals(hssEvents) {
			problems = append(problems, "the HSS refused: "+r)
		}
		Expect(problems).To(BeEmpty(), "Cx exchange:\n%s", strings.Join(lines, "\n"))
	})
})

// refusals returns the HSS's cx_refused events.
func refusals(events string) []string {
	GinkgoHelper()
	f, err := os.Open(events)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Kind string `json:"kind"`
		}
		Expect(json.Unmarshal(sc.Bytes(), &e)).To(Succeed(), "event line %q", sc.Text())
		if e.Kind == "cx_refused" {
			out = append(out, sc.Text())
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}
