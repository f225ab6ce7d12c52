// Package bench is issue 13's bench (docs/performance.md "The all-in-one bench"): one Run runs
// up to four kinds of step and writes one bench.md / bench.json with a table per kind and a summary against the
// issue's targets:
//
//   - proxy: the lab's proxy beside Kamailio under the same SIPp load (proxy.go, benchStep);
//   - capacity: the full lab (scenario runner, phones of internal/harness/ue) at a fixed call rate per step;
//   - registration: the full lab with N phones registering at a fixed rate, no calls;
//   - memory: the memory point (imslab memory) of N registered phones.
//
// The lab steps run generated scenarios through scenario.Run and read the run's report (summary.json, built by
// internal/analysis/report), its phones' records (records.jsonl) and, for memory, ReadMemoryPoint (memory.go). A step that
// fails or cannot run is a row with its reason; the other steps still run. cmd/imslab parses the flags into a
// Config.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/analysis/provenance"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// Kinds of bench step.
const (
	kindProxy        = "proxy"
	kindCapacity     = "capacity"
	kindRegistration = "registration"
	kindMemory       = "memory"
)

// Kinds are the kinds of bench step, in the order they run.
var Kinds = []string{kindProxy, kindCapacity, kindRegistration, kindMemory}

// Proxies are the proxies a proxy step can measure.
var Proxies = []string{benchKamailio, benchLab, benchLabBare}

// The targets (issue 13, "Capacity targets on this machine").
const (
	targetCallsPerS    = 500.0
	targetFailureShare = 0.001 // < 0.1 %
	targetSetupP95Ms   = 300.0
	targetRegsPerS     = 1000.0
	targetMemPhones    = 100000
	targetMemBytes     = 1.5e9
	targetCPURatio     = 1.5
)

// Config is what one bench run measures (imslab bench's flags).
type Config struct {
	Kinds []string
	// proxy
	Rates    []float64
	Duration time.Duration
	Steps    []string
	// capacity
	CallRates    []float64
	CallDuration time.Duration
	CallHold     time.Duration
	// registration
	RegRates    []float64
	RegDuration time.Duration
	// memory
	Phones     []int
	MemRegRate float64
	MemHold    time.Duration
	// common
	// OutDir receives bench.md, bench.json and a directory per step (default: <Repo>/runs/bench-<date-time>).
	OutDir string
	// Repo is the repository root (bench/kamailio.cfg, the node commands); RepoRoot finds it.
	Repo     string
	BinDir   string
	PortBase int
	Install  bool
	// Command is the invocation bench.json records; Argv the one its provenance records.
	Command string
	Argv    []string
}

func (c *Config) has(kind string) bool { return slices.Contains(c.Kinds, kind) }

// Validate names the first field of the configuration that cannot run.
func (c *Config) Validate() error {
	if len(c.Kinds) == 0 {
		return errors.New("bench: Kinds: none")
	}
	for _, k := range c.Kinds {
		if !slices.Contains(Kinds, k) {
			return fmt.Errorf("bench: Kinds: unknown kind %q (%s)", k, strings.Join(Kinds, ", "))
		}
	}
	for _, s := range c.Steps {
		if !slices.Contains(Proxies, s) {
			return fmt.Errorf("bench: Steps: unknown proxy %q (%s)", s, strings.Join(Proxies, ", "))
		}
	}
	for _, r := range []struct {
		name  string
		rates []float64
	}{{"Rates", c.Rates}, {"CallRates", c.CallRates}, {"RegRates", c.RegRates}, {"MemRegRate", []float64{c.MemRegRate}}} {
		for _, v := range r.rates {
			if BadRate(v) {
				return fmt.Errorf("bench: %s: %g is not a positive rate", r.name, v)
			}
		}
	}
	for _, d := range []struct {
		name, kind string
		v          time.Duration
	}{{"Duration", kindProxy, c.Duration}, {"CallDuration", kindCapacity, c.CallDuration},
		{"RegDuration", kindRegistration, c.RegDuration}, {"MemHold", kindMemory, c.MemHold}} {
		if d.v < time.Second && c.has(d.kind) {
			return fmt.Errorf("bench: %s %s: must be at least 1s", d.name, d.v)
		}
	}
	if c.CallHold < 0 {
		return fmt.Errorf("bench: CallHold %s: must not be negative", c.CallHold)
	}
	for _, n := range c.Phones {
		if n < 1 || n > topology.MaxLabSubscribers {
			return fmt.Errorf("bench: Phones: %d is not from 1 to %d", n, topology.MaxLabSubscribers)
		}
	}
	if c.PortBase != 0 && (c.PortBase < 1024 || c.PortBase > 65535-110) {
		return fmt.Errorf("bench: PortBase %d: must be 0 or from 1024 to %d", c.PortBase, 65535-110)
	}
	for _, r := range c.RegRates {
		if n := math.Ceil(r * c.RegDuration.Seconds()); n > topology.MaxLabSubscribers {
			return fmt.Errorf("bench: RegRates %g × RegDuration %s = %.0f phones: the lab provisions at most %d",
				r, c.RegDuration, n, topology.MaxLabSubscribers)
		}
	}
	return nil
}

