package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/imslab/quasipool/internal/analysis/provenance"
	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// Exit codes of a run (cmd/imslab run).
const (
	ExitPassed = 0 // every expectation holds
	ExitFailed = 1 // at least one expectation does not hold
	ExitError  = 2 // the run could not be carried out (bad file, lab did not start, interrupted, …)
)

// ExitCode maps the outcome of Run to the exit status of a run.
func ExitCode(o *Outcome, err error) int {
	switch {
	case err != nil || o == nil:
		return ExitError
	case !o.Passed:
		return ExitFailed
	}
	return ExitPassed
}

// RunConfig configures a run of a scenario.
type RunConfig struct {
	// Scenario is the scenario to run (required, valid).
	Scenario *Scenario
	// ScenarioFile is the file the scenario came from (recorded in scenario.json; optional).
	ScenarioFile string
	// RunDir receives everything of the run (default runs/<name>-<date-time>).
	RunDir string
	// Seed overrides the scenario's seed when not 0.
	Seed int64
	// KeepGoing lets a run go on when a fault cannot be injected or fixed, or when some phones fail their
	// initial registration; without it either ends the run with an error.
	KeepGoing bool
	// RepoDir and BinDir are passed to the lab (lab.Config).
	RepoDir, BinDir string
	// ReadyTimeout and GracePeriod are passed to the lab (0 = the lab's defaults).
	ReadyTimeout, GracePeriod time.Duration
	// Backend is where the lab runs: BackendLocal (default: local processes, internal/harness/lab) or BackendCompose
	// (Docker containers of one compose project, internal/harness/compose).
	Backend string
	// Image is the compose backend's lab image ("" = compose.DefaultImage); BuildImage builds it first even
	// when the engine has it (it is built anyway when missing).
	Image      string
	BuildImage bool
	// Netns (local backend) runs every node in its own network namespace with its own address (lab.Config.Netns);
	// it needs root on Linux and the run stops with an error saying so otherwise.
	Netns bool
	// Progress is the interval of the progress line (default 5s).
	Progress time.Duration
	// RegisterTimeout bounds the initial registrations (default: phones/register_rate + 60s).
	RegisterTimeout time.Duration
	// PortOffset (local backend) is added to every port the lab listens on (topology.ShiftPorts), so that two
	// labs run side by side; 0 = the topology's own ports. The compose backend ignores it (each container has its
	// own address).
	PortOffset int
}

// Validate checks the configuration and names the bad field.
func (c *RunConfig) Validate() error {
	if c.Scenario == nil {
		return errors.New("run config: scenario: missing")
	}
	if err := c.Scenario.Validate(); err != nil {
		return fmt.Errorf("run config: %w", err)
	}
	if c.Progress < 0 {
		return errors.New("run config: progress: must not be negative")
	}
	if c.RegisterTimeout < 0 {
		return errors.New("run config: register_timeout: must not be negative")
	}
	if c.PortOffset < 0 || c.PortOffset > topology.MaxPortOffset {
		return fmt.Errorf("run config: port offset %d: must be from 0 to %d", c.PortOffset, topology.MaxPortOffset)
	}
	if c.Netns && c.Backend == BackendCompose {
		return errors.New("run config: netns: only for the local backend (compose containers have namespaces of their own)")
	}
	switch c.Backend {
	case "", BackendLocal, BackendCompose:
	default:
		return fmt.Errorf("run config: backend: %q: want %s or %s", c.Backend, BackendLocal, BackendCompose)
	}
	return nil
}

// Backends of a run.
const (
	BackendLocal   = "local"
	BackendCompose = "compose"
)

// labBackend is what a run needs of a lab: start, stop, and the fault actions.
type labBackend interface {
	Lab
	Up(ctx context.Context) error
	Down() error
	Close() error
	RunDir() string
}

// phoneNet is where the run's phones listen and how they find the BAC.
type phoneNet struct {
	dns, listen string
	proxy       string // ip:port every request goes to ("" = the BAC's SRV record in dns)
}

