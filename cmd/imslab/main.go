// Command imslab runs the testbed's lab.
//
//	imslab up [--topology f] [--run-dir d] [--only n1,n2]   build the nodes, start them, wait for Ctrl-C
//	imslab up --phones 50 --call-rate 5 --duration 30s      the same with simulated phones, for a fixed time
//	imslab run scenarios/pcscf-kill.yaml [--out d] [--seed n] run a scenario; exit 0 passed, 1 failed, 2 error
//	imslab run --backend compose scenarios/pcscf-kill.yaml    the same with the lab as Docker containers
//	imslab run --repeat 20 --seed 1 f.yaml --out d            20 runs (seeds 1…20), statistics in d/repeat.md
//	imslab compose [--check]                                   generate docker-compose.yml from the topology
//	imslab up --netns / imslab run --netns …                   every node in its own network namespace (root)
//	imslab clean                                               remove what crashed runs left behind (netns, cgroups, compose)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

const usage = `usage: imslab <command> [flags]

commands:
  up    build the node binaries, start every node of the topology as a local process, print the table and
        stop them all on Ctrl-C or SIGTERM; with --phones, simulated phones register and call through the lab
  run   run a scenario file (docs/scenarios.md): start the lab and the phones, inject the faults, stop, build
        the report and check the expectations; exit 0 when every expectation holds, 1 when one fails, 2 on error
  clean    remove what crashed runs left behind: network namespaces, bridges, veths and records of lab
        networks (--netns) whose owner process is gone, empty cpu cgroups of slow faults, and the containers
        and networks of compose projects whose owner process is gone; a live run is left alone (needs root)
  compose  generate docker-compose.yml and deploy/compose/ from the topology (--check: verify they are current)
  image    build the lab image imslab/quasipool from static binaries, offline (make lab-image)
  probe    sip|dns|tcp <ip:port>: check that a service answers (the compose lab's healthcheck)
  report [--pcap] <run-dir>   build the report of a run directory again from its data (summary.json, calls.csv,
        events.jsonl, report.md/html, plots, trace.pcapng.gz; --pcap adds trace.pcap) and check the scenario's
        expectations again
  build [--race]   build every command once into the build cache (one directory per distinct build, shared
        by runs) and print that directory (make test-lab runs the lab specs on it)
  compare <scenario> --schemes quasi-pool,load-sharing,n-plus-1   run the scenario under each protection
        scheme (same traffic and seed) and write the measured Table 1 with plots (docs/compare.md)
  sweep <scenario> --param pool_size=2,3,4 [--schemes …]   one run per parameter combination and scheme;
        sweep.csv and a plot per varied parameter (docs/compare.md)
  study <study.yaml> [--quick] [--out dir]   run every experiment × scheme × repetition of a study file,
        interleaved and resumable; study.json and study.md with n, 95 % CI and provenance (docs/study.md)
  claims [--base docs] <study.json>...   every claim of the published studies in the order of the paper, with
        its verdict and the numbers behind it, as one markdown table (docs/results.md's first table)
  results [all | <study> [dir] | storms | claims]   regenerate docs/results.md's generated sections (and the
        published studies' study.json, study.md, results.md, figures/; for one <study> also every figure at 3.5 in
        and 7 in as PDF, SVG and PNG) from the committed runs (make results)
  table storms|issue11|issue11-net|mutual|kpi-regression|overload|late-users|health-timeouts   a table of the
        documents from the committed runs' summary.json (imslab table -h)
  publish run|study   copy a run or a study into a directory that can be committed (imslab publish -h)
  bench [--kinds proxy,capacity,registration,memory] [--rate 100] [--call-rates 100,300,500] [--reg-rates 300,1000]
        [--phones 10000,100000]   issue 13's bench in one run: CPU per call per proxy hop of the lab's proxy beside
        Kamailio, full-chain calls/s, registrations/s and memory points; bench.md and bench.json with a table per
        kind and a summary against the targets (docs/performance.md)
  memory <run-dir>   the memory point of a run: every node's resident memory before the phones registered,
        at t0 and at its peak after t0, and the phones' process apart (scripts/memory-point.sh)

run "imslab <command> -h" for the flags of a command`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:], os.Stdout)
	case "run":
		// The runner's own process runs the phones: IMSLAB_CPUPROFILE_DIR profiles it beside the nodes.
		stopProfile, perr := obs.StartCPUProfileFromEnv("imslab-run")
		if perr != nil {
			fmt.Fprintln(os.Stderr, "imslab:", perr)
			os.Exit(1)
		}
		code := runScenario(os.Args[2:], os.Stdout, os.Stderr)
		stopProfile()
		os.Exit(code)
	case "build":
		os.Exit(buildCmd(os.Args[2:], os.Stdout, os.Stderr))
	case "report":
		os.Exit(rerender(os.Args[2:], os.Stdout, os.Stderr))
	case "compare":
		os.Exit(runCompare(os.Args[2:], os.Stdout, os.Stderr))
	case "sweep":
		os.Exit(runSweep(os.Args[2:], os.Stdout, os.Stderr))
	case "clean":
		err = clean(os.Args[2:], os.Stdout)
	case "compose":
		err = generateCompose(os.Args[2:], os.Stdout, os.Stderr)
	case "image":
		err = buildImage(os.Args[2:], os.Stdout, os.Stderr)
	case "probe":
		err = probe(os.Args[2:], os.Stdout, os.Stderr)
	case "study":
		os.Exit(runStudy(os.Args[2:], os.Stdout, os.Stderr))
	case "claims":
		os.Exit(claims(os.Args[2:], os.Stdout, os.Stderr))
	case "results":
		os.Exit(runResults(os.Args[2:], os.Stdout, os.Stderr))
	case "table":
		os.Exit(runTable(os.Args[2:], os.Stdout, os.Stderr))
	case "publish":
		os.Exit(runPublish(os.Args[2:], os.Stdout, os.Stderr))
	case "bench":
		os.Exit(runBench(os.Args[2:], os.Stdout, os.Stderr))
	case "memory":
		os.Exit(memory(os.Args[2:], os.Stdout, os.Stderr))
	case "-h", "-help", "--help", "help":
		fmt.Println(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "imslab: unknown command %q\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "imslab:", err)
		}
		os.Exit(1)
	}
}