// BadRate is true for a rate that is not a positive finite number.
func BadRate(r float64) bool { return !(r > 0) || math.IsInf(r, 0) }

// capacityStep is one step of the capacity kind: the full chain at one call rate.
type capacityStep struct {
	Step      int     `json:"step"`
	RateAsked float64 `json:"call_rate_asked"`
	Phones    int     `json:"phones"`
	DurationS float64 `json:"duration_s"`
	Calls     int     `json:"calls"` // n: calls placed (distinct Call-IDs, report.CallCounts)
	Answered  int     `json:"answered"`
	Failed    int     `json:"failed"`
	// AnsweredPerS is answered calls per second of traffic time; FailureShare failed / calls.
	AnsweredPerS float64 `json:"answered_per_s"`
	FailureShare float64 `json:"failure_share"`
	// Setup times (ms) of the report: INVITE → 180 (excluding ring time) and INVITE → 200.
	Setup180P95Ms float64        `json:"setup_180_p95_ms"`
	Setup200P95Ms float64        `json:"setup_200_p95_ms"`
	ByCause       map[string]int `json:"by_cause,omitempty"`
	// PhonesCPUShare is the CPU share of the runner's process, which runs the phones (the load generator), over
	// the traffic time (1 = one core; from its resource samples in events/lab.jsonl; 0 when not sampled).
	PhonesCPUShare float64 `json:"phones_cpu_share"`
	// NodesCPUShare is the CPU share of all the lab's nodes together over the traffic time (from the same
	// samples; 2 = both cores of a 2-core machine), and NodesCPUMsPerCall their CPU milliseconds per answered call:
	// what a full-chain call costs the whole lab (7 proxy hops, the Diameter and the HSS included), the figure
	// that per-hop work on the hot path moves.
	NodesCPUShare     float64 `json:"nodes_cpu_share"`
	NodesCPUMsPerCall float64 `json:"nodes_cpu_ms_per_call"`
	RunDir            string  `json:"run_dir"`
	LoadAvg           string  `json:"loadavg_after"`
	Error             string  `json:"error,omitempty"`
}

// registrationStep is one step of the registration kind: N phones registering at one rate.
type registrationStep struct {
	Step      int     `json:"step"`
	RateAsked float64 `json:"register_rate_asked"`
	Phones    int     `json:"phones"`
	// Attempts (n) are initial registration procedures (a retry after a failure is one more); OK succeeded.
	Attempts   int     `json:"attempts"`
	OK         int     `json:"ok"`
	Failed     int     `json:"failed"`
	Registered int     `json:"registered_phones"`
	SpanS      float64 `json:"span_s"` // first initial REGISTER sent → last successful one answered
	// RegsPerS is OK / SpanS: the registrations per second the lab completed.
	RegsPerS float64 `json:"registrations_per_s"`
	// PhonesCPUShare is the phones' process's CPU share over the span (as for capacity steps).
	PhonesCPUShare float64 `json:"phones_cpu_share"`
	// NodesCPUShare and NodesCPUMsPerReg are the lab's nodes' CPU share over the span and their CPU milliseconds
	// per successful registration (the whole digest flow through the chain, the Cx queries and the HSS's writes).
	NodesCPUShare    float64        `json:"nodes_cpu_share"`
	NodesCPUMsPerReg float64        `json:"nodes_cpu_ms_per_registration"`
	FailureShare     float64        `json:"failure_share"`
	P95Ms            float64        `json:"p95_ms"` // duration of a successful procedure (REGISTER, 401, REGISTER, 200)
	ByCause          map[string]int `json:"by_cause,omitempty"`
	RunDir           string         `json:"run_dir"`
	LoadAvg          string         `json:"loadavg_after"`
	Error            string         `json:"error,omitempty"`
}

