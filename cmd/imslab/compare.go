package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/imslab/quasipool/internal/analysis/provenance"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// labFlags are the flags compare and sweep share with run.
type labFlags struct {
	out, schemes, binDir, repo, logFormat, logLevel *string
	backend, image                                  *string
	seed                                            *int64
	repeat                                          *int
	keepGoing                                       *bool
	readyTimeout, grace, progress                   *time.Duration
	portOffset                                      *int
}

func addLabFlags(fs *flag.FlagSet, defSchemes string) *labFlags {
	return &labFlags{
		out:     fs.String("out", "", "output directory (default: runs/<command>-<scenario>-<date-time>)"),
		schemes: fs.String("schemes", defSchemes, "comma-separated variants <scheme>[+<option>…] (docs/compare.md)"),
		seed:    fs.Int64("seed", 0, "the runs' seed (phones, nodes, fault draws), the same for every scheme; repetitions add 1, 2, … (0 = the scenario's, or a new one; printed)"),
		repeat: fs.Int("repeat", 1, "run everything this many times with the seeds seed, seed+1, …, interleaved, and "+
			"aggregate (repeat.json/md with n and 95 % CI, docs/compare.md)"),
		keepGoing:    fs.Bool("keep-going", false, "a run that cannot be carried out is recorded and the next one runs (exit 1 at the end)"),
		binDir:       fs.String("bin-dir", "", "use prebuilt node binaries from this directory instead of building"),
		backend:      fs.String("backend", scenario.BackendLocal, "where each lab runs: local (processes) or compose (Docker containers)"),
		image:        fs.String("image", "", "compose backend: the lab image (built when missing)"),
		repo:         fs.String("repo", "", "repository root (default: found from the working directory)"),
		readyTimeout: fs.Duration("ready-timeout", 30*time.Second, "how long one node may take to become ready"),
		grace:        fs.Duration("grace", 5*time.Second, "wait between SIGTERM and SIGKILL when stopping a node"),
		progress:     fs.Duration("progress", 10*time.Second, "interval of the progress line of each run"),
		logFormat:    fs.String("log-format", "", "text or json (the runner's and lab's own log, on stderr)"),
		logLevel:     fs.String("log-level", "warn", "debug, info, warn or error"),
		portOffset:   portOffsetFlag(fs),
	}
}

// parseWithFile parses flags with the scenario file before or after them; the status is the exit status when
// the command must stop (-h: 0, bad flags: 2), -1 otherwise.
func parseWithFile(fs *flag.FlagSet, args []string, errOut io.Writer, cmd string) (string, int) {
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", compare.ExitOK
		}
		return "", compare.ExitError
	}
	rest := fs.Args()
	if file == "" && len(rest) > 0 {
		// Flags may also follow the file: imslab <cmd> --seed 7 f.yaml --out d.
		file = rest[0]
		if err := fs.Parse(rest[1:]); err != nil {
			return "", compare.ExitError
		}
		rest = fs.Args()
	}
	if file == "" || len(rest) > 0 {
		fmt.Fprintf(errOut, "imslab %s: give exactly one scenario file (imslab %s -h)\n", cmd, cmd)
		return "", compare.ExitError
	}
	return file, -1
}

func (f *labFlags) runner(errOut io.Writer, out io.Writer) (compare.RunFunc, error) {
	log, err := obs.NewLogger(errOut, obs.LogConfig{Format: *f.logFormat, Level: *f.logLevel}, "imslab")
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	return compare.LabRunner(scenario.RunConfig{KeepGoing: *f.keepGoing, RepoDir: *f.repo, BinDir: *f.binDir,
		ReadyTimeout: *f.readyTimeout, GracePeriod: *f.grace, Progress: *f.progress, Backend: *f.backend, Image: *f.image,
		PortOffset: *f.portOffset},
		scenario.WithLogger(log), scenario.WithOutput(out)), nil
}

func defaultOut(out, cmd, name string) string {
	if out != "" {
		return out
	}
	return filepath.Join("runs", cmd+"-"+name+"-"+time.Now().Format("20060102-150405"))
}

const exitStatusDoc = "exit status: 0 every run was carried out (expectations a scheme misses are reported, not fatal), " +
	"1 with --keep-going some runs could not be carried out, 2 error"

