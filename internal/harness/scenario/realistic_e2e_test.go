package scenario_test

import (
	"encoding/csv"
	"fmt"
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
)

// scenarios/realistic-pcscf-kill.yaml shortened for CI: the traffic model and the reachability probes with the
// quasi-pool. Fewer phones and a shorter run; the model, the probes and the expectations are the file's.
var _ = Describe("the traffic model and time to restore (realistic-pcscf-kill, shortened)", Label("e2e", "full"), Ordered, func() {
	var (
		s   *report.Summary
		o   *scenario.Outcome
		out strings.Builder
		dir string
	)
	BeforeAll(func(ctx SpecContext) {
		binDir := buildNodes(ctx)
		wd, err := os.Getwd()
		Expect(err).NotTo(HaveOccurred())
		repo, err := lab.FindRepo(wd)
		Expect(err).NotTo(HaveOccurred())
		file := filepath.Join(repo, "scenarios", "realistic-pcscf-kill.yaml")
		sc, err := scenario.Load(file)
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Traffic.BHCA).To(BeNumerically(">", 0))
		Expect(sc.Traffic.Reachability.Interval).To(BeNumerically("<=", 250*time.Millisecond))
		Expect(sc.Faults).To(HaveLen(1))
		sc.Duration, sc.Faults[0].At = 24*time.Second, 6*time.Second
		sc.Traffic.Phones = 60
		// Probes need a prober registered through a P-CSCF other than pcscf1. With the default 4 probers all of
		// them land on pcscf1 in 1 run of 81 (one CI run had none left and failed); with 8, in 1 of 6,561.
		sc.Traffic.Reachability.Probers = 8
		// A free block of 11 ports, as the shipped scenarios' CI runs use (shipped_e2e_test.go, shorten).
		base := freeBlock(11)
		t := &sc.Topology
		t.DNS.Listen = fmt.Sprintf("127.0.0.1:%d", base)
		t.HSS.Address, t.HSS.DiameterPort, t.HSS.HTTPPort = "127.0.0.1", base+1, base+2
		t.BAC.Address, t.BAC.Port = "127.0.0.1", base+3
		t.ICSCF.Address, t.ICSCF.Port = "127.0.0.1", base+4
		t.Pools.PCSCF.Address, t.Pools.PCSCF.Addresses, t.Pools.PCSCF.BasePort, t.Pools.PCSCF.Port = "127.0.0.1", nil, base+5, 0
		t.Pools.SCSCF.Address, t.Pools.SCSCF.Addresses, t.Pools.SCSCF.BasePort, t.Pools.SCSCF.Port = "127.0.0.1", nil, base+8, 0
		Expect(sc.Validate()).To(Succeed())

		dir, err = os.MkdirTemp("", "realistic-pcscf-kill-")
		Expect(err).NotTo(HaveOccurred())
		build := func(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
			var err error
			s, err = report.Build(runDir, scenario.ReportChecks(eval))
			return s, err
		}
		o, err = scenario.Run(ctx, scenario.RunConfig{Scenario: sc, ScenarioFile: file, RunDir: filepath.Join(dir, "run"),
			BinDir: binDir, Progress: 4 * time.Second, GracePeriod: 2 * time.Second},
			scenario.WithOutput(&out),
			scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
			scenario.WithReportBuilder(build))
		GinkgoWriter.Println(out.String())
		Expect(err).NotTo(HaveOccurred(), out.String())
		Expect(s).NotTo(BeNil())
	}, NodeTimeout(4*time.Minute))
	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			AddReportEntry("run directory (kept)", filepath.Join(dir, "run"))
		}
	})
	AfterAll(func() {
		if !CurrentSpecReport().Failed() {
			Expect(os.RemoveAll(dir)).To(Succeed())
		}
	})

	It("passes the scenario's expectations", func() {
		Expect(o.Passed).To(BeTrue(), out.String())
	})

	It("probes every affected user and the quasi-pool restores each one in both directions", func() {
		sv := s.Survival
		Expect(sv).NotTo(BeNil())
		Expect(s.AffectedUsers).To(BeNumerically(">", 0))
		Expect(sv.Users).To(Equal(s.AffectedUsers))
		Expect(sv.NotProbed).To(BeZero())
		Expect(sv.IntervalS).To(Equal(0.25))
		Expect(sv.Service.N).To(Equal(s.AffectedUsers))
		Expect(sv.Service.Censored).To(BeZero(), "every affected user restored")
		Expect(sv.MT.Restored).To(Equal(s.AffectedUsers))
		Expect(sv.MO.N).To(BeNumerically(">", 0), "some affected users place calls")
		Expect(sv.MO.N).To(BeNumerically("<", s.AffectedUsers), "some affected users do not (idle, MT-only)")
		Expect(sv.MO.Censored).To(BeZero())
		last := sv.Service.Points[len(sv.Service.Points)-1]
		Expect(last.Restored).To(Equal(1.0))
		Expect(sv.Service.MedianS).NotTo(BeNil())
		Expect(sv.TimedAt).To(Equal("answer"))
		Expect(sv.BoundS).To(BeNumerically("~", sv.DetectedLastS+sv.IntervalS, 1e-6))
		Expect(sv.DetectedFirstS).To(BeNumerically("<=", sv.DetectedLastS))
		Expect(s.Files).To(ContainElements("plots/restore.svg", "plots/restore.png"))
	})

	It("writes each affected user's restore times in users.csv", func() {
		f, err := os.Open(filepath.Join(dir, "run", "users.csv"))
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(s.AffectedUsers + 1))
		Expect(rows[0][len(rows[0])-5:]).To(Equal([]string{"mt_restore_s", "mo_restore_s", "restore_s", "censored",
			"setup_started_s"}))
		for _, r := range rows[1:] {
			Expect(r[len(r)-3]).NotTo(BeEmpty(), "restore_s of %s", r[0])
			Expect(r[len(r)-2]).To(Equal("false"), r[0])
			Expect(r[len(r)-1]).NotTo(BeEmpty(), "setup_started_s of %s", r[0])
		}
	})
})
