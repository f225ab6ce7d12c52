package scenario_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

var _ = Describe("a shortened baseline with every node in its own network namespace", Label("netns", "e2e"), func() {
	It("registers every phone and answers nearly every call across the bridge", SpecTimeout(5*time.Minute), func(ctx SpecContext) {
		if err := netns.Check(); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_NETNS") != "" {
				Fail("network namespaces are required (IMSLAB_REQUIRE_NETNS is set): " + err.Error())
			}
			Skip(err.Error())
		}
		sc, err := scenario.Load("../../../scenarios/baseline.yaml")
		Expect(err).NotTo(HaveOccurred())
		sc.Duration, sc.Seed = 12*time.Second, 7
		sc.Traffic.Phones, sc.Traffic.CallRate = 10, 4
		for i := range sc.Expectations {
			if sc.Expectations[i].Metric == "calls.total" {
				v := 20.0
				sc.Expectations[i].Value = &v
			}
		}
		runDir := filepath.Join(GinkgoT().TempDir(), "run")
		var out strings.Builder
		o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, RunDir: runDir, Progress: 2 * time.Second,
			GracePeriod: 2 * time.Second, Netns: true},
			scenario.WithOutput(&out),
			scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
			scenario.WithReportBuilder(func(dir string, eval scenario.Evaluator) (scenario.Metrics, error) {
				return report.Build(dir, scenario.ReportChecks(eval))
			}))
		GinkgoWriter.Println(out.String())
		Expect(err).NotTo(HaveOccurred())
		for _, r := range o.Results {
			Expect(r.OK).To(BeTrue(), "%s: %v", r.Title(), r)
		}
		Expect(o.Passed).To(BeTrue())

		By("the nodes ran on namespace addresses (topology.yaml of the run)")
		b, err := os.ReadFile(filepath.Join(runDir, "topology.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(MatchRegexp(`listen: "?10\.89\.\d+\.2:53`))
		id := ""
		for _, e := range readJSONL[map[string]any](filepath.Join(runDir, "events", "lab.jsonl")) {
			if e["kind"] == "netns_up" {
				id, _ = e["id"].(string)
			}
		}
		Expect(id).NotTo(BeEmpty(), "the lab recorded its namespace network")
		entries, _ := os.ReadDir("/run/netns")
		for _, e := range entries {
			Expect(e.Name()).NotTo(HavePrefix("imslab-"+id), "the run removed its namespaces")
		}
		Expect(filepath.Join("/sys/class/net", netns.BridgeName(id))).NotTo(BeAnExistingFile())
	})
})
