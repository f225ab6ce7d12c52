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
			"--kinds", "proxy", "--port-base", "41200", "--install=false", "--out", out), GinkgoWriter, GinkgoWriter)
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

	It("runs a tiny step of every kind in one invocation and writes one table per kind with numbers and provenance", Label("e2e"),
		func(ctx SpecContext) {
			requireBenchTools()
			out := GinkgoT().TempDir()
			// ports 41000-41102 (this spec's block): the lab's nodes on 41053…41099, the proxy steps on 41100…41102
			s, err := gexec.Start(exec.Command(bin, "bench", "--kinds", "proxy,capacity,registration,memory",
				"--rate", "20", "--duration", "3s", "--steps", "kamailio,lab",
				"--call-rates", "5", "--call-duration", "5s", "--reg-rates", "20", "--reg-duration", "2s",
				"--phones", "20,40", "--mem-reg-rate", "40", "--mem-hold", "3s",
				"--port-base", "41000", "--install=false", "--out", out), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			Eventually(s, 6*time.Minute).Should(gexec.Exit(0))

			b, err := os.ReadFile(filepath.Join(out, "bench.json"))
			Expect(err).NotTo(HaveOccurred())
			var rep struct {
				Kinds      []string `json:"kinds"`
				Provenance struct {
					Commit string `json:"commit"`
					CPUs   int    `json:"cpus"`
					CPU    string `json:"cpu_model"`
				} `json:"provenance"`
				Steps []struct {
					Proxy   string  `json:"proxy"`
					Calls   int     `json:"calls"`
					CPU     float64 `json:"cpu_ms_per_call"`
					LoadAvg string  `json:"loadavg_after"`
				} `json:"steps"`
				Capacity []struct {
					Calls, Answered int
					AnsweredPerS    float64 `json:"answered_per_s"`
					Setup180        float64 `json:"setup_180_p95_ms"`
					PhonesCPU       float64 `json:"phones_cpu_share"`
					LoadAvg         string  `json:"loadavg_after"`
					Error           string  `json:"error"`
				} `json:"capacity"`
				Registration []struct {
					Phones   int     `json:"phones"`
					OK       int     `json:"ok"`
					Attempts int     `json:"attempts"`
					Rate     float64 `json:"registrations_per_s"`
					LoadAvg  string  `json:"loadavg_after"`
					Error    string  `json:"error"`
				} `json:"registration"`
				Memory []struct {
					Phones int `json:"phones"`
					Point  *struct {
						Registered int   `json:"registered_at_end"`
						Peak       int64 `json:"nodes_peak_rss_bytes"`
						Nodes      []struct {
							Target string `json:"target"`
						} `json:"nodes"`
					} `json:"point"`
					LoadAvg string `json:"loadavg_after"`
					Error   string `json:"error"`
				} `json:"memory"`
				Summary []struct {
					Measure, Measured, N, Met string
				} `json:"summary"`
			}
			Expect(json.Unmarshal(b, &rep)).To(Succeed())
			Expect(rep.Kinds).To(Equal([]string{"proxy", "capacity", "registration", "memory"}))
			Expect(rep.Provenance.Commit).NotTo(BeEmpty())
			Expect(rep.Provenance.CPUs).To(BeNumerically(">", 0))

			Expect(rep.Steps).To(HaveLen(2))
			for _, st := range rep.Steps {
				Expect(st.Calls).To(BeNumerically(">", 0), st.Proxy)
				Expect(st.CPU).To(BeNumerically(">", 0), st.Proxy)
				Expect(st.LoadAvg).NotTo(BeEmpty())
			}
			Expect(rep.Capacity).To(HaveLen(1))
			c := rep.Capacity[0]
			Expect(c.Error).To(BeEmpty())
			Expect(c.Calls).To(BeNumerically(">", 5)) // ~25 due in 5 s at 5/s
			Expect(c.Answered).To(BeNumerically(">", 0))
			Expect(c.AnsweredPerS).To(BeNumerically(">", 0))
			Expect(c.Setup180).To(BeNumerically(">", 0))
			Expect(c.PhonesCPU).To(BeNumerically(">", 0)) // the load generator's own CPU, beside the lab's figures
			Expect(c.LoadAvg).NotTo(BeEmpty())

			Expect(rep.Registration).To(HaveLen(1))
			r := rep.Registration[0]
			Expect(r.Error).To(BeEmpty())
			Expect(r.Phones).To(Equal(40)) // 20/s for 2 s
			Expect(r.OK).To(BeNumerically(">=", 40))
			Expect(r.Attempts).To(BeNumerically(">=", r.OK))
			Expect(r.Rate).To(BeNumerically(">", 0))
			Expect(r.LoadAvg).NotTo(BeEmpty())

			Expect(rep.Memory).To(HaveLen(2))
			for _, m := range rep.Memory {
				Expect(m.Error).To(BeEmpty())
				Expect(m.Point).NotTo(BeNil())
				Expect(m.Point.Registered).To(Equal(m.Phones))
				Expect(m.Point.Peak).To(BeNumerically(">", 0))
				Expect(len(m.Point.Nodes)).To(BeNumerically(">=", 6)) // dnsd, hss, bac, i-cscf, p-cscfs, s-cscfs
			}

			Expect(rep.Summary).To(HaveLen(4))
			for _, row := range rep.Summary {
				Expect(row.Measured).NotTo(BeEmpty(), row.Measure)
				Expect(row.N).NotTo(BeEmpty(), row.Measure)
				Expect(row.Met).NotTo(Equal("not measured"), row.Measure)
			}
			Expect(rep.Summary[2].Met).To(HaveSuffix("(extrapolated)")) // two points below 100k: a line

			md, err := os.ReadFile(filepath.Join(out, "bench.md"))
			Expect(err).NotTo(HaveOccurred())
			for _, h := range []string{"## Proxy", "## Capacity", "## Registration", "## Memory", "## Summary", "Provenance: commit "} {
				Expect(string(md)).To(ContainSubstring(h))
			}
		}, SpecTimeout(8*time.Minute))

	It("reports a kind that cannot run in its table with the reason, runs the others and exits 1", func() {
		out := GinkgoT().TempDir()
		cmd := exec.Command(bin, "bench", "--kinds", "proxy,capacity", "--call-rates", "5", "--bin-dir", GinkgoT().TempDir(),
			"--port-base", "41300", "--install=false", "--out", out)
		cmd.Env = append(os.Environ(), "PATH="+GinkgoT().TempDir()) // no sipp, no kamailio
		s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, time.Minute).Should(gexec.Exit(1))
		Expect(s.Err).To(gbytes.Say("2 step\\(s\\) failed or could not run"))
		md, err := os.ReadFile(filepath.Join(out, "bench.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("Not run: sipp not found"))
		Expect(string(md)).To(MatchRegexp(`\| 1 \| 5 \| .*\| node binaries: --bin-dir .*: no executable dnsd`))
		Expect(string(md)).To(ContainSubstring("| full-chain calls/s"))
	})
})