// newLab prepares the run's lab and returns it with the phones' network (known after Up).
func (r *runner) newLab(topo *topology.Topology, seed int64) (labBackend, func() phoneNet, error) {
	if r.cfg.Backend == BackendCompose {
		repo := r.cfg.RepoDir
		if repo == "" {
			if wd, err := os.Getwd(); err == nil {
				repo, _ = lab.FindRepo(wd)
			}
		}
		l, err := compose.New(compose.Config{Topology: topo, RunDir: r.cfg.RunDir, RepoDir: repo, Image: r.cfg.Image,
			Build: r.cfg.BuildImage, ReadyTimeout: r.cfg.ReadyTimeout, GracePeriod: r.cfg.GracePeriod, Seed: seed},
			compose.WithLogger(r.log))
		if err != nil {
			return nil, nil, err
		}
		// The phones are on the access network: they reach the BAC's access address and nothing behind it.
		return l, func() phoneNet {
			return phoneNet{dns: l.Topology().DNS.Listen, listen: l.PhoneListen(), proxy: l.PhoneProxy()}
		}, nil
	}
	l, err := lab.New(lab.Config{Topology: topo, RunDir: r.cfg.RunDir, RepoDir: r.cfg.RepoDir, BinDir: r.cfg.BinDir,
		ReadyTimeout: r.cfg.ReadyTimeout, GracePeriod: r.cfg.GracePeriod, Netns: r.cfg.Netns, Seed: seed},
		append([]lab.Option{lab.WithLogger(r.log)}, r.labOpts...)...)
	if err != nil {
		if r.cfg.Netns && len(r.sc.NetworkFaults()) > 0 {
			return nil, nil, netNeedsError(r.sc, err)
		}
		return nil, nil, err
	}
	return l, func() phoneNet { return phoneNet{dns: l.Topology().DNS.Listen, listen: l.PhoneListen()} }, nil
}

// ReportBuilder turns a finished run directory into its report and returns the summary's metrics. eval checks
// the scenario's expectations against a summary, so that the report can list them (ReportChecks). The command
// passes report.Build with ReportChecks(eval); tests pass a fake.
type ReportBuilder func(runDir string, eval Evaluator) (Metrics, error)

// Evaluator checks a scenario's expectations against a run's metrics.
type Evaluator func(Metrics) []Result

// RunOption configures optional collaborators of a run.
type RunOption func(*runner)

// WithLabOptions passes options to the local lab (tests: lab.WithNetnsCheck to see what a user without root
// gets).
func WithLabOptions(opts ...lab.Option) RunOption {
	return func(r *runner) { r.labOpts = append(r.labOpts, opts...) }
}

// WithLogger sets the runner's logger (the lab logs through it too).
func WithLogger(l *slog.Logger) RunOption { return func(r *runner) { r.log = l } }

// WithOutput sets where the run prints its progress and the expectations table (default os.Stdout).
func WithOutput(w io.Writer) RunOption { return func(r *runner) { r.out = &lockedWriter{w: w} } }

// WithReportBuilder sets the report builder. Without one, a run ends with an error after the lab has stopped.
func WithReportBuilder(b ReportBuilder) RunOption { return func(r *runner) { r.report = b } }

// WithPhonesStopTimeout replaces PhonesStopTimeout.
func WithPhonesStopTimeout(d time.Duration) RunOption { return func(r *runner) { r.stopTimeout = d } }

// Outcome is what a run found.
type Outcome struct {
	RunDir  string   `json:"run_dir"`
	Seed    int64    `json:"seed"`
	Results []Result `json:"results"`
	Passed  bool     `json:"passed"`
	// FaultErrors lists the fault actions that failed (only with KeepGoing; without it the first ends the run).
	FaultErrors []string `json:"fault_errors,omitempty"`
	// RegistrationsFailed counts phones whose initial registration failed (only with KeepGoing).
	RegistrationsFailed int64 `json:"registrations_failed,omitempty"`
	// PhonesNotStopped says that the phones did not stop within PhonesStopTimeout after the run's end (and where
	// their goroutines were written). The report is built and the expectations evaluated all the same, since the
	// run's window had ended, but Run returns an error: the phones' end-of-run de-registrations may be missing and
	// the harness has a bug to find.
	PhonesNotStopped string `json:"phones_not_stopped,omitempty"`
}

// PhonesStopTimeout is how long the runner waits for the phones to end their calls and de-register after the run
// (WithPhonesStopTimeout changes it).
const PhonesStopTimeout = 30 * time.Second

// phonesStuckError is waitPhones's error when the phones did not stop in time.
type phonesStuckError struct{ msg string }

func (e *phonesStuckError) Error() string { return e.msg }

type runner struct {
	cfg     RunConfig
	sc      *Scenario
	log     *slog.Logger
	out     *lockedWriter
	report  ReportBuilder
	labOpts []lab.Option
	// stopTimeout is PhonesStopTimeout unless WithPhonesStopTimeout.
	stopTimeout time.Duration

	provOnce sync.Once
	prov     *provenance.Info
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, a...)
}

