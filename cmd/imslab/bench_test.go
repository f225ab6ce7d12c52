package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
)

// requireBenchTools skips when Kamailio or SIPp is missing, unless IMSLAB_REQUIRE_KAMAILIO is set (then it fails).
func requireBenchTools() {
	for _, tool := range []string{"kamailio", "sipp"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_KAMAILIO") != "" {
				Fail(tool + " not installed and IMSLAB_REQUIRE_KAMAILIO is set (apt-get install -y kamailio sip-tester)")
			}
			Skip(tool + " not installed (apt-get install -y kamailio sip-tester)")
		}
	}
}

var _ = Describe("imslab bench", Label("bench"), func() {
	It("measures the lab's proxy and Kamailio under the same SIPp load and writes the ratio", func(ctx SpecContext) {
		requireBenchTools()
		out := GinkgoT().TempDir()
		s, err := gexec.Start(exec.Command(bin, "bench", "--rate", "40", "--duration", "5s", "--steps", "kamailio,lab",
			"--install=false", "--out", out), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 3*time.Minute).Should(gexec.Exit(0))

		b, err := os.ReadFile(filepath.Join(out, "bench.json"))
		Expect(err).NotTo(HaveOccurred())
		var rep struct {
			Machine struct {
				Kamailio string `json:"kamailio"`
				Cores    int    `json:"cores"`
			} `json:"machine"`
			Steps []struct {
				Proxy  string  `json:"proxy"`
				Calls  int     `json:"calls"`
				Failed int     `json:"failed"`
				CPU    float64 `json:"cpu_ms_per_call"`
				Ratio  float64 `json:"ratio"`
				SetupN int     `json:"setup_samples"`
				Obs    int64   `json:"events_trace_bytes"`
			} `json:"steps"`
			MedianRatio float64 `json:"median_ratio"`
		}
		Expect(json.Unmarshal(b, &rep)).To(Succeed())
		Expect(rep.Machine.Kamailio).To(ContainSubstring("kamailio"))
		Expect(rep.Machine.Cores).To(BeNumerically(">", 0))
		Expect(rep.Steps).To(HaveLen(2))
		Expect(rep.Steps[0].Proxy).To(Equal("kamailio"))
		Expect(rep.Steps[1].Proxy).To(Equal("lab"))
		for _, st := range rep.Steps {
			Expect(st.Calls).To(BeNumerically(">", 0), st.Proxy)
			Expect(st.CPU).To(BeNumerically(">", 0), st.Proxy)
			// one setup time per call answered 200
			Expect(st.SetupN).To(BeNumerically(">=", st.Calls), st.Proxy)
			Expect(st.SetupN).To(BeNumerically("<=", st.Calls+st.Failed), st.Proxy)
		}
		Expect(rep.Steps[1].Ratio).To(BeNumerically(">", 0))
		Expect(rep.Steps[1].Obs).To(BeNumerically(">", 0)) // the lab proxy recorded events and a trace, as a node does
		Expect(rep.MedianRatio).To(Equal(rep.Steps[1].Ratio))
		Expect(filepath.Join(out, "bench.md")).To(BeAnExistingFile())
	}, SpecTimeout(4*time.Minute))

	It("refuses a bad step list and a bad rate with a clear error", func() {
		s, err := gexec.Start(exec.Command(bin, "bench", "--steps", "kamailio,opensips"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(2))
		Expect(s.Err).To(gbytes.Say(`unknown proxy "opensips"`))
		s, err = gexec.Start(exec.Command(bin, "bench", "--rate", "0"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(2))
		Expect(s.Err).To(gbytes.Say(`--rate "0": must be a positive`))
	})
})
