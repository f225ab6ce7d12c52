package scenario_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// Phones across user9999 → user10000 register (digest through BAC, P-, I-, S-CSCF, HSS) and call each other in the
// real lab, which provisions them by itself: the naming of phones, HSS and nodes agree beyond four digits.
var _ = Describe("a population across user9999", Label("e2e", "full"), func() {
	It("registers user9991…user10010 with the lab's own provisioning and connects their calls", func(ctx SpecContext) {
		binDir := buildNodes(ctx)
		sc, err := scenario.Parse([]byte(`name: population-e2e
duration: 6s
topology: {trace: {off: true}}
traffic: {phones: 20, first_user: 9991, register_rate: 50, call_rate: 4, hold: 200ms}
`))
		Expect(err).NotTo(HaveOccurred())
		relocate(sc, 46200) // the private port block of this spec
		dir := GinkgoT().TempDir()
		var (
			sum *report.Summary
			out strings.Builder
		)
		o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, RunDir: filepath.Join(dir, "run"), BinDir: binDir,
			Progress: 3 * time.Second, GracePeriod: 2 * time.Second},
			scenario.WithOutput(&out),
			scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
			scenario.WithReportBuilder(func(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
				s, err := report.Build(runDir, scenario.ReportChecks(eval))
				sum = s
				return s, err
			}))
		GinkgoWriter.Println(out.String())
		Expect(err).NotTo(HaveOccurred(), out.String())
		Expect(sum.Registrations.ByKind["initial"]).To(Equal(20))
		Expect(sum.Registrations.Failed).To(BeZero())
		Expect(sum.Calls.Answered).To(BeNumerically(">", 0))

		cfg, err := os.ReadFile(filepath.Join(o.RunDir, "config", "hss.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(cfg)).To(ContainSubstring("lab_subscriber_count: 10010"))

		f, err := os.Open(filepath.Join(o.RunDir, "records.jsonl"))
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		registered := map[string]bool{}
		s := bufio.NewScanner(f)
		for s.Scan() {
			var r struct {
				Type, Kind, IMPU string
				Status           int
			}
			Expect(json.Unmarshal(s.Bytes(), &r)).To(Succeed())
			if r.Type == "register" && r.Kind == "initial" && r.Status == 200 {
				registered[r.IMPU] = true
			}
		}
		Expect(registered).To(HaveKey("sip:user9999@ims.test"))
		Expect(registered).To(HaveKey("sip:user10000@ims.test"))
		Expect(registered).To(HaveKey("sip:user10010@ims.test"))
		Expect(registered).To(HaveLen(20))
	}, SpecTimeout(4*time.Minute))
})
