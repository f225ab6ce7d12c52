package scenario_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/testutil"
)

// The compose backend runs the shipped pcscf-kill scenario (shortened like the local ones) against a lab of
// containers: the same expectations must hold, the run directory has the same shape, and the capture of the lab
// network decodes.
var _ = Describe("the compose backend", Label("e2e", "docker"), func() {
	It("runs pcscf-kill against containers and meets the same expectations as the local run", func(ctx SpecContext) {
		testutil.RequireDocker(ctx)
		wd, err := os.Getwd()
		Expect(err).NotTo(HaveOccurred())
		repo, err := lab.FindRepo(wd)
		Expect(err).NotTo(HaveOccurred())
		file := filepath.Join(repo, "scenarios", "pcscf-kill.yaml")
		sc, err := scenario.Load(file)
		Expect(err).NotTo(HaveOccurred())
		shorten(sc, freeBlock(11)) // the ports do not matter: the compose lab lays the topology out on its own network
		// One allowance: a call set up through the containers takes longer than through local processes (setup
		// to 200 OK p95 0.78 s against 0.12 s in one 60 s run each, docs/results/health-timeouts),
		// and the interruption of a user is the INVITE no-answer timer (2 s) plus the setup of the retried call.
		// The local run keeps the shipped 3 s.
		for i, e := range sc.Expectations {
			if e.Metric == "mo.interruption_s.p95" || e.Metric == "mt.interruption_s.p95" {
				v := 4.0
				sc.Expectations[i].Value = &v
			}
		}

		dir := filepath.Join(GinkgoT().TempDir(), "run")
		var sum *report.Summary
		var out strings.Builder
		o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, ScenarioFile: file, RunDir: dir, RepoDir: repo,
			Backend: scenario.BackendCompose, BuildImage: true, Progress: 4 * time.Second, GracePeriod: 2 * time.Second},
			scenario.WithOutput(&out),
			scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
			scenario.WithReportBuilder(func(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
				s, err := report.Build(runDir, scenario.ReportChecks(eval))
				sum = s
				return s, err
			}))
		GinkgoWriter.Println(out.String())
		Expect(err).NotTo(HaveOccurred(), out.String())
		Expect(o.Passed).To(BeTrue(), failedExpectations(o)+"\n"+out.String())
		Expect(out.String()).To(ContainSubstring("compose backend"))

		// The same run directory as the local backend.
		for _, f := range []string{"summary.json", "calls.csv", "events.jsonl", "report.md", "report.html",
			"trace.pcapng.gz", "scenario.json", "records.jsonl", "logs/pcscf2.log"} {
			Expect(filepath.Join(dir, f)).To(BeAnExistingFile())
		}
		// One copy of the events and of the trace: the per-node files are merged away.
		Expect(filepath.Join(dir, "events", "lab.jsonl")).NotTo(BeAnExistingFile())
		Expect(filepath.Join(dir, "trace", "bac.001.pcapng")).NotTo(BeAnExistingFile())
		b, err := os.ReadFile(filepath.Join(dir, "scenario.json"))
		Expect(err).NotTo(HaveOccurred())
		var sj struct{ Backend string }
		Expect(json.Unmarshal(b, &sj)).To(Succeed())
		Expect(sj.Backend).To(Equal("compose"))
		Expect(sum.AffectedUsers).To(BeNumerically(">", 0))
		Expect(sum.TimeToDetectS).To(HaveKey("bac"))
		GinkgoWriter.Printf("compose backend: detect %v, MO interruption %+v, MT interruption %+v\n",
			sum.TimeToDetectS, sum.MO.InterruptionS, sum.MT.InterruptionS)

		// The capture of the lab network has the takeover: an INVITE sent with restore=1 and an LIR with
		// User-Authorization-Type 2 (SPEC §4.1), between containers.
		capture := filepath.Join(dir, "capture.pcap")
		Expect(capture).To(BeAnExistingFile())
		if _, err := exec.LookPath("tshark"); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_TSHARK") != "" {
				Fail("tshark not found and IMSLAB_REQUIRE_TSHARK is set")
			}
			Skip("tshark not found: the capture is not decoded")
		}
		decoded := func(filter string) string {
			out, err := exec.CommandContext(ctx, "tshark", "-n", "-r", capture, "-Y", filter, "-c", "3").CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			return string(out)
		}
		Expect(decoded(`sip.Method == "INVITE" && sip.r-uri contains "restore=1" || sip.Route contains "restore=1"`)).NotTo(BeEmpty())
		Expect(decoded("diameter.cmd.code == 302 && diameter.User-Authorization-Type == 2")).NotTo(BeEmpty())
	}, NodeTimeout(6*time.Minute))

	It("runs partition-bac-pcscf against containers: the partition entered into pcscf1's container, the same expectations",
		Label("full"), func(ctx SpecContext) {
			dir, _ := runCompose(ctx, "partition-bac-pcscf", func(sc *scenario.Scenario) { shorten(sc, freeBlock(12)) })

			// Seen by the BAC, not the injector: its probes to pcscf1 timed out while pcscf1 kept running.
			b, err := readNodeEvents(filepath.Join(dir, "events", "bac.jsonl"))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).To(MatchRegexp(`"peer":"pcscf1[^"]*","reason":"(probe_)?timeout"[^\n]*"state":"down"|"state":"down"[^\n]*pcscf1`))
			// One retry: its timing expectations (p95 interruption <= 3 s, 99 % of calls after detection) failed
			// once in CI on a busy machine (which one was not printed; failedExpectations now leads the message),
			// and passed in every local run. A second failure is a failure.
		}, NodeTimeout(6*time.Minute))

	It("runs wan-latency against containers: the site link's delay and loss entered into every container's namespace",
		Label("full"), func(ctx SpecContext) {
			dir, sc := runCompose(ctx, "wan-latency", func(sc *scenario.Scenario) {
				// 30 s, the kill at 10 s, as the namespace spec, and a quarter of its load: 20 phones, a probe call each
				// every 2 s. With 40 phones every second, on this 2-core machine, the containers, the engine's health
				// checks, the race-built phones and the twelve NFQUEUE delay lines together left the BAC behind: its
				// core socket's receive buffer (208 KiB) overflowed (hundreds of drops in `ss -uam`), calls failed more
				// and more after 20 s, with or without the kill; the same run without the link passed (docs/compose.md).
				sc.Duration, sc.Seed = 30*time.Second, 42
				sc.Faults[0].At = 10 * time.Second
				sc.Traffic.Phones, sc.Traffic.ProbeInterval = 20, 2*time.Second
			})

			By("the lab applied the link in every container: 8 north nodes and 4 south ones, a delay and a loss each")
			var links map[string]any
			for _, e := range readJSONL[map[string]any](filepath.Join(dir, "events", "lab.jsonl")) {
				Expect(e["kind"]).NotTo(Equal("links_not_applied"), "%v", e)
				if e["kind"] == "links" {
					links = e
				}
			}
			Expect(links).NotTo(BeNil(), "a links event")
			Expect(links["faults"]).To(BeEquivalentTo(2 * (len(sc.Topology.SiteNodes("north")) + len(sc.Topology.SiteNodes("south")))))

			By("seen by the BAC, not the injector: its probes to south's P-CSCFs take 2 × 20 ms (± 20 %) longer")
			extra := siteRTTExtra(dir)
			Expect(extra).To(BeNumerically(">=", 32), "the site link adds 20 ms each way to a probe's round trip")
			// As the namespace spec: the delay line's lateness on a loaded machine (one CI run: 54.2 ms).
			Expect(extra).To(BeNumerically("<=", 64), "the site link adds 20 ms each way to a probe's round trip")
		}, NodeTimeout(8*time.Minute))

	It("runs gray-pcscf against containers: pcscf1's container given 2 % of a CPU through the engine, read back from the kernel",
		Label("full"), func(ctx SpecContext) {
			// The starvation is seen by the phones (the shipped expectations: affected users' setup p95 at least
			// twice the others', 95 % of their calls still answered) and the quota by the kernel.
			dir, _ := runCompose(ctx, "gray-pcscf", func(sc *scenario.Scenario) {
				shorten(sc, freeBlock(11))
				// A quarter of the shipped load (15 phones, a probe call each per second): at 30 phones every 0.5 s
				// the containers on this 2-core machine set calls up in 3.4 s at p95 with no fault at all, so the
				// starvation's slower setups could not stand out (the first expectation compares the two).
				sc.Traffic.Phones, sc.Traffic.ProbeInterval = 15, time.Second
			})
			var quota []int
			removed := false
			for _, e := range readJSONL[map[string]any](filepath.Join(dir, "events", "lab.jsonl")) {
				switch e["kind"] {
				case "cpu_limit":
					quota = append(quota, int(e["cpu_cfs_quota_us"].(float64)), int(e["cpu_cfs_period_us"].(float64)))
				case "cpu_limit_removed":
					removed = true
				}
			}
			Expect(quota).To(Equal([]int{2000, 100000}), "2 %% of the CFS period, read back from the container's cgroup")
			Expect(removed).To(BeTrue(), "healed: the kernel shows no quota")
		}, NodeTimeout(6*time.Minute))
})

