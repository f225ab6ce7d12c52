package scenario_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/testutil"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// freeBlock returns the first of n consecutive free ports (testutil.FreeBlock).
func freeBlock(n int) int {
	GinkgoHelper()
	base, err := testutil.FreeBlock(n)
	Expect(err).NotTo(HaveOccurred())
	return base
}

// smallTopology is the topology block of a scenario with two P-CSCFs and two S-CSCFs on the ports of the free
// block that starts at b.
func smallTopology(b int) string {
	return fmt.Sprintf(`topology:
  dns: {listen: 127.0.0.1:%d}
  hss: {address: 127.0.0.1, diameter_port: %d, http_port: %d}
  bac: {address: 127.0.0.1, port: %d}
  icscf: {address: 127.0.0.1, port: %d}
  pools:
    pcscf: {size: 2, address: 127.0.0.1, base_port: %d}
    scscf: {size: 2, address: 127.0.0.1, base_port: %d}
`, b, b+1, b+2, b+3, b+4, b+5, b+7)
}

type labEvent struct {
	TNs    int64  `json:"t_ns"`
	Kind   string `json:"kind"`
	Fault  string `json:"fault"`
	Target string `json:"target"`
}

// runTrace reads a run's message trace: its trace/ segments, or the merged trace.pcapng.gz of a run whose report
// merged them.
func runTrace(runDir string) []obs.TraceLine {
	GinkgoHelper()
	lines, _, _, err := obs.ReadTraceDir(filepath.Join(runDir, "trace"))
	Expect(err).NotTo(HaveOccurred())
	if len(lines) == 0 {
		lines, _, _, err = obs.ReadTraceFile(filepath.Join(runDir, obs.TraceFile))
		Expect(err).NotTo(HaveOccurred())
	}
	return lines
}

// readJSONL decodes every line of path; a node's events file of a run whose report merged it away is read as
// readNodeEvents reads it.
func readJSONL[T any](path string) []T {
	GinkgoHelper()
	b := nodeEventsFile(path)
	var out []T
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var v T
		Expect(json.Unmarshal([]byte(line), &v)).To(Succeed(), line)
		out = append(out, v)
	}
	return out
}