func up(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("imslab up", flag.ContinueOnError)
	topoPath := fs.String("topology", "", "topology file (default: the embedded default topology)")
	runDir := fs.String("run-dir", "", "run directory (default: runs/<date-time>; runs/latest points at it)")
	only := fs.String("only", "", "comma-separated node names to run (default: every node whose command exists)")
	binDir := fs.String("bin-dir", "", "use prebuilt binaries from this directory instead of building")
	repo := fs.String("repo", "", "repository root (default: found from the working directory)")
	readyTimeout := fs.Duration("ready-timeout", 30*time.Second, "how long one node may take to become ready")
	grace := fs.Duration("grace", 5*time.Second, "wait between SIGTERM and SIGKILL when stopping a node")
	phones := fs.Int("phones", 0, "simulated phones (user0001…) to register through the BAC once the lab is up")
	callRate := fs.Float64("call-rate", 0, "calls per second between the phones")
	hold := fs.Duration("hold", 3*time.Second, "hold time of each call")
	duration := fs.Duration("duration", 0, "stop the lab after this long (0 = wait for Ctrl-C)")
	seed := fs.Int64("seed", 0, "random seed of the phones' traffic and the nodes' choices (0 = new for the phones, the clock for the nodes; printed)")
	logFormat := fs.String("log-format", "", "text or json (the lab's own log)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error")
	useNetns := fs.Bool("netns", false, "run every node in its own network namespace with its own address on a bridge (root, Linux)")
	portOffset := portOffsetFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("up: unexpected arguments %q", fs.Args())
	}
	log, err := obs.NewLogger(os.Stderr, obs.LogConfig{Format: *logFormat, Level: *logLevel}, "imslab")
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	t := topology.Default()
	if *topoPath != "" {
		if t, err = topology.Load(*topoPath); err != nil {
			return err
		}
	}
	if err := t.ShiftPorts(*portOffset); err != nil {
		return fmt.Errorf("up: --port-offset: %w", err)
	}
	if *phones > topology.MaxLabSubscribers {
		return fmt.Errorf("up: --phones %d: the lab provisions at most user%d", *phones, topology.MaxLabSubscribers)
	}
	if t.HSS.LabSubscribers && *phones > max(t.HSS.LabSubscriberCount, 1000) {
		t.HSS.LabSubscriberCount = *phones // the HSS provisions user0001…user<phones>
		// It imports them before it is ready (docs/hss.md, "Lab subscribers").
		if *phones > 10000 {
			*readyTimeout = max(*readyTimeout, 30*time.Second+time.Duration(*phones)*time.Millisecond)
		}
	}
	dir := *runDir
	latest := false
	if dir == "" {
		dir = filepath.Join("runs", time.Now().Format("20060102-150405"))
		latest = true
	}
	cfg := lab.Config{Topology: t, RunDir: dir, RepoDir: *repo, BinDir: *binDir, ReadyTimeout: *readyTimeout,
		GracePeriod: *grace, Netns: *useNetns, Seed: *seed} // --seed 0: the nodes seed from the clock
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	l, err := lab.New(cfg, lab.WithLogger(log))
	if err != nil {
		return err
	}
	defer l.Close()
	if latest {
		link := filepath.Join(filepath.Dir(dir), "latest")
		_ = os.Remove(link)
		_ = os.Symlink(filepath.Base(dir), link)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := l.Up(ctx); err != nil {
		if ctx.Err() != nil { // interrupted while starting: Up has stopped what it started
			log.Info("interrupted while starting; every node stopped")
			return nil
		}
		return err
	}
	printTable(out, l)
	if addr, tokenFile := l.HSSAPI(); addr != "" {
		fmt.Fprintf(out, "\nHSS API token: %s\n  curl -H \"Authorization: Bearer $(cat %s)\" http://%s/api/v1/subscribers?limit=5\n",
			tokenFile, tokenFile, addr)
	}
	fmt.Fprintf(out, "\nrun dir %s (logs/, events/). Ctrl-C stops the lab.\n", l.RunDir())
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	var phoneErr error
	if *phones > 0 {
		phoneErr = runPhones(ctx, out, l.Topology(), l.PhoneListen(), l.RunDir(), *phones, *callRate, *hold, *seed)
	} else {
		<-ctx.Done()
	}
	log.Info("stopping the lab")
	if err := l.Down(); err != nil {
		return err
	}
	return phoneErr
}

