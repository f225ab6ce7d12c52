package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

// requireSIPp skips when SIPp is not installed, unless the run demands it (CI installs sip-tester).
func requireSIPp() string {
	p, err := exec.LookPath("sipp")
	if err != nil {
		if os.Getenv("IMSLAB_REQUIRE_SIPP") != "" {
			Fail("sipp is required (IMSLAB_REQUIRE_SIPP is set) but not installed")
		}
		Skip("sipp not installed (apt-get install sip-tester); CI installs it and requires this test")
	}
	return p
}

func portOf(addr string) string { _, p, _ := strings.Cut(addr, ":"); return p }

func scenario(name string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "sipp", name))
	Expect(err).NotTo(HaveOccurred())
	return p
}

// sipp runs one SIPp scenario against the BAC and returns its session. fields is the injection line
// (user;password;…) of scenarios that take one, written like the CSV files shipped in sipp/.
func sipp(bin, bac, xml, fields, user, port string) *gexec.Session {
	dir := GinkgoT().TempDir()
	_, p, _ := strings.Cut(port, ":")
	args := []string{"-sf", scenario(xml), "-m", "1", "-i", "127.0.0.1", "-p", p, "-timeout", "20s", "-timeout_error",
		"-trace_err", "-nostdin"}
	if bac != "" {
		args = append([]string{bac}, args...)
	}
	if fields != "" {
		csv := filepath.Join(dir, "fields.csv")
		Expect(os.WriteFile(csv, []byte("SEQUENTIAL\n"+fields+"\n"), 0o644)).To(Succeed())
		args = append(args, "-inf", csv, "-au", user+"@ims.test", "-ap", "pass"+user[len(user)-4:],
			"-auth_uri", "ims.test") // the digest uri is the Request-URI (SIPp's default: the address it sends to)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		s.Kill()
		if CurrentSpecReport().Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "*_errors.log"))
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				GinkgoWriter.Printf("---- %s ----\n%s\n", filepath.Base(f), b)
			}
		}
	})
	return s
}

var _ = Describe("SIPp against the lab", Label("e2e"), Ordered, func() {
	var (
		bin string
		l   *lab
	)
	BeforeAll(func() {
		bin = requireSIPp()
		l = startLab()
	})
	It("registers user0001/pass0001 through the BAC with digest authentication", SpecTimeout(60*time.Second), func(_ SpecContext) {
		s := sipp(bin, l.bac(), "register.xml", "user0001;pass0001;"+portOf(l.port(24))+";", "user0001", l.port(24))
		Eventually(s, 30*time.Second).Should(gexec.Exit(0))
	})
	It("connects a SIPp caller to a SIPp callee registered through the BAC, with a re-INVITE in the call", SpecTimeout(90*time.Second), func(_ SpecContext) {
		callee := sipp(bin, "", "uas.xml", "", "", l.port(25))
		reg := sipp(bin, l.bac(), "register.xml", "user0011;pass0011;"+portOf(l.port(25))+";", "user0011", l.port(27))
		Eventually(reg, 30*time.Second).Should(gexec.Exit(0))
		caller := sipp(bin, l.bac(), "uac.xml", "user0010;pass0010;user0011;", "user0010", l.port(26))
		Eventually(caller, 40*time.Second).Should(gexec.Exit(0))
		Eventually(callee, 10*time.Second).Should(gexec.Exit(0))
	})
})