// Run runs a scenario: it starts the lab, registers the phones, sets t0, injects the faults at their offsets,
// prints a progress line every few seconds, stops phones and lab after the scenario's duration, has the report
// built and evaluates the expectations. The error is non-nil when the run could not be carried out (ExitError);
// otherwise Outcome.Passed tells whether every expectation held. The Outcome is returned whenever the run
// directory exists, even with an error.
func Run(ctx context.Context, cfg RunConfig, opts ...RunOption) (*Outcome, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, sc: cfg.Scenario, log: slog.Default(), out: &lockedWriter{w: os.Stdout}, stopTimeout: PhonesStopTimeout}
	for _, o := range opts {
		o(r)
	}
	if r.cfg.Progress == 0 {
		r.cfg.Progress = 5 * time.Second
	}
	if r.cfg.RegisterTimeout == 0 {
		r.cfg.RegisterTimeout = time.Duration(float64(r.sc.Traffic.Phones)/r.sc.Traffic.RegisterRate*float64(time.Second)) +
			60*time.Second
	}
	if r.cfg.RunDir == "" {
		r.cfg.RunDir = filepath.Join("runs", r.sc.Name+"-"+time.Now().Format("20060102-150405"))
	}
	return r.run(ctx)
}

func (r *runner) run(ctx context.Context) (*Outcome, error) {
	sc := r.sc
	seed := r.cfg.Seed
	if seed == 0 {
		seed = sc.Seed
	}
	for seed == 0 {
		seed = rand.Int64()
	}
	topo := sc.Topology // a copy: the lab must not share the scenario's maps
	sc.Traffic.Provision(&topo)
	if r.cfg.PortOffset != 0 && r.cfg.Backend != BackendCompose {
		if err := topo.ShiftPorts(r.cfg.PortOffset); err != nil {
			return nil, fmt.Errorf("scenario %s: --port-offset: %w", sc.Name, err)
		}
	}
	if n := topo.HSS.LabSubscriberCount; n > 10000 {
		// The HSS imports its population before it is ready: 100,000 subscribers took 22 s on the loaded
		// development VM (docs/hss.md, "Lab subscribers"); 1 ms each on top of the lab's 30 s keeps a margin.
		r.cfg.ReadyTimeout = max(r.cfg.ReadyTimeout, 30*time.Second+time.Duration(n)*time.Millisecond)
	}
	// The faults' random instants and victims (jitter, random:<pool>) are drawn here, from the seed.
	sc = sc.Resolve(seed)
	r.sc = sc
	l, phoneNetOf, err := r.newLab(&topo, seed)
	if err != nil {
		if errors.Is(err, ErrNeedsNetns) {
			return nil, err
		}
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	defer l.Close()
	if err := netPrecheck(sc, l); err != nil {
		return nil, err
	}
	o := &Outcome{RunDir: l.RunDir(), Seed: seed}
	r.out.printf("scenario %s: %s\n", sc.Name, oneLine(sc.Description))
	r.out.printf("seed %d (repeat with --seed %d); run dir %s\n", seed, seed, o.RunDir)
	for _, f := range sc.Faults {
		r.out.printf("fault: %s\n", f)
	}

	backend := r.cfg.Backend
	if backend == "" {
		backend = BackendLocal
	}
	r.out.printf("starting the lab (%d P-CSCF, %d S-CSCF; %s backend)…\n", topo.Pools.PCSCF.Size, topo.Pools.SCSCF.Size, backend)
	if err := l.Up(ctx); err != nil {
		if ctx.Err() != nil {
			return o, fmt.Errorf("scenario %s: interrupted while starting the lab: %w", sc.Name, ctx.Err())
		}
		return o, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	labDown := sync.OnceValue(l.Down)
	defer labDown()
	if rec, ok := l.(EventRecorder); ok {
		stopSelf, selfDone := make(chan struct{}), make(chan struct{})
		defer func() { close(stopSelf); <-selfDone }()
		go func() { defer close(selfDone); sampleSelf(rec, stopSelf) }() // the phones' process (imslab memory)
		for i, f := range sc.Faults {
			if f.drawn { // the draw, in the lab's events beside the fault itself
				rec.Event(obs.FaultDrawn{Index: i, Fault: f.Kind, Target: f.Target,
					PlannedTarget: f.PlannedTarget, AtS: f.At.Seconds(), PlannedAtS: f.PlannedAt.Seconds(),
					JitterS: f.Jitter.Seconds(), Seed: seed})
			}
		}
	}

	// Phones run until stopPhones, not until ctx: on Ctrl-C they still end their calls and de-register.
	phonesCtx, stopPhones := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPhones()
	phones, phonesDone, err := r.startPhones(phonesCtx, o.RunDir, seed, phoneNetOf())
	if err != nil {
		return o, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	waitPhones := sync.OnceValue(func() error {
		stopPhones()
		select {
		case err := <-phonesDone:
			return err
		case <-time.After(r.stopTimeout):
			// What every goroutine of this process was doing: the phones run here, so their stuck work is in it.
			f := filepath.Join(o.RunDir, "logs", "phones-stop-goroutines.txt")
			if w, err := os.Create(f); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(w, 2)
				w.Close()
				return &phonesStuckError{fmt.Sprintf("did not stop within %s (their goroutines: %s)", r.stopTimeout, f)}
			}
			return &phonesStuckError{fmt.Sprintf("did not stop within %s", r.stopTimeout)}
		}
	})
	defer func() { _ = waitPhones() }()
	r.out.printf("registering %d phones (user%04d…) at %g/s, expires %s…\n", sc.Traffic.Phones,
		sc.Traffic.FirstUser, sc.Traffic.RegisterRate, topo.Registration.Expires)
	regTimeout := time.NewTimer(r.cfg.RegisterTimeout)
	defer regTimeout.Stop()
	select {
	case <-phones.Ready():
	case err := <-phonesDone:
		phonesDone <- err
		if err == nil {
			err = errors.New("stopped before they were ready")
		}
		return o, fmt.Errorf("scenario %s: phones: %w", sc.Name, err)
	case <-regTimeout.C:
		return o, fmt.Errorf("scenario %s: phones: initial registrations not done within %s", sc.Name, r.cfg.RegisterTimeout)
	case <-ctx.Done():
		return o, fmt.Errorf("scenario %s: interrupted while registering: %w", sc.Name, ctx.Err())
	}
	s := phones.Summary()
	if s.InitialFailed > 0 {
		if !r.cfg.KeepGoing {
			return o, fmt.Errorf("scenario %s: phones: %d of %d initial registrations failed (see records.jsonl; "+
				"--keep-going runs anyway)", sc.Name, s.InitialFailed, s.Phones)
		}
		o.RegistrationsFailed = s.InitialFailed
		r.out.printf("warning: %d of %d initial registrations failed; going on (--keep-going)\n", s.InitialFailed, s.Phones)
	}

	// t0: every phone registered, calls start now.
	t0 := time.Now()
	if err := r.writeScenarioJSON(o.RunDir, seed, t0, time.Time{}); err != nil {
		return o, err
	}
	r.out.printf("t0: %d phones registered; traffic %g calls/s for %s (≈%.1f calls per phone each way)\n",
		s.InitialOK, sc.Traffic.CallRate, sc.Duration, sc.callsPerPhone(sc.Duration))
	if m := sc.Traffic.model(); m != nil {
		r.out.printf("traffic model: %g calls per calling user per hour, holding %s (mean %s), %g idle, %g MT-only\n",
			m.BHCA, m.Holding, m.HoldingMean, m.IdleShare, m.MTOnlyShare)
	}
	if ri := sc.Traffic.Reachability.Interval; ri > 0 {
		r.out.printf("reachability probes every %s after a kill, pause or stop (%d prober phones included above)\n",
			ri, len(phones.Probers()))
	}

	runCtx, endRun := context.WithDeadline(ctx, t0.Add(sc.Duration))
	defer endRun()
	var faultMu sync.Mutex
	var fatal error
	inj := NewInjector(&announcingLab{Lab: l, out: r.out, t0: t0, down: func(n string) { phones.StartReachability([]string{n}) }},
		sc.Faults, t0)
	injDone := make(chan struct{})
	go func() {
		defer close(injDone)
		inj.Run(runCtx, func(err error) {
			r.log.Error("fault action failed", "err", err)
			r.out.printf("[%5.1fs] error: %v\n", time.Since(t0).Seconds(), err)
			faultMu.Lock()
			defer faultMu.Unlock()
			o.FaultErrors = append(o.FaultErrors, err.Error())
			if !r.cfg.KeepGoing && fatal == nil {
				fatal = err
				endRun()
			}
		})
	}()

	stepsDone := make(chan struct{})
	go func() {
		defer close(stepsDone)
		r.runSteps(runCtx, t0, phones)
	}()
	defer func() { endRun(); <-stepsDone }()

	tick := time.NewTicker(r.cfg.Progress)
	defer tick.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case err := <-phonesDone:
			phonesDone <- err
			if err == nil {
				err = errors.New("stopped early")
			}
			endRun()
			<-injDone
			return o, fmt.Errorf("scenario %s: phones: %w", sc.Name, err)
		case <-tick.C:
			r.progress(t0, phones, inj)
		}
	}
	<-injDone
	r.progress(t0, phones, inj)
	r.out.printf("stopping the phones and the lab…\n")
	phoneErr := waitPhones()
	end := time.Now()
	downErr := labDown()
	if err := r.writeScenarioJSON(o.RunDir, seed, t0, end); err != nil {
		return o, err
	}
	switch {
	case ctx.Err() != nil:
		return o, fmt.Errorf("scenario %s: interrupted: %w", sc.Name, ctx.Err())
	case fatal != nil:
		return o, fmt.Errorf("scenario %s: %w (--keep-going runs on)", sc.Name, fatal)
	case phoneErr != nil && !errors.As(phoneErr, new(*phonesStuckError)):
		return o, fmt.Errorf("scenario %s: phones: %w", sc.Name, phoneErr)
	case downErr != nil:
		return o, fmt.Errorf("scenario %s: stopping the lab: %w", sc.Name, downErr)
	case phoneErr != nil:
		// The run's window is over and its records are whole lines: report it, then fail the run.
		o.PhonesNotStopped = phoneErr.Error()
		r.out.printf("error: the phones %v; building the report of the run all the same\n", phoneErr)
		if _, err := r.evaluate(o); err != nil {
			return o, fmt.Errorf("scenario %s: phones: %w; and %w", sc.Name, phoneErr, err)
		}
		return o, fmt.Errorf("scenario %s: phones: %w (the report and expectations.json were written)", sc.Name, phoneErr)
	}
	return r.evaluate(o)
}