// runPhones registers simulated phones through the lab and places calls until ctx is done; their records go to
// <run-dir>/records.jsonl. It prints a progress line every 5 s and a summary at the end.
func runPhones(ctx context.Context, out io.Writer, t *topology.Topology, listen, runDir string, n int, rate float64, hold time.Duration, seed int64) error {
	cfg := ue.DefaultConfig()
	cfg.DNSServer = t.DNS.Listen
	cfg.Domain = t.Domain
	cfg.Listen = listen
	cfg.Users.From, cfg.Users.Count = 1, n
	cfg.CallRate, cfg.HoldTime = rate, hold
	cfg.RegisterRate = 100
	cfg.Deregister = true
	cfg.Seed = seed
	cfg.RecordsFile = filepath.Join(runDir, "records.jsonl")
	cfg.EventsFile = filepath.Join(runDir, "events", "ue.jsonl")
	ulog, err := obs.NewLogger(io.Discard, obs.LogConfig{}, "ue")
	if err != nil {
		return err
	}
	phones, err := ue.New(cfg, ue.WithLogger(ulog))
	if err != nil {
		return fmt.Errorf("phones: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- phones.Run(ctx) }()
	fmt.Fprintf(out, "phones: %d (user0001…), %.1f calls/s, hold %s, seed %d (repeat with --seed)\n", n, rate, hold, phones.Seed())
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			s := phones.Summary()
			fmt.Fprintf(out, "summary: %d/%d phones registered at start, %d calls ok, %d failed; records %s\n",
				s.InitialOK, s.Phones, s.CallsOK, s.CallsFailed, cfg.RecordsFile)
			if err != nil {
				return fmt.Errorf("phones: %w", err)
			}
			if s.InitialFailed > 0 {
				return fmt.Errorf("phones: %d registrations failed", s.InitialFailed)
			}
			return nil
		case <-tick.C:
			s := phones.Summary()
			fmt.Fprintf(out, "progress: %d/%d registered, calls %d ok / %d failed, received %d\n",
				s.Registered, s.Phones, s.CallsOK, s.CallsFailed, s.MTOK)
		}
	}
}

