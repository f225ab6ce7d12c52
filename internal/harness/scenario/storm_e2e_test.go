package scenario_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/ue"
)

// The storm scenarios (scenarios/storm-*.yaml), shortened for CI: fewer phones, a shorter probe interval and run,
// the fault at the same share of the run. The specs check that the report's storm KPIs are there and plausible.
const (
	stormPhones   = 150
	stormInterval = 6 * time.Second // 25 calls/s: every affected user calls and is called within 6 s of the fault
	stormDuration = 24 * time.Second
)

func runStorm(ctx SpecContext, name, binDir, dir string) (*report.Summary, string) {
	GinkgoHelper()
	wd, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	repo, err := lab.FindRepo(wd)
	Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(repo, "scenarios", name+".yaml")
	sc, err := scenario.Load(file)
	Expect(err).NotTo(HaveOccurred())
	Expect(sc.Faults).To(HaveLen(1))
	f := float64(stormDuration) / float64(sc.Duration)
	sc.Faults[0].At = time.Duration(float64(sc.Faults[0].At) * f).Round(time.Second)
	sc.Duration = stormDuration
	sc.Traffic.Phones, sc.Traffic.ProbeInterval = stormPhones, stormInterval
	relocate(sc, privateBlock(12))

	var (
		sum *report.Summary
		out strings.Builder
	)
	began := time.Now()
	o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, ScenarioFile: file, RunDir: filepath.Join(dir, "run"),
		BinDir: binDir, Progress: 4 * time.Second, GracePeriod: 2 * time.Second, KeepGoing: true},
		scenario.WithOutput(&out),
		scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		scenario.WithReportBuilder(func(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
			s, err := report.Build(runDir, scenario.ReportChecks(eval))
			sum = s
			return s, err
		}))
	GinkgoWriter.Printf("%s (took %s):\n%s\n", name, time.Since(began).Round(time.Second), out.String())
	Expect(err).NotTo(HaveOccurred(), out.String())
	Expect(sum).NotTo(BeNil())
	b, err := json.MarshalIndent(sum.Storm, "", "  ")
	Expect(err).NotTo(HaveOccurred())
	AddReportEntry(name+" storm", string(b))
	if !o.Passed {
		AddReportEntry(name+" expectations", out.String())
	}
	return sum, o.RunDir
}

var _ = Describe("the storm scenarios, shortened for CI", Label("e2e", "full"), Ordered, ContinueOnFailure, func() {
	var binDir string
	BeforeAll(func(ctx SpecContext) { binDir = buildNodes(ctx) }, NodeTimeout(5*time.Minute))

	run := func(name string) (get func() (*report.Summary, string)) {
		var (
			sum    *report.Summary
			runDir string
			dir    string
		)
		BeforeAll(func(ctx SpecContext) {
			var err error
			dir, err = os.MkdirTemp("", name+"-")
			Expect(err).NotTo(HaveOccurred())
			sum, runDir = runStorm(ctx, name, binDir, dir)
		}, NodeTimeout(4*time.Minute))
		AfterAll(func() {
			if !CurrentSpecReport().Failed() {
				_ = os.RemoveAll(dir)
			}
		})
		AfterEach(func() {
			if CurrentSpecReport().Failed() {
				AddReportEntry("run directory (kept)", runDir)
			}
		})
		return func() (*report.Summary, string) { return sum, runDir }
	}

	// plausible checks what both storms must show: a profile that covers the run after the fault, the affected
	// users back, and the report's section.
	plausible := func(s *report.Summary, runDir string) {
		GinkgoHelper()
		st := s.Storm
		Expect(st).NotTo(BeNil(), "summary.json has storm")
		Expect(st.AffectedUsers).To(Equal(s.AffectedUsers))
		Expect(st.AffectedUsers).To(BeNumerically(">=", stormPhones/6), "a third of the users, give or take")
		Expect(st.FromS).To(BeNumerically("~", s.Faults[0].T0S, 0.001))
		Expect(len(st.Register.PerS)).To(BeNumerically("~", stormDuration.Seconds()-st.FromS, 1.5), "one bin per second to the end")
		Expect(st.Cx).To(HaveKey("total"))
		Expect(st.UsersBack).To(BeNumerically(">=", 0.9*float64(st.AffectedUsers)), "affected users back")
		Expect(st.BackS).NotTo(BeNil())
		Expect(st.BackS.P95).To(BeNumerically("<", stormDuration.Seconds()-st.FromS))
		md, err := os.ReadFile(filepath.Join(runDir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## Storm"))
	}

	Context("storm-pcscf-loadsharing", func() {
		get := run("storm-pcscf-loadsharing")
		It("shows the re-registration storm: registrations and Cx per second well above the baseline after the kill", func() {
			s, runDir := get()
			plausible(s, runDir)
			st := s.Storm
			Expect(st.Register.PeakPerS).To(BeNumerically(">", st.Register.BaselinePerS), "storm REGISTER peak > baseline")
			Expect(st.Register.PeakPerS).To(BeNumerically(">=", 3), "a storm, not a trickle")
			Expect(st.Register.Total).To(BeNumerically(">=", 0.8*float64(st.AffectedUsers)),
				"about every affected user registered again")
			for _, cmd := range []string{"UAR", "MAR", "SAR"} {
				Expect(st.Cx).To(HaveKey(cmd))
				Expect(st.Cx[cmd].Total).To(BeNumerically(">=", 0.8*float64(st.AffectedUsers)), "%s per re-registration", cmd)
				Expect(st.Cx[cmd].PeakPerS).To(BeNumerically(">", st.Cx[cmd].BaselinePerS), cmd)
			}
			restorations := 0
			for _, r := range readJSONL[ue.Record](filepath.Join(runDir, "records.jsonl")) {
				if r.Type == "register" && r.Kind == "restoration" {
					restorations++
				}
			}
			Expect(restorations).To(BeNumerically(">=", 0.8*float64(st.AffectedUsers)), "the phones re-registered on the 504")
		})
	})

	Context("storm-scscf-quasipool", func() {
		get := run("storm-scscf-quasipool")
		It("shows the takeover's Cx load (LIR UAT 2, SAR) and no re-registration storm", func() {
			s, runDir := get()
			plausible(s, runDir)
			st := s.Storm
			Expect(s.CXAfterFault).To(HaveKey("LIR"))
			Expect(s.CXAfterFault["LIR"]["uat2"]).To(BeNumerically(">=", st.AffectedUsers/2), "LIR UAT 2 for the takeovers")
			Expect(st.Cx).To(HaveKey("SAR"))
			Expect(st.Cx["SAR"].Total).To(BeNumerically(">=", 0.8*float64(st.AffectedUsers)), "a SAR per user taken over")
			Expect(st.Cx["LIR"].PeakPerS).To(BeNumerically(">", st.Cx["LIR"].BaselinePerS))
			Expect(st.Register.Total).To(BeNumerically("<=", 0.1*float64(st.AffectedUsers)),
				"the phones do not register again under the quasi-pool")
		})
	})
})