// memoryStep is one memory point (imslab memory).
type memoryStep struct {
	Step    int          `json:"step"`
	Phones  int          `json:"phones"`
	RegRate float64      `json:"register_rate"`
	Point   *MemoryPoint `json:"point,omitempty"`
	RunDir  string       `json:"run_dir"`
	LoadAvg string       `json:"loadavg_after"`
	Error   string       `json:"error,omitempty"`
}

// targetRow is one line of the summary: a target of the issue and what this bench measured for it.
type targetRow struct {
	Measure  string `json:"measure"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	N        string `json:"n"`
	// Met is "yes", "no" or "not measured".
	Met string `json:"met"`
}

// runLabKinds runs the capacity, registration and memory steps the configuration asks for.
func runLabKinds(ctx context.Context, c *Config, root, dir string, rep *benchReport, out, errOut io.Writer) {
	if !c.has(kindCapacity) && !c.has(kindRegistration) && !c.has(kindMemory) {
		return
	}
	binDir, buildErr := c.BinDir, error(nil)
	if binDir != "" {
		buildErr = checkBinDir(binDir)
	} else {
		fmt.Fprintln(out, "bench: building the node binaries once for every lab step")
		binDir, buildErr = buildLabBinaries(ctx, root, filepath.Join(dir, "build"))
	}
	log := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelError}))
	step := len(rep.Steps) // lab steps are numbered on from the proxy steps
	labRun := func(name string, sc *scenario.Scenario) (string, error) {
		runDir := filepath.Join(dir, fmt.Sprintf("lab%02d-%s", step, name))
		if buildErr != nil {
			return runDir, fmt.Errorf("node binaries: %w", buildErr)
		}
		if ctx.Err() != nil {
			return runDir, ctx.Err()
		}
		console, err := os.Create(runDir + ".txt")
		if err != nil {
			return runDir, err
		}
		defer console.Close()
		o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, RunDir: runDir, KeepGoing: true, RepoDir: root,
			BinDir: binDir, Progress: 10 * time.Second}, scenario.WithLogger(log), scenario.WithOutput(console),
			scenario.WithReportBuilder(buildReport))
		if err != nil {
			return runDir, fmt.Errorf("%w (console %s)", err, console.Name())
		}
		return o.RunDir, nil
	}
	if c.has(kindCapacity) {
		for _, r := range c.CallRates {
			step++
			s := capacityStep{RateAsked: r, Phones: capacityPhones(r, c.CallHold), DurationS: c.CallDuration.Seconds()}
			sc, err := benchScenario(fmt.Sprintf("capacity-%g", r), c.PortBase, s.Phones, min(200, max(50, float64(s.Phones)/10)),
				r, c.CallHold, c.CallDuration, false)
			if err == nil {
				s.RunDir, err = labRun(fmt.Sprintf("capacity-%g", r), sc)
				// a run that ended with an error may still have a report: its figures go beside the error
				if rerr := readCapacity(&s); err == nil {
					err = rerr
				}
			}
			if err != nil {
				s.Error = err.Error()
			}
			s.Step, s.LoadAvg = step, loadAvg()
			rep.Capacity = append(rep.Capacity, s)
			fmt.Fprintf(out, "capacity %g calls/s: %d calls, %d answered (%.1f/s), %.2f %% failed, setup p95 %.0f ms (180) %s\n",
				r, s.Calls, s.Answered, s.AnsweredPerS, s.FailureShare*100, s.Setup180P95Ms, s.Error)
		}
	}
	if c.has(kindRegistration) {
		for _, r := range c.RegRates {
			step++
			s := registrationStep{RateAsked: r, Phones: int(math.Ceil(r * c.RegDuration.Seconds()))}
			sc, err := benchScenario(fmt.Sprintf("registration-%g", r), c.PortBase, s.Phones, r, 0, 0, 5*time.Second, true)
			if err == nil {
				s.RunDir, err = labRun(fmt.Sprintf("registration-%g", r), sc)
				// registrations that did not all succeed in time end the run with an error; the phones' records
				// still say how far they got
				if rerr := readRegistrations(&s); err == nil {
					err = rerr
				}
			}
			if err != nil {
				s.Error = err.Error()
			}
			s.Step, s.LoadAvg = step, loadAvg()
			rep.Registration = append(rep.Registration, s)
			fmt.Fprintf(out, "registration %g/s: %d phones, %d ok of %d attempts, %.1f registrations/s %s\n",
				r, s.Phones, s.OK, s.Attempts, s.RegsPerS, s.Error)
		}
	}
	if c.has(kindMemory) {
		for _, n := range c.Phones {
			step++
			s := memoryStep{Phones: n, RegRate: c.MemRegRate}
			sc, err := benchScenario(fmt.Sprintf("memory-%d", n), c.PortBase, n, c.MemRegRate, 0, 0, c.MemHold, true)
			if err == nil {
				s.RunDir, err = labRun(fmt.Sprintf("memory-%d", n), sc)
			}
			if err == nil {
				s.Point, err = ReadMemoryPoint(s.RunDir)
			}
			if err != nil {
				s.Error = err.Error()
			}
			s.Step, s.LoadAvg = step, loadAvg()
			rep.Memory = append(rep.Memory, s)
			if s.Point != nil {
				fmt.Fprintf(out, "memory %d phones: all nodes %s MB at t0, peak %s MB\n", n, mb(s.Point.NodesT0Bytes), mb(s.Point.NodesPeakBytes))
			} else {
				fmt.Fprintf(out, "memory %d phones: %s\n", n, s.Error)
			}
		}
	}
}

// benchFailures counts the steps that failed or could not run (the proxy kind skipped as a whole counts one).
func benchFailures(rep *benchReport) int {
	n := 0
	if rep.ProxyError != "" {
		n++
	}
	for _, s := range rep.Steps {
		if s.Error != "" {
			n++
		}
	}
	for _, s := range rep.Capacity {
		if s.Error != "" {
			n++
		}
	}
	for _, s := range rep.Registration {
		if s.Error != "" {
			n++
		}
	}
	for _, s := range rep.Memory {
		if s.Error != "" {
			n++
		}
	}
	return n
}

// buildLabBinaries builds the nodes' binaries once (lab.Build, into the build cache) for every lab step.
func buildLabBinaries(ctx context.Context, root, dir string) (string, error) {
	l, err := lab.New(lab.Config{Topology: topology.Default(), RunDir: dir, RepoDir: root})
	if err != nil {
		return "", err
	}
	defer l.Close()
	if err := l.Build(ctx); err != nil {
		return "", err
	}
	return l.BinDir(), nil
}

// checkBinDir fails when a prebuilt binary directory lacks a node of the default lab (the lab would otherwise
// start without it and the step wait for registrations that cannot happen).
func checkBinDir(dir string) error {
	for _, n := range topology.Default().Nodes() {
		st, err := os.Stat(filepath.Join(dir, string(n.Kind)))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("--bin-dir %s: no executable %s (build the nodes with go build -o %s ./cmd/%s …)", dir, n.Kind, dir, n.Kind)
		}
	}
	return nil
}

// capacityPhones is enough phones for rate calls/s: each call keeps a caller and a callee busy for its setup,
// ring and hold; four times what that needs on average, and at least 20.
func capacityPhones(rate float64, hold time.Duration) int {
	busy := hold.Seconds() + 0.5
	return max(20, int(math.Ceil(rate*busy*2*4)))
}

// benchScenario is the scenario of one lab step: the default lab on ports from portBase (none when 0), phones
// registering at regRate, calls at callRate for duration after t0. A registration period of an hour keeps
// refreshes out of the step; noTrace switches the message trace off (registration and memory steps).
func benchScenario(name string, portBase, phones int, regRate, callRate float64, hold, duration time.Duration, noTrace bool) (*scenario.Scenario, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bench-%s\ndescription: imslab bench step %s\nduration: %s\ntopology:\n", name, name, duration)
	if portBase > 0 {
		p := func(o int) int { return portBase + o }
		fmt.Fprintf(&b, "  dns: {listen: 127.0.0.1:%d}\n  hss: {diameter_port: %d, http_port: %d}\n  bac: {port: %d}\n"+
			"  icscf: {port: %d}\n  pools: {pcscf: {base_port: %d}, scscf: {base_port: %d}}\n",
			p(53), p(68), p(90), p(60), p(70), p(61), p(81))
	}
	fmt.Fprintf(&b, "  registration: {expires: 3600s}\n  trace: {off: %t}\n", noTrace)
	fmt.Fprintf(&b, "traffic:\n  phones: %d\n  register_rate: %g\n  call_rate: %g\n", phones, regRate, callRate)
	if callRate > 0 {
		fmt.Fprintf(&b, "  hold: %s\n", hold)
	}
	sc, err := scenario.Parse([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("generated scenario: %w", err)
	}
	return sc, nil
}

// readCapacity fills a capacity step from the run's report (summary.json).
func readCapacity(s *capacityStep) error {
	sum, err := readSummary(s.RunDir)
	if err != nil {
		return err
	}
	s.Calls, s.Answered, s.Failed, s.ByCause = sum.Calls.Total, sum.Calls.Answered, sum.Calls.Failed, sum.Calls.ByCause
	if sum.DurationS > 0 {
		s.DurationS = sum.DurationS
	}
	if s.DurationS > 0 {
		s.AnsweredPerS = float64(s.Answered) / s.DurationS
	}
	if s.Calls > 0 {
		s.FailureShare = float64(s.Failed) / float64(s.Calls)
	}
	s.Setup180P95Ms, s.Setup200P95Ms = sum.SetupLatencyMs.Normal.P95180, sum.SetupLatencyMs.Normal.P95
	from, to := sum.StartNs, sum.StartNs+int64(s.DurationS*1e9)
	s.PhonesCPUShare = phonesCPUShare(s.RunDir, from, to)
	if cpu, wall := nodesCPU(s.RunDir, from, to); wall > 0 {
		s.NodesCPUShare = cpu / wall
		if s.Answered > 0 {
			s.NodesCPUMsPerCall = cpu * 1000 / float64(s.Answered)
		}
	}
	if s.Calls == 0 {
		return errors.New("no calls in the run's report")
	}
	return nil
}

func readSummary(dir string) (*report.Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var s report.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("report %s/summary.json: %w", dir, err)
	}
	return &s, nil
}

// readRegistrations fills a registration step from the phones' records: initial registration procedures only.
func readRegistrations(s *registrationStep) error {
	f, err := os.Open(filepath.Join(s.RunDir, "records.jsonl"))
	if err != nil {
		return err
	}
	defer f.Close()
	var first, last int64
	var durs []float64
	phones := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			Type       string  `json:"type"`
			Kind       string  `json:"kind"`
			IMPU       string  `json:"impu"`
			Result     string  `json:"result"`
			TNs        int64   `json:"t_ns"`
			DurationMs float64 `json:"duration_ms"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Type != "register" || r.Kind != "initial" {
			continue
		}
		s.Attempts++
		if first == 0 || r.TNs < first {
			first = r.TNs
		}
		if r.Result != "ok" {
			s.Failed++
			if s.ByCause == nil {
				s.ByCause = map[string]int{}
			}
			s.ByCause[r.Result]++
			continue
		}
		s.OK++
		phones[r.IMPU] = true
		durs = append(durs, r.DurationMs)
		last = max(last, r.TNs+int64(r.DurationMs*1e6))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s/records.jsonl: %w", s.RunDir, err)
	}
	s.Registered = len(phones)
	if s.Attempts > 0 {
		s.FailureShare = float64(s.Failed) / float64(s.Attempts)
	}
	if s.OK == 0 {
		return errors.New("no successful registration in the phones' records")
	}
	s.SpanS = float64(last-first) / 1e9
	if s.SpanS > 0 {
		s.RegsPerS = float64(s.OK) / s.SpanS
	}
	s.P95Ms = percentile(durs, 0.95)
	s.PhonesCPUShare = phonesCPUShare(s.RunDir, first, last)
	if cpu, wall := nodesCPU(s.RunDir, first, last); wall > 0 {
		s.NodesCPUShare = cpu / wall
		if s.OK > 0 {
			s.NodesCPUMsPerReg = cpu * 1000 / float64(s.OK)
		}
	}
	return nil
}

