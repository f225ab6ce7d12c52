package hss_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/imslab/quasipool/internal/proto/cx"
)

// The wire format is checked by Wireshark's own Diameter dissector: a live capture on loopback of the Cx
// exchanges of a registration and of the study's takeover queries, decoded by tshark.
var _ = Describe("Cx wire format", Label("integration"), func() {
	It("decodes in tshark with the right AVP names and values", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		if _, err := exec.LookPath("tshark"); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_TSHARK") != "" {
				Fail("tshark is required (IMSLAB_REQUIRE_TSHARK is set) but not installed")
			}
			Skip("tshark not installed (apt-get install tshark); CI installs it and requires this test")
		}
		h := startHSS()
		_, port, _ := net.SplitHostPort(h.node.DiameterAddr())
		pcap := filepath.Join(GinkgoT().TempDir(), "cx.pcap")
		capture, err := gexec.Start(exec.Command("tshark", "-i", "lo", "-f", "tcp port "+port, "-F", "pcap", "-w", pcap),
			GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { capture.Kill() })
		Eventually(capture.Err, 20*time.Second).Should(gbytes.Say("Capturing on"))
		// tshark says "Capturing on" before packets really flow into the file: probe until they do.
		probe := newClient(h.node.DiameterAddr(), "icscf.ims.test")
		Eventually(func() int64 {
			_, _ = probe.LocationInfo(sctx, &cx.LIR{PublicIdentity: "sip:probe@ims.test"})
			st, err := os.Stat(pcap)
			if err != nil {
				return 0
			}
			return st.Size()
		}, 20*time.Second, 200*time.Millisecond).Should(BeNumerically(">", 24)) // more than the pcap file header

		// A fresh connection, so the capture holds the CER/CEA too.
		c := newClient(h.node.DiameterAddr(), "scscf2.ims.test")
		register(c, "user0003@ims.test", scscf2, "pcscf3.ims.test")
		i := newClient(h.node.DiameterAddr(), "icscf.ims.test")
		_, err = i.UserAuthorization(sctx, &cx.UAR{UserName: "user0003@ims.test", PublicIdentity: "sip:user0003@ims.test",
			VisitedNetworkIdentifier: "ims.test", AuthorizationType: cx.UATRegistrationAndCapabilities})
		Expect(err).NotTo(HaveOccurred())
		_, err = i.LocationInfo(sctx, &cx.LIR{PublicIdentity: "sip:user0003@ims.test", Originating: true,
			AuthorizationType: uat(cx.UATRegistrationAndCapabilities)})
		Expect(err).NotTo(HaveOccurred())
		_, err = i.UserAuthorization(sctx, &cx.UAR{UserName: "nobody@ims.test", PublicIdentity: "sip:nobody@ims.test",
			VisitedNetworkIdentifier: "ims.test"})
		Expect(err).To(HaveOccurred())

		time.Sleep(500 * time.Millisecond) // let the last segments reach the capture buffer
		Expect(capture.Command.Process.Signal(syscall.SIGINT)).To(Succeed())
		Eventually(capture, 10*time.Second).Should(gexec.Exit())

		if st, err := os.Stat(pcap); err == nil {
			GinkgoWriter.Printf("capture: %d bytes\n", st.Size())
		}
		decode := func(extra ...string) string {
			args := append([]string{"-r", pcap, "-d", "tcp.port==" + port + ",diameter", "-Y", "diameter"}, extra...)
			out, err := exec.Command("tshark", args...).Output()
			Expect(err).NotTo(HaveOccurred())
			return string(out)
		}
		summary := decode()
		GinkgoWriter.Println(summary)
		for _, want := range []string{
			"cmd=Capabilities-Exchange Request(257)", "cmd=Capabilities-Exchange Answer(257)",
			"cmd=User-Authorization Request(300)", "cmd=User-Authorization Answer(300)",
			"cmd=Location-Info Request(302)", "cmd=Location-Info Answer(302)",
			"cmd=Multimedia-Auth Request(303)", "cmd=Multimedia-Auth Answer(303)",
			"cmd=Server-Assignment Request(301)", "cmd=Server-Assignment Answer(301)",
		} {
			Expect(summary).To(ContainSubstring(want))
		}
		text := decode("-V")
		for _, want := range []string{
			"Auth-Application-Id: 3GPP Cx (16777216)",
			"User-Authorization-Type: REGISTRATION_AND_CAPABILITIES (2)",
			"AVP: Server-Capabilities(603)",
			"Originating-Request: ORIGINATING (0)",
			"3GPP-SIP-Authentication-Scheme: SIP Digest",
			"Digest-Realm: ims.test", "Digest-Qop: auth", "Digest-Algorithm: MD5",
			"Server-Assignment-Type: REGISTRATION (1)",
			"AVP: SCSCF-Restoration-Info(639)",
			"Path: <sip:term@pcscf3.ims.test;lr>",
			"Server-Name: sip:scscf2.ims.test",
			"Result-Code: DIAMETER_SUCCESS (2001)",
			"Experimental-Result-Code: DIAMETER_ERROR_USER_UNKNOWN (5001)",
		} {
			Expect(text).To(ContainSubstring(want))
		}
		Expect(text).NotTo(ContainSubstring("Malformed"))
	})
})