// runSteps applies the traffic's load steps at their offsets from t0 until ctx ends.
func (r *runner) runSteps(ctx context.Context, t0 time.Time, phones *ue.UE) {
	for _, st := range r.sc.Traffic.Steps {
		t := time.NewTimer(time.Until(t0.Add(st.At)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		phones.SetCallRate(st.CallRate)
		r.out.printf("[%5.1fs] load step: %g calls/s\n", time.Since(t0).Seconds(), st.CallRate)
	}
}

// evaluate builds the report, checks the expectations, prints the table and writes expectations.json.
func (r *runner) evaluate(o *Outcome) (*Outcome, error) {
	if r.report == nil {
		return o, fmt.Errorf("scenario %s: no report builder: cannot evaluate the expectations", r.sc.Name)
	}
	r.out.printf("building the report…\n")
	m, err := r.report(o.RunDir, func(m Metrics) []Result { return Evaluate(r.sc.Expectations, m) })
	if err != nil {
		return o, fmt.Errorf("scenario %s: report: %w", r.sc.Name, err)
	}
	if m == nil {
		return o, fmt.Errorf("scenario %s: report: no summary", r.sc.Name)
	}
	o.Results = Evaluate(r.sc.Expectations, m)
	o.Passed = Passed(o.Results)
	r.out.mu.Lock()
	PrintResults(r.out.w, o.Results)
	if h, ok := m.(interface{ HealthLine() string }); ok && h.HealthLine() != "" {
		fmt.Fprintln(r.out.w, h.HealthLine())
	}
	verdict := "PASSED"
	if !o.Passed {
		verdict = "FAILED"
	}
	size := ""
	if n, err := obs.DirSize(o.RunDir); err == nil {
		size = fmt.Sprintf(" (%.1f MiB)", float64(n)/(1<<20))
	}
	fmt.Fprintf(r.out.w, "%s: %s (seed %d); run dir %s%s\n", r.sc.Name, verdict, o.Seed, o.RunDir, size)
	r.out.mu.Unlock()
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return o, fmt.Errorf("scenario %s: expectations: %w", r.sc.Name, err)
	}
	if err := os.WriteFile(filepath.Join(o.RunDir, "expectations.json"), append(b, '\n'), 0o644); err != nil {
		return o, fmt.Errorf("scenario %s: expectations: %w", r.sc.Name, err)
	}
	return o, nil
}

// PrintResults writes the expectations table: name, metric, value, expected, ok.
func PrintResults(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXPECTATION\tMETRIC\tVALUE\tEXPECTED\tOK")
	for _, res := range results {
		val, exp := res.ValueText(), res.ExpectedText()
		ok := "yes"
		if !res.OK {
			ok = "NO"
			if res.Reason != "" {
				ok += ": " + res.Reason
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", res.Title(), res.Metric, val, exp, ok)
	}
	tw.Flush()
}

func (r *runner) startPhones(ctx context.Context, runDir string, seed int64, pn phoneNet) (*ue.UE, chan error, error) {
	t := r.sc.Traffic
	topo := &r.sc.Topology
	cfg := ue.DefaultConfig()
	cfg.DNSServer = pn.dns
	cfg.Proxy = pn.proxy
	cfg.Domain = topo.Domain
	cfg.Listen = pn.listen
	cfg.Users.From, cfg.Users.Count = t.FirstUser, t.Phones
	cfg.Expires = int(topo.Registration.Expires / time.Second)
	cfg.RegisterRate = t.RegisterRate
	cfg.CallRate, cfg.HoldTime, cfg.CallTimeout = t.CallRate, t.Hold, t.CallTimeout
	cfg.ProbeInterval = t.ProbeInterval
	cfg.Mix = t.Mix
	cfg.OnRestoration504 = t.OnRestoration504
	cfg.RefreshPhase, cfg.SessionExpires = t.RefreshPhase, t.SessionExpires
	cfg.Model = t.model()
	cfg.Reachability = t.Reachability
	cfg.Deregister = true
	cfg.Seed = seed
	cfg.RecordsFile = filepath.Join(runDir, "records.jsonl")
	cfg.EventsFile = filepath.Join(runDir, "events", "ue.jsonl")
	logf, err := os.OpenFile(filepath.Join(runDir, "logs", "ue.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("phones: %w", err)
	}
	ulog, err := obs.NewLogger(logf, obs.LogConfig{}, "ue")
	if err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("phones: %w", err)
	}
	phones, err := ue.New(cfg, ue.WithLogger(ulog))
	if err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("phones: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		err := phones.Run(ctx)
		logf.Close()
		done <- err
	}()
	return phones, done, nil
}

func (r *runner) progress(t0 time.Time, phones *ue.UE, inj *Injector) {
	s := phones.Summary()
	faults := "none"
	if a := inj.Active(); len(a) > 0 {
		faults = strings.Join(a, ", ")
	}
	el := min(time.Since(t0), r.sc.Duration)
	r.out.printf("[%4.0fs/%.0fs] registered %d/%d · calls %d ok, %d failed · received %d · faults: %s\n",
		el.Seconds(), r.sc.Duration.Seconds(), s.Registered, s.Phones, s.CallsOK, s.CallsFailed, s.MTOK, faults)
}

// announcingLab prints each fault action as it happens.
type announcingLab struct {
	Lab
	out *lockedWriter
	t0  time.Time
	// down is told that a node has just been killed, paused or stopped (the phones start their reachability
	// probes of its users); nil = nobody.
	down func(node string)
}

// wentDown tells down about node n after a successful fault action.
func (a *announcingLab) wentDown(n string, err error) error {
	if err == nil && a.down != nil {
		a.down(n)
	}
	return err
}

func (a *announcingLab) say(what, node string) {
	a.out.printf("[%5.1fs] %s %s\n", time.Since(a.t0).Seconds(), what, node)
}

func (a *announcingLab) Kill(n string) error {
	a.say("kill", n)
	return a.wentDown(n, a.Lab.Kill(n))
}
func (a *announcingLab) Pause(n string) error {
	a.say("pause", n)
	return a.wentDown(n, a.Lab.Pause(n))
}
func (a *announcingLab) Resume(n string) error { a.say("resume", n); return a.Lab.Resume(n) }
func (a *announcingLab) Stop(n string, graceful bool) error {
	a.say(map[bool]string{true: "stop", false: "kill"}[graceful], n)
	return a.wentDown(n, a.Lab.Stop(n, graceful))
}
func (a *announcingLab) Start(ctx context.Context, n string) error {
	a.say("start", n)
	return a.Lab.Start(ctx, n)
}
func (a *announcingLab) Restart(ctx context.Context, n string) error {
	a.say("restart", n)
	return a.Lab.Restart(ctx, n)
}

// Event forwards a fault's event to the lab's events.
func (a *announcingLab) Event(ev obs.Event) {
	if r, ok := a.Lab.(EventRecorder); ok {
		r.Event(ev)
	}
}

// Throttle and Unthrottle forward the slow fault to a lab that can limit CPU.
func (a *announcingLab) Throttle(n string, cpuPercent int) error {
	t, ok := a.Lab.(Throttler)
	if !ok {
		return fmt.Errorf("%w: the %T backend cannot limit a node's CPU", ErrUnsupported, a.Lab)
	}
	a.say(fmt.Sprintf("slow (%d%% CPU)", cpuPercent), n)
	return t.Throttle(n, cpuPercent)
}

func (a *announcingLab) Unthrottle(n string) error {
	t, ok := a.Lab.(Throttler)
	if !ok {
		return fmt.Errorf("%w: the %T backend cannot limit a node's CPU", ErrUnsupported, a.Lab)
	}
	a.say("unslow", n)
	return t.Unthrottle(n)
}

// NetCheck, NetAddrs, ApplyNet and HealNet forward the network faults to a lab that can apply them.
func (a *announcingLab) NetCheck() error {
	nl, err := asNetLab(a.Lab)
	if err != nil {
		return err
	}
	return nl.NetCheck()
}

func (a *announcingLab) NetAddrs(n string) ([]netip.Addr, error) {
	nl, err := asNetLab(a.Lab)
	if err != nil {
		return nil, err
	}
	return nl.NetAddrs(n)
}

func (a *announcingLab) ApplyNet(ctx context.Context, n, key string, spec netfault.Spec) error {
	nl, err := asNetLab(a.Lab)
	if err != nil {
		return err
	}
	a.say(spec.String()+" on", n)
	return nl.ApplyNet(ctx, n, key, spec)
}

func (a *announcingLab) HealNet(ctx context.Context, n, key string) error {
	nl, err := asNetLab(a.Lab)
	if err != nil {
		return err
	}
	a.say("heal "+key+" on", n)
	return nl.HealNet(ctx, n, key)
}

// provenance is collected once per run (scenario.json is written at the start and again at the end).
func (r *runner) provenance() *provenance.Info {
	r.provOnce.Do(func() {
		repo := r.cfg.RepoDir
		if repo == "" {
			if wd, err := os.Getwd(); err == nil {
				repo, _ = lab.FindRepo(wd)
			}
		}
		p := provenance.Collect(repo, os.Args)
		r.prov = &p
	})
	return r.prov
}

// runJSON is scenario.json (docs/architecture.md, "Run-scenario files").
type runJSON struct {
	Name         string        `json:"name"`
	Description  string        `json:"description"`
	ScenarioFile string        `json:"scenario_file,omitempty"`
	Backend      string        `json:"backend"` // local or compose
	Seed         int64         `json:"seed"`
	StartNs      int64         `json:"start_ns"`
	EndNs        int64         `json:"end_ns,omitempty"`
	DurationS    float64       `json:"duration_s"`
	Faults       []faultJSON   `json:"faults"`
	Expectations []Expectation `json:"expectations"`
	Traffic      trafficJSON   `json:"traffic"`
	// RegistrationExpiresS is the registration period the phones ask for (they refresh at about half; 600 s before expiry above 1200 s).
	RegistrationExpiresS float64 `json:"registration_expires_s"`
	PCSCFPool            int     `json:"pcscf_pool"`
	SCSCFPool            int     `json:"scscf_pool"`
	// Provenance: the code (commit, dirty), toolchain, machine and command of the run; BinDir is set when the
	// nodes were prebuilt binaries (then the commit is the repository's, which built them if nothing changed).
	Provenance *provenance.Info `json:"provenance,omitempty"`
	BinDir     string           `json:"bin_dir,omitempty"`
}

type faultJSON struct {
	Kind   string  `json:"kind"`
	Target string  `json:"target"`
	AtS    float64 `json:"at_s"`
	ForS   float64 `json:"for_s"` // 0: in place until the end of the run (or, for restart, instantaneous)
	// Nodes are the nodes a pool or site target names (absent for a node target: the target itself).
	Nodes      []string `json:"nodes,omitempty"`
	Mode       string   `json:"mode,omitempty"`
	PeriodS    float64  `json:"period_s,omitempty"`
	CPUPercent int      `json:"cpu_percent,omitempty"`
	// A randomised fault: the planned target (random:pcscf) and instant, and the jitter; target and at_s are the
	// drawn ones.
	PlannedTarget string   `json:"planned_target,omitempty"`
	PlannedAtS    *float64 `json:"planned_at_s,omitempty"`
	JitterS       float64  `json:"jitter_s,omitempty"`
	// The network faults' parameters (docs/faults.md).
	Peers         []string `json:"peers,omitempty"`
	Direction     string   `json:"direction,omitempty"`
	Reject        bool     `json:"reject,omitempty"`
	LossPercent   float64  `json:"loss_percent,omitempty"`
	Rate          string   `json:"rate,omitempty"`
	DelayMs       float64  `json:"delay_ms,omitempty"`
	DelayJitterMs float64  `json:"delay_jitter_ms,omitempty"`
}

type trafficJSON struct {
	Phones       int     `json:"phones"`
	FirstUser    int     `json:"first_user"`
	RegisterRate float64 `json:"register_rate"`
	CallRate     float64 `json:"call_rate"`
	HoldS        float64 `json:"hold_s"`
	Mix          float64 `json:"mix"`
	// The traffic model and the reachability probes (absent: off).
	BHCA                 float64 `json:"bhca,omitempty"`
	Holding              string  `json:"holding,omitempty"`
	HoldingMeanS         float64 `json:"holding_mean_s,omitempty"`
	IdleShare            float64 `json:"idle_share,omitempty"`
	MTOnlyShare          float64 `json:"mt_only_share,omitempty"`
	ReachabilityInterval float64 `json:"reachability_interval_s,omitempty"`
	// ReachabilitySample is reachability.sample: at most this many affected users probed per fault (absent: all).
	ReachabilitySample int `json:"reachability_sample,omitempty"`
	// RefreshPhase is refresh_phase (absent: lockstep); SessionExpiresS the session timers' interval (absent: off).
	RefreshPhase    string  `json:"refresh_phase,omitempty"`
	SessionExpiresS float64 `json:"session_expires_s,omitempty"`
	// Steps are the load steps (absent: none).
	Steps []stepJSON `json:"steps,omitempty"`
}

type stepJSON struct {
	AtS      float64 `json:"at_s"`
	CallRate float64 `json:"call_rate"`
}

// writeScenarioJSON writes <run-dir>/scenario.json; end is zero until the run is over.
func (r *runner) writeScenarioJSON(runDir string, seed int64, t0, end time.Time) error {
	sc := r.sc
	mix := 1.0
	if sc.Traffic.Mix != nil {
		mix = *sc.Traffic.Mix
	}
	backend := r.cfg.Backend
	if backend == "" {
		backend = BackendLocal
	}
	j := runJSON{Name: sc.Name, Description: sc.Description, ScenarioFile: r.cfg.ScenarioFile, Backend: backend, Seed: seed,
		StartNs: t0.UnixNano(), DurationS: sc.Duration.Seconds(), Faults: []faultJSON{},
		Expectations: sc.Expectations,
		Traffic: trafficJSON{Phones: sc.Traffic.Phones, FirstUser: sc.Traffic.FirstUser,
			RegisterRate: sc.Traffic.RegisterRate, CallRate: sc.Traffic.CallRate, HoldS: sc.Traffic.Hold.Seconds(), Mix: mix},
		RegistrationExpiresS: sc.Topology.Registration.Expires.Seconds(),
		PCSCFPool:            sc.Topology.Pools.PCSCF.Size, SCSCFPool: sc.Topology.Pools.SCSCF.Size,
		Provenance: r.provenance(), BinDir: r.cfg.BinDir}
	if j.Expectations == nil {
		j.Expectations = []Expectation{}
	}
	if m := sc.Traffic.model(); m != nil {
		j.Traffic.BHCA, j.Traffic.Holding, j.Traffic.HoldingMeanS = m.BHCA, m.Holding, m.HoldingMean.Seconds()
		j.Traffic.IdleShare, j.Traffic.MTOnlyShare = m.IdleShare, m.MTOnlyShare
	}
	j.Traffic.ReachabilityInterval = sc.Traffic.Reachability.Interval.Seconds()
	j.Traffic.ReachabilitySample = sc.Traffic.Reachability.Sample
	j.Traffic.RefreshPhase, j.Traffic.SessionExpiresS = sc.Traffic.RefreshPhase, sc.Traffic.SessionExpires.Seconds()
	for _, st := range sc.Traffic.Steps {
		j.Traffic.Steps = append(j.Traffic.Steps, stepJSON{AtS: st.At.Seconds(), CallRate: st.CallRate})
	}
	if !end.IsZero() {
		j.EndNs = end.UnixNano()
	}
	for _, f := range sc.Faults {
		fj := faultJSON{Kind: f.Kind, Target: f.Target, AtS: f.At.Seconds(), ForS: f.For.Seconds(), Mode: f.Mode,
			PeriodS: f.Period.Seconds(), CPUPercent: f.CPUPercent, Peers: f.Peers, Direction: f.Direction,
			Reject: f.Reject, LossPercent: f.Loss, Rate: f.Rate, DelayMs: float64(f.Delay) / 1e6,
			DelayJitterMs: float64(f.DelayJitter) / 1e6}
		if nodes := f.targetNodes(); len(nodes) != 1 || nodes[0] != f.Target {
			fj.Nodes = nodes
		}
		if f.drawn {
			at := f.PlannedAt.Seconds()
			fj.PlannedTarget, fj.PlannedAtS, fj.JitterS = f.PlannedTarget, &at, f.Jitter.Seconds()
		}
		j.Faults = append(j.Faults, fj)
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("scenario.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "scenario.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("scenario.json: %w", err)
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