// cpuSpan is one process's first and last resource sample within a window: instants (Unix ns) and CPU seconds.
type cpuSpan struct {
	t0, t1 int64
	c0, c1 float64
}

// cpuSpans reads the lab's resource samples (events/lab.jsonl) between two instants (Unix ns) and returns each
// sampled target's first and last sample in the window (none when the file cannot be read).
func cpuSpans(runDir string, from, to int64) map[string]*cpuSpan {
	spans := map[string]*cpuSpan{}
	f, err := report.OpenEvents(runDir, "lab")
	if err != nil {
		return spans
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// The resource samples (obs.Resource) in the window; any other line is passed over.
		env, ev, err := obs.DecodeEvent(sc.Bytes())
		e, ok := ev.(obs.Resource)
		if err != nil || !ok || e.Target == "" || env.TNs < from || env.TNs > to {
			continue
		}
		sp := spans[e.Target]
		if sp == nil {
			sp = &cpuSpan{t0: env.TNs, c0: e.CPUS}
			spans[e.Target] = sp
		}
		sp.t1, sp.c1 = env.TNs, e.CPUS
	}
	return spans
}

// nodesCPU is the CPU seconds all the lab's nodes used between two instants (Unix ns), each node's from its first
// to its last resource sample in the window, and the longest such span of a node (seconds). The phones' process
// is left out. A node restarted in the window would count from its new process's start: the capacity steps
// restart none.
func nodesCPU(runDir string, from, to int64) (cpuS, wallS float64) {
	for target, sp := range cpuSpans(runDir, from, to) {
		if target == scenario.PhonesTarget || sp.t1 <= sp.t0 {
			continue
		}
		cpuS += sp.c1 - sp.c0
		wallS = max(wallS, float64(sp.t1-sp.t0)/1e9)
	}
	return cpuS, wallS
}

