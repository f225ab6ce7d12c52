package compare_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/testutil"
)

// A real comparison repeated twice, with the victim and the instant of the kill drawn from the seed: every
// random choice comes from the run's seed, so the two schemes of one repetition lose the same P-CSCF at the
// same instant and the same users; the repetitions are aggregated with n and a CI.
var _ = Describe("a real repeated comparison with a random victim", Label("e2e", "full"), func() {
	It("hits the same victim and users in every scheme of a repetition and aggregates the repetitions",
		SpecTimeout(8*time.Minute), func(ctx SpecContext) {
			bin, err := testutil.BinDir(ctx, false) // built once per test run
			Expect(err).NotTo(HaveOccurred())

			base, err := testutil.FreeBlock(11)
			Expect(err).NotTo(HaveOccurred())
			sc, err := scenario.Parse(fmt.Appendf(nil, `
name: repeat-random-kill
duration: 14s
topology:
  dns: {listen: 127.0.0.1:%d}
  hss: {address: 127.0.0.1, diameter_port: %d, http_port: %d}
  bac: {address: 127.0.0.1, port: %d}
  icscf: {address: 127.0.0.1, port: %d}
  pools:
    pcscf: {size: 3, address: 127.0.0.1, base_port: %d}
    scscf: {size: 3, address: 127.0.0.1, base_port: %d}
  probing: {interval: 1s, timeout: 500ms, failures_to_down: 2}
  registration: {expires: 300s}
traffic: {phones: 12, register_rate: 50, call_rate: 2, probe_interval: 500ms, hold: 200ms, call_timeout: 5s}
faults:
  - {kind: kill, target: "random:pcscf", at: 5s, jitter: 1s}
`, base, base+1, base+2, base+3, base+4, base+5, base+8))
			Expect(err).NotTo(HaveOccurred())
			vs, err := compare.ParseVariants("quasi-pool,load-sharing")
			Expect(err).NotTo(HaveOccurred())
			dir := GinkgoT().TempDir()
			var log strings.Builder
			run := compare.LabRunner(scenario.RunConfig{BinDir: bin, Progress: 4 * time.Second, GracePeriod: 2 * time.Second},
				scenario.WithOutput(&log),
				scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			res, err := compare.Run(ctx, compare.Config{Scenario: sc, Variants: vs, OutDir: dir, Run: run, Out: &log,
				Seed: 7100, Repeat: 2})
			GinkgoWriter.Println(log.String())
			Expect(err).NotTo(HaveOccurred(), log.String())

			summary := func(rel string) *report.Summary {
				GinkgoHelper()
				b, err := os.ReadFile(filepath.Join(dir, rel, "summary.json"))
				Expect(err).NotTo(HaveOccurred())
				var s report.Summary
				Expect(json.Unmarshal(b, &s)).To(Succeed())
				return &s
			}
			By("drawing the same victim, instant and affected users in both schemes of a repetition")
			for _, rep := range []string{"rep1", "rep2"} {
				qp, ls := summary(filepath.Join("quasi-pool", rep)), summary(filepath.Join("load-sharing", rep))
				Expect(qp.Faults).To(HaveLen(1))
				f, g := qp.Faults[0], ls.Faults[0]
				Expect(f.PlannedTarget).To(Equal("random:pcscf"))
				Expect(f.Target).To(BeElementOf("pcscf1", "pcscf2", "pcscf3"))
				Expect(f.AtS).To(And(BeNumerically(">=", 5), BeNumerically("<", 6)))
				Expect(g.Target).To(Equal(f.Target), rep)
				Expect(g.AtS).To(Equal(f.AtS), rep)
				Expect(qp.AffectedUsers).To(BeNumerically(">", 0))
				a, b := slices.Sorted(slices.Values(qp.AffectedIMPUs)), slices.Sorted(slices.Values(ls.AffectedIMPUs))
				Expect(b).To(Equal(a), "%s: the same users registered through the victim in both schemes", rep)
				AddReportEntry(rep, fmt.Sprintf("victim %s at %.3f s, %d affected users, detection qp %v ls %v",
					f.Target, f.AtS, qp.AffectedUsers, qp.TimeToDetectS, ls.TimeToDetectS))
				// The run's one copy of the events (the report merged the nodes' files into it).
				events, err := os.ReadFile(filepath.Join(dir, "quasi-pool", rep, report.FileEvents))
				Expect(err).NotTo(HaveOccurred())
				Expect(string(events)).To(MatchRegexp(`"kind":"fault_drawn"[^\n]*"node":"lab"|"node":"lab"[^\n]*"kind":"fault_drawn"`))
			}

			By("aggregating the two repetitions of each scheme with n = 2 and a CI")
			Expect(res.Repeat).To(Equal(2))
			for i, v := range []string{"quasi-pool", "load-sharing"} {
				var rep compare.Repeat
				b, err := os.ReadFile(filepath.Join(dir, v, "repeat.json"))
				Expect(err).NotTo(HaveOccurred())
				Expect(json.Unmarshal(b, &rep)).To(Succeed())
				Expect(rep.Seeds).To(Equal([]int64{7100, 7101}))
				m := rep.Metric("time_to_detect_s")
				Expect(m).NotTo(BeNil())
				Expect(m.Stat.Runs).To(Equal(2))
				Expect(m.Stat.MeanCI).NotTo(BeNil())
				Expect(m.Stat.MeanCI.Low).To(BeNumerically("<=", m.Stat.Mean))
				Expect(m.Stat.MeanCI.High).To(BeNumerically(">=", m.Stat.Mean))
				Expect(filepath.Join(dir, v, "repeat.md")).To(BeAnExistingFile())
				Expect(res.Rows[i].Repeat).NotTo(BeNil())
			}
			md, err := os.ReadFile(filepath.Join(dir, compare.FileMarkdown))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(md)).To(ContainSubstring("## Repetitions (2 runs per scheme)"))
		})
})