// runCompose runs scenarios/<name>.yaml, changed by edit, against a compose lab of containers, and expects it to
// pass its expectations. It returns the run directory and the scenario as run.
func runCompose(ctx context.Context, name string, edit func(*scenario.Scenario)) (string, *scenario.Scenario) {
	GinkgoHelper()
	testutil.RequireDocker(ctx)
	wd, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	repo, err := lab.FindRepo(wd)
	Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(repo, "scenarios", name+".yaml")
	sc, err := scenario.Load(file)
	Expect(err).NotTo(HaveOccurred())
	edit(sc)
	Expect(sc.Validate()).To(Succeed())
	// As the shipped specs: the run directory (the nodes' logs, the capture) is kept when the spec fails.
	top, err := os.MkdirTemp("", "compose-"+name+"-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			AddReportEntry("run directory (kept)", filepath.Join(top, "run"))
			return
		}
		Expect(os.RemoveAll(top)).To(Succeed())
	})
	dir := filepath.Join(top, "run")
	var out strings.Builder
	o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, ScenarioFile: file, RunDir: dir, RepoDir: repo,
		Backend: scenario.BackendCompose, Progress: 5 * time.Second, GracePeriod: 2 * time.Second},
		scenario.WithOutput(&out),
		scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		scenario.WithReportBuilder(func(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
			return report.Build(runDir, scenario.ReportChecks(eval))
		}))
	GinkgoWriter.Println(out.String())
	Expect(err).NotTo(HaveOccurred(), out.String())
	Expect(o.Passed).To(BeTrue(), failedExpectations(o)+"\n"+out.String())
	// As root the lab checks readiness itself, not the engine's healthchecks (docs/compose.md): every node's
	// node_ready says so, and the generated project has no healthcheck.
	if os.Geteuid() == 0 && os.Getenv("IMSLAB_COMPOSE_SELF_READY") != "0" {
		ready := 0
		for _, e := range readJSONL[map[string]any](filepath.Join(dir, "events", "lab.jsonl")) {
			if e["kind"] == "node_ready" {
				ready++
				Expect(e["ready_by"]).To(Equal("lab probe"), "%v", e)
			}
		}
		Expect(ready).To(BeNumerically(">=", len(sc.Topology.Nodes())), "a node_ready per node")
		b, err := os.ReadFile(filepath.Join(dir, "compose", "docker-compose.yml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).NotTo(ContainSubstring("healthcheck:"))
	}
	return dir, sc
}

// failedExpectations lists the expectations a run missed, one per line, for the first line of a failure message.
func failedExpectations(o *scenario.Outcome) string {
	var b strings.Builder
	for _, r := range o.Results {
		if r.OK {
			continue
		}
		fmt.Fprintf(&b, "missed: %q (%s %s", r.Name, r.Metric, r.Op)
		if r.Want != nil {
			fmt.Fprintf(&b, " %g", *r.Want)
		}
		if r.Actual != nil {
			fmt.Fprintf(&b, "; actual %g", *r.Actual)
		}
		if r.Reason != "" {
			fmt.Fprintf(&b, "; %s", r.Reason)
		}
		b.WriteString(")\n")
	}
	return b.String()
}