// phonesCPUShare is the CPU share of the phones' process (target "phones" of the lab's resource samples) between
// two instants (Unix ns): its CPU seconds between the first and last sample in the window over their distance.
// It is 0 when the window holds fewer than two samples (the samples come once a second).
func phonesCPUShare(runDir string, from, to int64) float64 {
	sp := cpuSpans(runDir, from, to)[scenario.PhonesTarget]
	if sp == nil || sp.t1 <= sp.t0 {
		return 0
	}
	return (sp.c1 - sp.c0) / (float64(sp.t1-sp.t0) / 1e9)
}

// benchTargets is the summary: each target of the issue beside what this run measured.
func benchTargets(rep *benchReport) []targetRow {
	var rows []targetRow
	// Full chain: the highest answered rate of a step within every condition.
	row := targetRow{Measure: "full-chain calls/s (< 0.1 % failed, setup p95 to 180 ≤ 300 ms)",
		Target: fmt.Sprintf("≥ %g", targetCallsPerS), Met: "not measured"}
	best, n, ran := -1.0, 0, false
	for _, s := range rep.Capacity {
		if s.Error != "" {
			continue
		}
		ran = true
		if s.FailureShare < targetFailureShare && s.Setup180P95Ms <= targetSetupP95Ms && s.AnsweredPerS > best {
			best, n = s.AnsweredPerS, s.Calls
		}
	}
	if ran {
		row.Met, row.Measured = "no", "no step within the conditions"
		if best >= 0 {
			row.Measured, row.N = fmt.Sprintf("%.1f", best), fmt.Sprintf("%d calls", n)
			if best >= targetCallsPerS {
				row.Met = "yes"
			}
		}
	}
	rows = append(rows, row)

	row = targetRow{Measure: "registrations/s (< 0.1 % failed)", Target: fmt.Sprintf("≥ %g", targetRegsPerS), Met: "not measured"}
	best, n, ran = -1, 0, false
	for _, s := range rep.Registration {
		if s.Error != "" {
			continue
		}
		ran = true
		if s.FailureShare < targetFailureShare && s.RegsPerS > best {
			best, n = s.RegsPerS, s.Attempts
		}
	}
	if ran {
		row.Met, row.Measured = "no", "no step within the conditions"
		if best >= 0 {
			row.Measured, row.N = fmt.Sprintf("%.1f", best), fmt.Sprintf("%d registrations", n)
			if best >= targetRegsPerS {
				row.Met = "yes"
			}
		}
	}
	rows = append(rows, row)

	// Memory: the point at 100k phones when there is one, else a straight line through the two largest points
	// (the memory per extra phone, as imslab table memory-marginal; marked as extrapolated).
	row = targetRow{Measure: fmt.Sprintf("memory of all nodes, %dk registered phones (sum of peaks after t0)", targetMemPhones/1000),
		Target: fmt.Sprintf("≤ %.1f GB", targetMemBytes/1e9), Met: "not measured"}
	var points []*memoryStep
	for i := range rep.Memory {
		if s := &rep.Memory[i]; s.Point != nil && s.Point.RegisteredEnd > 0 {
			points = append(points, s)
		}
	}
	slices.SortStableFunc(points, func(a, b *memoryStep) int { return a.Point.RegisteredEnd - b.Point.RegisteredEnd })
	var at100k *memoryStep
	for _, s := range points {
		if s.Phones == targetMemPhones {
			at100k = s
		}
	}
	switch {
	case at100k != nil:
		p := at100k.Point
		row.Measured = fmt.Sprintf("%.2f GB", float64(p.NodesPeakBytes)/1e9)
		row.N = fmt.Sprintf("1 run, %d of %d phones registered", p.RegisteredEnd, p.Phones)
		row.Met = "no"
		if float64(p.NodesPeakBytes) <= targetMemBytes {
			row.Met = "yes"
		}
	case len(points) >= 2 && points[len(points)-1].Point.RegisteredEnd > points[len(points)-2].Point.RegisteredEnd:
		a, b := points[len(points)-2].Point, points[len(points)-1].Point
		per := float64(b.NodesPeakBytes-a.NodesPeakBytes) / float64(b.RegisteredEnd-a.RegisteredEnd)
		v := float64(b.NodesPeakBytes) + per*float64(targetMemPhones-b.RegisteredEnd)
		row.Measured = fmt.Sprintf("%.2f GB on a straight line through %d and %d phones (%.0f B per extra phone)",
			v/1e9, a.RegisteredEnd, b.RegisteredEnd, per)
		row.N = "2 runs, 1 per point"
		row.Met = "no (extrapolated)"
		if v <= targetMemBytes {
			row.Met = "yes (extrapolated)"
		}
	case len(points) == 1:
		p := points[0].Point
		row.Measured = fmt.Sprintf("%.2f GB at %d phones; no %dk point and no second point to extrapolate from",
			float64(p.NodesPeakBytes)/1e9, p.RegisteredEnd, targetMemPhones/1000)
		row.N = "1 run"
	}
	rows = append(rows, row)

	row = targetRow{Measure: "CPU per call per proxy hop, lab / Kamailio (median of pairs)",
		Target: fmt.Sprintf("≤ %g×", targetCPURatio), Met: "not measured"}
	pairs := 0
	for _, r := range rep.ByRate {
		pairs += r.Pairs
	}
	if pairs > 0 {
		row.Measured, row.N = fmt.Sprintf("%.2f×", rep.MedianRatio), fmt.Sprintf("%d pairs", pairs)
		row.Met = "no"
		if rep.MedianRatio <= targetCPURatio {
			row.Met = "yes"
		}
	}
	return append(rows, row)
}