var _ = Describe("running a scenario in the real lab", Label("e2e"), func() {
	It("starts the lab and the phones, kills and restarts a P-CSCF on time, writes the run directory and checks the expectations",
		SpecTimeout(5*time.Minute), func(ctx SpecContext) {
			b := freeBlock(10)
			sc, err := scenario.Parse(fmt.Appendf(nil, `
name: e2e-kill
description: a short kill of pcscf1
seed: 4242
duration: 16s
%s  registration: {expires: 300s}
traffic: {phones: 10, call_rate: 4, hold: 500ms}
faults:
  - {kind: kill, target: pcscf1, at: 5s, for: 5s}
expectations:
  - {name: some calls, metric: calls.total, op: ">", value: 0}
  - {metric: mo.affected_users_with_success, op: ">=", value_of: affected_users}
`, smallTopology(b)))
			Expect(err).NotTo(HaveOccurred())
			runDir := filepath.Join(GinkgoT().TempDir(), "run")
			var out strings.Builder
			var built string
			fake := func(dir string, eval scenario.Evaluator) (scenario.Metrics, error) {
				built = dir
				Expect(filepath.Join(dir, "scenario.json")).To(BeAnExistingFile(), "the report reads a finished run")
				recs := readJSONL[map[string]any](filepath.Join(dir, "records.jsonl"))
				calls := 0
				for _, r := range recs {
					if r["type"] == "call" && r["direction"] == "mo" {
						calls++
					}
				}
				return metrics{"calls.total": float64(calls), "affected_users": 5, "mo.affected_users_with_success": 4}, nil
			}
			o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, RunDir: runDir, Progress: 2 * time.Second,
				GracePeriod: 2 * time.Second},
				scenario.WithOutput(&out),
				scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
				scenario.WithReportBuilder(fake))
			GinkgoWriter.Println(out.String())
			Expect(err).NotTo(HaveOccurred())
			Expect(o.RunDir).To(Equal(runDir))
			Expect(built).To(Equal(runDir))
			Expect(o.Seed).To(Equal(int64(4242)))

			By("evaluating the expectations against the report's metrics: exit status 1")
			Expect(o.Results).To(HaveLen(2))
			Expect(o.Results[0].OK).To(BeTrue(), "calls were placed and recorded")
			Expect(o.Results[1].OK).To(BeFalse())
			Expect(scenario.ExitCode(o, err)).To(Equal(scenario.ExitFailed))
			var ej struct {
				Passed  bool              `json:"passed"`
				Results []scenario.Result `json:"results"`
			}
			eb, err := os.ReadFile(filepath.Join(runDir, "expectations.json"))
			Expect(err).NotTo(HaveOccurred())
			Expect(json.Unmarshal(eb, &ej)).To(Succeed())
			Expect(ej.Passed).To(BeFalse())
			Expect(ej.Results).To(HaveLen(2))
			Expect(out.String()).To(ContainSubstring("seed 4242 (repeat with --seed 4242)"))
			Expect(out.String()).To(MatchRegexp(`\[\s+\d+s/16s\] registered 10/10 · calls \d+ ok, \d+ failed · received \d+ · faults: pcscf1 killed`))
			Expect(out.String()).To(MatchRegexp(`some calls\s+calls.total\s+\d+\s+> 0\s+yes`))
			Expect(out.String()).To(ContainSubstring("e2e-kill: FAILED (seed 4242)"))

			By("writing scenario.json by the contract of docs/architecture.md")
			var sj struct {
				Name        string  `json:"name"`
				Description string  `json:"description"`
				Seed        int64   `json:"seed"`
				StartNs     int64   `json:"start_ns"`
				EndNs       int64   `json:"end_ns"`
				DurationS   float64 `json:"duration_s"`
				Faults      []struct {
					Kind   string  `json:"kind"`
					Target string  `json:"target"`
					AtS    float64 `json:"at_s"`
					ForS   float64 `json:"for_s"`
				} `json:"faults"`
				Expectations []map[string]any `json:"expectations"`
				Provenance   struct {
					Commit string `json:"commit"`
					CPUs   int    `json:"cpus"`
				} `json:"provenance"`
			}
			sb, err := os.ReadFile(filepath.Join(runDir, "scenario.json"))
			Expect(err).NotTo(HaveOccurred())
			Expect(json.Unmarshal(sb, &sj)).To(Succeed())
			Expect(sj.Name).To(Equal("e2e-kill"))
			Expect(sj.Description).To(Equal("a short kill of pcscf1"))
			Expect(sj.Seed).To(Equal(int64(4242)))
			Expect(sj.DurationS).To(Equal(16.0))
			Expect(sj.Faults).To(HaveLen(1))
			Expect(sj.Faults[0].Kind).To(Equal("kill"))
			Expect(sj.Faults[0].Target).To(Equal("pcscf1"))
			Expect(sj.Faults[0].AtS).To(Equal(5.0))
			Expect(sj.Faults[0].ForS).To(Equal(5.0))
			Expect(sj.Expectations).To(HaveLen(2))
			Expect(sj.EndNs - sj.StartNs).To(BeNumerically(">=", int64(16*time.Second)))
			Expect(sj.Provenance.Commit).To(MatchRegexp(`^[0-9a-f]{40}$`), "the code of the run is recorded")
			Expect(sj.Provenance.CPUs).To(BeNumerically(">=", 1))

			By("injecting the kill at t0+5s and starting pcscf1 again at t0+10s (events/lab.jsonl)")
			var kill, start, ready *labEvent
			for _, e := range readJSONL[labEvent](filepath.Join(runDir, "events", "lab.jsonl")) {
				switch {
				case e.Kind == "fault" && e.Fault == "kill" && e.Target == "pcscf1":
					kill = &e
				case e.Kind == "node_start" && e.Target == "pcscf1" && e.TNs > sj.StartNs:
					start = &e
				case e.Kind == "node_ready" && e.Target == "pcscf1" && e.TNs > sj.StartNs:
					ready = &e
				}
			}
			Expect(kill).NotTo(BeNil())
			Expect(time.Duration(kill.TNs - sj.StartNs)).To(BeNumerically("~", 5*time.Second, 300*time.Millisecond))
			Expect(start).NotTo(BeNil())
			Expect(time.Duration(start.TNs - sj.StartNs)).To(BeNumerically("~", 10*time.Second, 300*time.Millisecond))
			Expect(ready).NotTo(BeNil())

			By("leaving the phones' records, events and traces in the run directory")
			recs := readJSONL[map[string]any](filepath.Join(runDir, "records.jsonl"))
			Expect(recs).NotTo(BeEmpty())
			Expect(readJSONL[map[string]any](filepath.Join(runDir, "events", "ue.jsonl"))).NotTo(BeEmpty())
			Expect(runTrace(runDir)).To(ContainElement(HaveField("Node", "pcscf2")))
			Expect(filepath.Join(runDir, "logs", "ue.log")).To(BeAnExistingFile())
		})

	It("builds the report and evaluates the expectations when the phones do not stop in time, then fails the run "+
		"with the phones' error (exit status 2)", SpecTimeout(3*time.Minute), func(ctx SpecContext) {
		b := freeBlock(10)
		sc, err := scenario.Parse(fmt.Appendf(nil, `
name: e2e-stuck-phones
description: phones given no time to de-register
seed: 77
duration: 5s
%straffic: {phones: 6, call_rate: 2, hold: 300ms}
expectations:
  - {name: some calls, metric: calls.total, op: ">", value: 0}
`, smallTopology(b)))
		Expect(err).NotTo(HaveOccurred())
		runDir := filepath.Join(GinkgoT().TempDir(), "run")
		var out strings.Builder
		built := false
		fake := func(dir string, eval scenario.Evaluator) (scenario.Metrics, error) {
			built = true
			return metrics{"calls.total": 3}, nil
		}
		// 1 ms: the phones' de-registrations alone take longer, so the runner gives up waiting for them.
		o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, RunDir: runDir, Progress: 2 * time.Second,
			GracePeriod: 2 * time.Second},
			scenario.WithOutput(&out), scenario.WithReportBuilder(fake), scenario.WithPhonesStopTimeout(time.Millisecond),
			scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		GinkgoWriter.Println(out.String())
		Expect(err).To(MatchError(ContainSubstring("phones: did not stop within 1ms")))
		Expect(err).To(MatchError(ContainSubstring("the report and expectations.json were written")))
		Expect(scenario.ExitCode(o, err)).To(Equal(scenario.ExitError))
		Expect(built).To(BeTrue(), "the report was built")
		Expect(o.Passed).To(BeTrue(), "the expectations were evaluated")
		Expect(o.PhonesNotStopped).To(ContainSubstring(filepath.Join(runDir, "logs", "phones-stop-goroutines.txt")))
		Expect(filepath.Join(runDir, "logs", "phones-stop-goroutines.txt")).To(BeAnExistingFile())
		var ej scenario.Outcome
		eb, err := os.ReadFile(filepath.Join(runDir, "expectations.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(eb, &ej)).To(Succeed())
		Expect(ej.PhonesNotStopped).To(Equal(o.PhonesNotStopped))
		Expect(ej.Results).To(HaveLen(1))
		Expect(out.String()).To(ContainSubstring("building the report of the run all the same"))
	})
})