// runScenario is "imslab run": it returns the exit status (scenario.ExitPassed, ExitFailed, ExitError).
func runScenario(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("imslab run", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: imslab run <scenario.yaml> [flags]\n\nfault kinds:\n")
		for _, k := range scenario.FaultKinds() {
			fmt.Fprintf(errOut, "  %-8s %s\n", k.Name, k.Doc)
		}
		fmt.Fprintf(errOut, "\nexit status: 0 every expectation holds, 1 one fails, 2 error\n\nflags:\n")
		fs.PrintDefaults()
	}
	outDir := fs.String("out", "", "run directory (default: runs/<scenario>-<date-time>; runs/latest points at it)")
	seed := fs.Int64("seed", 0, "the run's seed: every random choice (phones, nodes, fault instants and victims) is drawn from it (0 = the scenario's seed, or a new one; printed)")
	keepGoing := fs.Bool("keep-going", false, "go on when a fault cannot be injected or some phones fail to register")
	binDir := fs.String("bin-dir", "", "use prebuilt node binaries from this directory instead of building")
	repo := fs.String("repo", "", "repository root (default: found from the working directory)")
	readyTimeout := fs.Duration("ready-timeout", 30*time.Second, "how long one node may take to become ready")
	grace := fs.Duration("grace", 5*time.Second, "wait between SIGTERM and SIGKILL when stopping a node")
	progress := fs.Duration("progress", 5*time.Second, "interval of the progress line")
	backend := fs.String("backend", scenario.BackendLocal, "where the lab runs: local (processes) or compose (Docker containers)")
	image := fs.String("image", "", "compose backend: the lab image (default "+compose.DefaultImage+"; built when missing)")
	rebuild := fs.Bool("build-image", false, "compose backend: build the lab image first even when it exists")
	logFormat := fs.String("log-format", "", "text or json (the runner's and lab's own log, on stderr)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	useNetns := fs.Bool("netns", false, "local backend: every node in its own network namespace with its own address (root, Linux)")
	keepRaw := fs.Bool("keep-raw", false, "keep the nodes' own event files (events/) and trace segments (trace/) beside the merged events.jsonl and trace.pcapng.gz")
	repeat := fs.Int("repeat", 1, "run the scenario this many times with the seeds seed, seed+1, … into <out>/rep<k>/ and write "+
		"<out>/repeat.json and repeat.md (statistics over the runs, docs/compare.md)")
	phones := fs.Int("phones", 0, "override the scenario's traffic.phones (0 = the file's), e.g. to scale a storm scenario")
	portOffset := portOffsetFlag(fs)
	// The scenario file may come before, between or after the flags.
	file, status := parseWithFile(fs, args, errOut, "run")
	if status >= 0 {
		return status
	}
	log, err := obs.NewLogger(errOut, obs.LogConfig{Format: *logFormat, Level: *logLevel}, "imslab")
	if err != nil {
		fmt.Fprintln(errOut, "imslab run: log:", err)
		return scenario.ExitError
	}
	sc, err := scenario.Load(file)
	if err != nil {
		fmt.Fprintln(errOut, "imslab run:", err)
		return scenario.ExitError
	}
	if *phones != 0 {
		sc.Traffic.Phones = *phones
		if err := sc.Validate(); err != nil {
			fmt.Fprintln(errOut, "imslab run: --phones:", err)
			return scenario.ExitError
		}
	}
	dir := *outDir
	if dir == "" {
		dir = filepath.Join("runs", sc.Name+"-"+time.Now().Format("20060102-150405"))
		link := filepath.Join("runs", "latest")
		if err := os.MkdirAll("runs", 0o755); err == nil {
			_ = os.Remove(link)
			_ = os.Symlink(filepath.Base(dir), link)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rc := scenario.RunConfig{Scenario: sc, ScenarioFile: file, RunDir: dir, Seed: *seed,
		KeepGoing: *keepGoing, RepoDir: *repo, BinDir: *binDir, ReadyTimeout: *readyTimeout, GracePeriod: *grace,
		Progress: *progress, Backend: *backend, Image: *image, BuildImage: *rebuild, Netns: *useNetns,
		PortOffset: *portOffset}
	switch {
	case *repeat < 1:
		fmt.Fprintln(errOut, "imslab run: --repeat: must be at least 1")
		return scenario.ExitError
	case *repeat > 1:
		return runRepeated(ctx, rc, *repeat, log, out, errOut)
	}
	build := func(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
		return buildReport(runDir, eval, *keepRaw)
	}
	o, err := scenario.Run(ctx, rc, scenario.WithLogger(log), scenario.WithOutput(out), scenario.WithReportBuilder(build))
	if err != nil {
		fmt.Fprintln(errOut, "imslab run:", err)
		if o != nil {
			fmt.Fprintf(errOut, "imslab run: run dir %s (seed %d)\n", o.RunDir, o.Seed)
		}
	}
	return scenario.ExitCode(o, err)
}

// runRepeated is imslab run --repeat K: K runs, then repeat.json and repeat.md. The exit status is 2 when a run
// could not be carried out, else 1 when a run missed an expectation, else 0.
func runRepeated(ctx context.Context, rc scenario.RunConfig, k int, log *slog.Logger, out, errOut io.Writer) int {
	run := compare.LabRunner(rc, scenario.WithLogger(log), scenario.WithOutput(out))
	outcomes, agg, err := compare.RunRepeat(ctx, compare.RepeatConfig{Scenario: rc.Scenario, Dir: rc.RunDir, Seed: rc.Seed,
		Repeat: k, KeepGoing: rc.KeepGoing, Run: run, Out: out})
	if agg != nil {
		fmt.Fprintf(out, "\n%d runs of %s: %s\n", k, rc.Scenario.Name, filepath.Join(rc.RunDir, compare.FileRepeatMD))
		for _, name := range []string{"time_to_detect_s", "mo_interruption_s", "mt_interruption_s"} {
			fmt.Fprintf(out, "  %-18s %s\n", name, agg.MeanCI(name))
		}
	}
	if err != nil {
		fmt.Fprintln(errOut, "imslab run:", err)
		return scenario.ExitError
	}
	status := scenario.ExitPassed
	for _, o := range outcomes {
		status = max(status, scenario.ExitCode(o, nil))
	}
	return status
}

// rerender rebuilds the report of a run directory from its data and checks its expectations again.
func rerender(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(errOut)
	pcap := fs.Bool("pcap", false, "also write trace.pcap: every message once, as Ethernet frames (derived from trace.pcapng.gz)")
	keepRaw := fs.Bool("keep-raw", false, "keep the nodes' own event files and trace segments when the run still has them")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(errOut, "usage: imslab report [--pcap] [--keep-raw] <run-dir>")
		return 2
	}
	dir := fs.Arg(0)
	// A run of imslab up has no scenario.json and no expectations.
	var sc struct {
		Expectations []scenario.Expectation `json:"expectations"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "scenario.json")); err == nil {
		if err := json.Unmarshal(b, &sc); err != nil {
			fmt.Fprintln(errOut, "imslab report: scenario.json:", err)
			return 2
		}
	}
	var results []scenario.Result
	eval := func(m scenario.Metrics) []scenario.Result {
		results = scenario.Evaluate(sc.Expectations, m)
		return results
	}
	opts := []report.Option{scenario.ReportChecks(eval), report.WithPrintForms()}
	if *pcap {
		opts = append(opts, report.WithPcap())
	}
	if *keepRaw {
		opts = append(opts, report.KeepRaw())
	}
	s, err := report.Build(dir, opts...)
	if err != nil {
		fmt.Fprintln(errOut, "imslab report:", err)
		return 2
	}
	fmt.Fprintf(out, "report of %s rebuilt: %s\n", dir, strings.Join(s.Files, ", "))
	if s.Events.Errors > 0 { // left out of every figure: say so where the user looks (docs/events.md)
		fmt.Fprintf(errOut, "imslab report: %d of %d event lines could not be read (summary.json events, report.md \"Event errors\"):\n",
			s.Events.Errors, s.Events.Errors+s.Events.Read)
		for _, l := range s.Events.ErrorLines {
			fmt.Fprintln(errOut, "  "+l)
		}
	}
	if len(sc.Expectations) == 0 {
		return 0
	}
	scenario.PrintResults(out, results)
	if !scenario.Passed(results) {
		return 1
	}
	return 0
}

// buildReport writes the run's report (internal/analysis/report), with the scenario's expectations, and returns its
// summary's metrics.
func buildReport(runDir string, eval scenario.Evaluator, keepRaw bool) (scenario.Metrics, error) {
	opts := []report.Option{scenario.ReportChecks(eval), report.WithPrintForms()}
	if keepRaw {
		opts = append(opts, report.KeepRaw())
	}
	s, err := report.Build(runDir, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func printTable(w io.Writer, l *lab.Lab) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tKIND\tADDRESSES\tPID\tSTATE")
	for _, s := range l.Status() {
		pid := "-"
		if s.PID != 0 {
			pid = fmt.Sprint(s.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Kind, strings.Join(s.Addresses, ", "), pid, s.State)
	}
	tw.Flush()
}
