package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
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

func scenario(name string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "sipp", name))
	Expect(err).NotTo(HaveOccurred())
	return p
}

// sipp runs one SIPp scenario against the BAC and returns its session.
func sipp(bin, bac, xml, csv, user, port string) *gexec.Session {
	dir := GinkgoT().TempDir()
	args := []string{"-sf", scenario(xml), "-m", "1", "-i", "127.0.0.1", "-p", port, "-timeout", "20s", "-timeout_error",
		"-trace_err", "-nostdin"}
	if bac != "" {
		args = append([]string{bac}, args...)
	}
	if csv != "" {
		args = append(args, "-inf", scenario(csv), "-au", user+"@ims.test", "-ap", "pass"+user[len(user)-4:])
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
	var bin string
	bac := "127.0.0.1:22010"
	BeforeAll(func() {
		bin = requireSIPp()
		startLab(22000)
	})
	It("registers user0001/pass0001 through the BAC with digest authentication", SpecTimeout(60*time.Second), func(_ SpecContext) {
		s := sipp(bin, bac, "register.xml", "users.csv", "user0001", "22100")
		Eventually(s, 30*time.Second).Should(gexec.Exit(0))
	})
	It("connects a SIPp caller to a SIPp callee registered through the BAC, with a re-INVITE in the call", SpecTimeout(90*time.Second), func(_ SpecContext) {
		callee := sipp(bin, "", "uas.xml", "", "", "22101")
		reg := sipp(bin, bac, "register.xml", "callee.csv", "user0011", "22103")
		Eventually(reg, 30*time.Second).Should(gexec.Exit(0))
		caller := sipp(bin, bac, "uac.xml", "caller.csv", "user0010", "22102")
		Eventually(caller, 40*time.Second).Should(gexec.Exit(0))
		Eventually(callee, 10*time.Second).Should(gexec.Exit(0))
	})
})