// runCompare is "imslab compare": it returns the exit status (compare.ExitOK, ExitRuns, ExitError).
func runCompare(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("imslab compare", flag.ContinueOnError)
	fs.SetOutput(errOut)
	lf := addLabFlags(fs, strings.Join([]string{topology.SchemeQuasiPool, topology.SchemeLoadSharing,
		topology.SchemeNPlus1}, ","))
	poolSize := fs.Int("pool-size", 0, "active members of both pools, replacing the scenario's sizes (0 = keep; mutual needs an even number)")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: imslab compare <scenario.yaml> [--schemes a,b,…] [--pool-size n] [--out dir] [--seed n] [--repeat K] [--keep-going]\n\n"+
			"Runs the scenario once per scheme variant (same traffic and seed; the scenario's pool sizes are the\n"+
			"active members) into <out>/<variant>/ and writes <out>/compare.md, compare.html, compare.json,\n"+
			"table1.csv and plots/ (docs/compare.md).\n\nschemes: %s\noptions (scheme+option):\n",
			strings.Join(topology.Schemes, ", "))
		for _, o := range compare.OptionNames() {
			fmt.Fprintf(errOut, "  %-15s %s\n", o, compare.OptionDoc(o))
		}
		fmt.Fprintf(errOut, "\n%s\n\nflags:\n", exitStatusDoc)
		fs.PrintDefaults()
	}
	file, status := parseWithFile(fs, args, errOut, "compare")
	if status >= 0 {
		return status
	}
	if *lf.repeat < 1 {
		fmt.Fprintln(errOut, "imslab compare: --repeat: must be at least 1")
		return compare.ExitError
	}
	variants, err := compare.ParseVariants(*lf.schemes)
	if err != nil {
		fmt.Fprintln(errOut, "imslab compare:", err)
		return compare.ExitError
	}
	sc, err := scenario.Load(file)
	if err != nil {
		fmt.Fprintln(errOut, "imslab compare:", err)
		return compare.ExitError
	}
	run, err := lf.runner(errOut, out)
	if err != nil {
		fmt.Fprintln(errOut, "imslab compare:", err)
		return compare.ExitError
	}
	dir := defaultOut(*lf.out, "compare", sc.Name)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := compare.Run(ctx, compare.Config{Scenario: sc, ScenarioFile: file, Variants: variants, OutDir: dir,
		Seed: *lf.seed, KeepGoing: *lf.keepGoing, Repeat: *lf.repeat, Run: run, Out: out, PoolSize: *poolSize,
		Provenance: new(provenance.Collect(*lf.repo, os.Args))})
	if res != nil {
		fmt.Fprintf(out, "\ncomparison of %s (seed %d): %s\n", sc.Name, res.Seed, filepath.Join(dir, compare.FileMarkdown))
		for _, r := range res.Rows {
			fmt.Fprintf(out, "  %-28s %s\n", r.Variant, r.Line())
			if r.Repeat != nil {
				fmt.Fprintf(out, "  %-28s %d runs: MO interruption %s; MT %s\n", "", r.Repeat.Runs,
					r.Repeat.MeanCI("mo_interruption_s"), r.Repeat.MeanCI("mt_interruption_s"))
			}
		}
	}
	if err != nil {
		fmt.Fprintln(errOut, "imslab compare:", err)
	}
	return compare.ExitCode(err)
}

// runSweep is "imslab sweep".
func runSweep(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("imslab sweep", flag.ContinueOnError)
	fs.SetOutput(errOut)
	lf := addLabFlags(fs, topology.SchemeQuasiPool)
	var params multiFlag
	fs.Var(&params, "param", "a varied parameter, name=v1,v2,… (repeat for several; every combination runs)")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: imslab sweep <scenario.yaml> --param name=v1,v2 [--param …] [--schemes a,b] [--out dir]\n\n"+
			"One run per combination of the parameters' values and scheme variant, in <out>/<name>=<value>_…/<variant>/;\n"+
			"writes <out>/sweep.csv (one row per run) and plots/sweep_<param>.svg (docs/compare.md).\n\nparameters:\n")
		for _, p := range compare.SweepParamNames() {
			fmt.Fprintf(errOut, "  %s\n", p)
		}
		fmt.Fprintf(errOut, "\n%s\n\nflags:\n", exitStatusDoc)
		fs.PrintDefaults()
	}
	file, status := parseWithFile(fs, args, errOut, "sweep")
	if status >= 0 {
		return status
	}
	if *lf.repeat < 1 {
		fmt.Fprintln(errOut, "imslab sweep: --repeat: must be at least 1")
		return compare.ExitError
	}
	if len(params) == 0 {
		fmt.Fprintln(errOut, "imslab sweep: give at least one --param name=v1,v2 (imslab sweep -h)")
		return compare.ExitError
	}
	var ps []compare.Param
	for _, s := range params {
		p, err := compare.ParseParam(s)
		if err != nil {
			fmt.Fprintln(errOut, "imslab sweep:", err)
			return compare.ExitError
		}
		ps = append(ps, p)
	}
	variants, err := compare.ParseVariants(*lf.schemes)
	if err != nil {
		fmt.Fprintln(errOut, "imslab sweep:", err)
		return compare.ExitError
	}
	sc, err := scenario.Load(file)
	if err != nil {
		fmt.Fprintln(errOut, "imslab sweep:", err)
		return compare.ExitError
	}
	run, err := lf.runner(errOut, out)
	if err != nil {
		fmt.Fprintln(errOut, "imslab sweep:", err)
		return compare.ExitError
	}
	dir := defaultOut(*lf.out, "sweep", sc.Name)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := compare.Sweep(ctx, compare.SweepConfig{Scenario: sc, ScenarioFile: file, Params: ps,
		Variants: variants, OutDir: dir, Seed: *lf.seed, KeepGoing: *lf.keepGoing, Repeat: *lf.repeat, Run: run, Out: out})
	fmt.Fprintf(out, "\nsweep of %s: %d runs, %s\n", sc.Name, len(rows), filepath.Join(dir, compare.FileSweep))
	if err != nil {
		fmt.Fprintln(errOut, "imslab sweep:", err)
	}
	return compare.ExitCode(err)
}

// envPortOffset is the environment variable that gives --port-offset its default.
const envPortOffset = "IMSLAB_PORT_OFFSET"

// portOffsetFlag adds --port-offset, whose default is $IMSLAB_PORT_OFFSET (0 when unset or not a number).
func portOffsetFlag(fs *flag.FlagSet) *int {
	def, _ := strconv.Atoi(os.Getenv(envPortOffset))
	return fs.Int("port-offset", def, "local backend: add this to every port the lab listens on, to run beside another lab "+
		"(e.g. 20000; default $"+envPortOffset+", else 0)")
}