// benchLabMarkdown renders the lab kinds' tables and the summary.
func benchLabMarkdown(b *strings.Builder, rep *benchReport) {
	prov := rep.Provenance.Short() + fmt.Sprintf(", %d CPUs", rep.Provenance.CPUs)
	errCell := func(e string) string {
		return strings.ReplaceAll(strings.ReplaceAll(e, "|", "/"), "\n", " ")
	}
	if len(rep.Capacity) > 0 {
		b.WriteString("\n## Capacity: full-chain calls/s\n\n")
		b.WriteString("| step | rate asked (calls/s) | phones | traffic (s) | n (calls) | answered | failed | answered/s | failed % | setup p95 to 180 (ms) | setup p95 to 200 (ms) | phones' CPU share | nodes' CPU share | nodes' CPU ms per answered call | load after | provenance | error |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range rep.Capacity {
			if s.Error != "" && s.Calls == 0 {
				fmt.Fprintf(b, "| %d | %g | %d | %.0f |  |  |  |  |  |  |  |  |  |  | %s | %s | %s |\n", s.Step, s.RateAsked, s.Phones,
					s.DurationS, s.LoadAvg, prov, errCell(s.Error))
				continue
			}
			fmt.Fprintf(b, "| %d | %g | %d | %.0f | %d | %d | %d | %.1f | %.2f | %.0f | %.0f | %.0f %% | %.0f %% | %.2f | %s | %s | %s |\n", s.Step,
				s.RateAsked, s.Phones, s.DurationS, s.Calls, s.Answered, s.Failed, s.AnsweredPerS, s.FailureShare*100,
				s.Setup180P95Ms, s.Setup200P95Ms, s.PhonesCPUShare*100, s.NodesCPUShare*100, s.NodesCPUMsPerCall, s.LoadAvg,
				prov, errCell(s.Error))
		}
	}
	if len(rep.Registration) > 0 {
		b.WriteString("\n## Registration: registrations/s\n\n")
		b.WriteString("| step | rate asked (/s) | phones | n (attempts) | ok | failed | registered phones | span (s) | registrations/s | failed % | p95 (ms) | phones' CPU share | nodes' CPU share | nodes' CPU ms per registration | load after | provenance | error |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range rep.Registration {
			if s.Error != "" && s.Attempts == 0 {
				fmt.Fprintf(b, "| %d | %g | %d |  |  |  |  |  |  |  |  |  |  |  | %s | %s | %s |\n", s.Step, s.RateAsked, s.Phones,
					s.LoadAvg, prov, errCell(s.Error))
				continue
			}
			fmt.Fprintf(b, "| %d | %g | %d | %d | %d | %d | %d | %.1f | %.1f | %.2f | %.0f | %.0f %% | %.0f %% | %.2f | %s | %s | %s |\n", s.Step,
				s.RateAsked, s.Phones, s.Attempts, s.OK, s.Failed, s.Registered, s.SpanS, s.RegsPerS, s.FailureShare*100, s.P95Ms,
				s.PhonesCPUShare*100, s.NodesCPUShare*100, s.NodesCPUMsPerReg, s.LoadAvg, prov, errCell(s.Error))
		}
	}
	if len(rep.Memory) > 0 {
		b.WriteString("\n## Memory: registered phones → resident memory of all nodes (MB = 10⁶ bytes)\n\n")
		b.WriteString("| step | phones | registered at t0 / by the end | n (runs) | all nodes before registration | at t0 | sum of peaks after t0 | per registered phone (B) | phones' process peak | load after | provenance | error |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range rep.Memory {
			if p := s.Point; p != nil {
				pp := ""
				if p.PhonesProcess != nil {
					pp = mb(p.PhonesProcess.PeakBytes)
				}
				fmt.Fprintf(b, "| %d | %d | %d / %d | 1 | %s | %s | %s | %.0f | %s | %s | %s | %s |\n", s.Step, s.Phones, p.RegisteredT0,
					p.RegisteredEnd, mb(p.NodesFirstBytes), mb(p.NodesT0Bytes), mb(p.NodesPeakBytes), p.PerPhoneBytes, pp, s.LoadAvg,
					prov, errCell(s.Error))
				continue
			}
			fmt.Fprintf(b, "| %d | %d |  | 0 |  |  |  |  |  | %s | %s | %s |\n", s.Step, s.Phones, s.LoadAvg, prov, errCell(s.Error))
		}
	}
	b.WriteString("\n## Summary: the issue's targets\n\n| measure | target | measured | n | met |\n|---|---|---|---|---|\n")
	for _, r := range rep.Summary {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", r.Measure, r.Target, r.Measured, r.N, r.Met)
	}
}

// provenanceOf is the provenance of this bench (the repository at root, this process's argv).
func provenanceOf(root string, argv []string) provenance.Info { return provenance.Collect(root, argv) }

// buildReport writes a lab step's report (internal/analysis/report) and returns its summary's metrics.
func buildReport(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
	s, err := report.Build(runDir, scenario.ReportChecks(eval))
	if err != nil {
		return nil, err
	}
	return s, nil
}
