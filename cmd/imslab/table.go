package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/imslab/quasipool/internal/analysis/results"
	"github.com/imslab/quasipool/internal/bench"
	"github.com/imslab/quasipool/internal/harness/lab"
)

const tableUsage = `usage: imslab table <table> [flags] [args]

Prints a markdown table read from committed runs (summary.json, expectations.json, bench.json); nothing is typed
by hand and, without --run, nothing is run.

tables:
  kpis [--metrics a,b] <run dir>...      one row per run (its summary.json), one column per KPI (default: the
                                         takeover KPIs)
  storms <published run dir>...          storm runs published by imslab publish run, one column per run
  issue11 [--run [scenario...]]          issue 11's process-fault scenarios (docs/results/issue11/<scenario>);
                                         --run runs them first (seed 42; compose/<name> on the compose backend)
  issue11-net [--run [scenario:seed...]] issue 11's network-fault runs (docs/results/issue11/<scenario>-seed<N>);
                                         --run runs them first, every node in its own network namespace (root)
  mutual [--run] [--out dir]             1+1 mutual backup vs the quasi-pool: writes <dir>/README.md (default
                                         docs/results/mutual) from its runs; --run measures them first (12 min)
  kpi-regression [--run] [--out dir]     the quasi-pool's KPIs, committed comparisons vs this code: writes
                                         <dir>/README.md (default docs/results/kpi-regression); --run re-runs first
  overload [dir]                         the BAC's chain cap against no chain signal (dir with cap/ and nochain/
                                         bench.json; default docs/results/bench/overload-2026-12-01/f240e19)
  late-users <study dir> <experiment> <scheme>   the affected users restored after the bound, tab-separated
  health-timeouts [dir]                  docs/results/health-timeouts/README.md's table
  memory-marginal <small.json> <large.json> [--to 100000]   the nodes' memory per extra registered phone from
                                         two memory points (imslab memory --json) and its extrapolation
  capacity-ab --out <dir> NAME=ENV…      the settings compared by scripts/capacity-ab.sh, from <dir>/<name>-<k>/bench.json
  capacity-step <dir>                    one line: the capacity step of the bench run in <dir>

The paths without a directory argument are the repository's (found from the working directory, or --repo).`

// runTable is "imslab table".
func runTable(args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(errOut, tableUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name := args[0]
	fs := flag.NewFlagSet("imslab table "+name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprintln(errOut, tableUsage+"\n\nflags:"); fs.PrintDefaults() }
	repo := fs.String("repo", "", "repository root (default: found from the working directory)")
	run := fs.Bool("run", false, "issue11, issue11-net, mutual, kpi-regression: run the scenarios or comparisons first (a lab; minutes)")
	outDir := fs.String("out", "", "mutual, kpi-regression: the directory of the runs and the README (default: the published one); "+
		"capacity-ab: the directory of the settings' bench runs")
	to := fs.Int("to", 100000, "memory-marginal: the phones to extrapolate to")
	metrics := fs.String("metrics", "", "kpis: the summary metrics to show, comma-separated (dotted paths; default the takeover KPIs)")
	// The arguments and the flags in any order.
	var pos []string
	for rest := args[1:]; ; {
		if err := fs.Parse(rest); err != nil {
			if err == flag.ErrHelp {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	arg := func(i int) string {
		if i < len(pos) {
			return pos[i]
		}
		return ""
	}
	// Tables of the repository's published runs: from its root, as their documents name the paths.
	inRepo := func() bool {
		root := *repo
		if root == "" {
			wd, err := os.Getwd()
			if err == nil {
				root, err = lab.FindRepo(wd)
			}
			if err != nil {
				fmt.Fprintln(errOut, "imslab table: repository root:", err)
				return false
			}
		}
		if err := os.Chdir(root); err != nil {
			fmt.Fprintln(errOut, "imslab table:", err)
			return false
		}
		return true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	self := func() results.RunFunc {
		exe, err := os.Executable()
		if err != nil {
			exe = os.Args[0]
		}
		return results.SelfRunner(exe)
	}
	var text string
	var err error
	switch name {
	case "kpis":
		if len(pos) == 0 {
			fmt.Fprintln(errOut, "usage: imslab table kpis [--metrics a,b,…] <run dir>...")
			return 2
		}
		var ms []string
		if *metrics != "" {
			ms = strings.Split(*metrics, ",")
		}
		text, err = results.KPITable(pos, ms)
	case "storms":
		if len(pos) == 0 {
			fmt.Fprintln(errOut, "usage: imslab table storms <published run dir>...")
			return 2
		}
		text, err = results.StormTable(pos)
	case "issue11", "issue11-net":
		if !inRepo() {
			return 2
		}
		network := name == "issue11-net"
		if *run {
			if err := results.RunIssue11(ctx, self(), results.Issue11Dir, network, pos); err != nil {
				fmt.Fprintln(errOut, "imslab table:", err)
				return 1
			}
		} else if len(pos) > 0 {
			fs.Usage()
			return 2
		}
		text, err = results.Issue11Table(results.Issue11Dir, network)
	case "mutual", "kpi-regression":
		if len(pos) > 0 || !inRepo() {
			return 2
		}
		dir := *outDir
		if dir == "" {
			dir = map[string]string{"mutual": results.MutualDir, "kpi-regression": results.KPIRegressionDir}[name]
		}
		if name == "mutual" {
			if *run {
				err = results.RunMutual(ctx, self(), ".", dir)
			}
			if err == nil {
				text, err = results.MutualREADME(dir)
			}
		} else {
			if *run {
				err = results.RunKPIRegression(ctx, self(), dir)
			}
			if err == nil {
				text, err = results.KPIRegressionREADME(".", filepath.Join("docs", "results"), dir, time.Now())
			}
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "README.md"), []byte(text), 0o644)
		}
	case "overload":
		dir := arg(0)
		if dir == "" {
			if !inRepo() {
				return 2
			}
			dir = "docs/results/bench/overload-2026-12-01/f240e19"
		}
		text, err = results.OverloadTable(dir)
	case "late-users":
		if len(pos) != 3 {
			fmt.Fprintln(errOut, "usage: imslab table late-users <study dir> <experiment> <scheme>")
			return 2
		}
		text, err = results.LateUsers(arg(0), arg(1), arg(2))
	case "health-timeouts":
		dir := arg(0)
		if dir == "" {
			if !inRepo() {
				return 2
			}
			dir = "docs/results/health-timeouts"
		}
		text, err = results.HealthTimeoutsTable(dir)
	case "memory-marginal":
		if len(pos) != 2 {
			fmt.Fprintln(errOut, "usage: imslab table memory-marginal <small.json> <large.json> [--to 100000]")
			return 2
		}
		var a, b *bench.MemoryPoint
		if a, err = bench.ReadMemoryPointFile(arg(0)); err == nil {
			if b, err = bench.ReadMemoryPointFile(arg(1)); err == nil {
				text = bench.MemoryMarginal(a, b, *to)
			}
		}
	case "capacity-ab":
		if *outDir == "" || len(pos) == 0 {
			fmt.Fprintln(errOut, "usage: imslab table capacity-ab --out <dir> NAME=ENV[,ENV…] …")
			return 2
		}
		var settings []bench.Setting
		for _, p := range pos {
			n, env, ok := strings.Cut(p, "=")
			if !ok || n == "" {
				fmt.Fprintf(errOut, "imslab table capacity-ab: %q: want NAME=ENV[,ENV…]\n", p)
				return 2
			}
			settings = append(settings, bench.Setting{Name: n, Env: env})
		}
		text, err = bench.SettingsTable(*outDir, settings)
	case "capacity-step":
		if len(pos) != 1 {
			fmt.Fprintln(errOut, "usage: imslab table capacity-step <bench out dir>")
			return 2
		}
		text, err = bench.CapacityLine(arg(0))
	default:
		fmt.Fprintf(errOut, "imslab table: unknown table %q\n%s\n", name, tableUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(errOut, "imslab table:", err)
		return 1
	}
	fmt.Fprint(out, text)
	return 0
}

// runPublish is "imslab publish": a run or a study copied into a directory that can be committed.
func runPublish(args []string, out, errOut io.Writer) int {
	const usage = `usage: imslab publish run <run dir> <scenario.yaml> <dest dir>
       imslab publish study [--no-plots] <study out dir> <dest dir>

run: what a large run's results come from (issue 13's 100k storms): summary.json gzipped, scenario.json,
  expectations.json, report.md, the plots, the scenario file and probes.json (the reachability probes counted
  from records.jsonl); not the traces, logs, events, records, calls.csv or users.csv. Read the summary with
  imslab table storms <dest dir>, or zcat <dest dir>/summary.json.gz.
study: study.json, study.md, results.md and figures/, and for every finished run study-run.json, study-env.json,
  summary.json, expectations.json, users.csv and scenario.json; repetition 1 of every experiment and scheme also
  keeps its ladders, timeline and restoration curve (the example runs docs/results.md links to). --no-plots
  copies neither those plots nor figures/ (a partial study's provisional figures). The copy is a resumable study
  directory (docs/study.md, "Publishing and resuming").`
	if len(args) == 0 {
		fmt.Fprintln(errOut, usage)
		return 2
	}
	fs := flag.NewFlagSet("imslab publish "+args[0], flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprintln(errOut, usage) }
	noPlots := fs.Bool("no-plots", false, "study: copy neither the example runs' plots nor figures/")
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	switch {
	case args[0] == "run" && fs.NArg() == 3:
		size, err := results.PublishRun(fs.Arg(0), fs.Arg(1), fs.Arg(2))
		if err != nil {
			fmt.Fprintln(errOut, "imslab publish:", err)
			return 1
		}
		fmt.Fprintf(out, "publish run: %s (%s)\n", fs.Arg(2), humanBytes(size))
	case args[0] == "study" && fs.NArg() == 2:
		n, size, err := results.PublishStudy(fs.Arg(0), fs.Arg(1), *noPlots)
		if err != nil {
			fmt.Fprintln(errOut, "imslab publish:", err)
			return 1
		}
		fmt.Fprintf(out, "publish study: %d finished runs and the study's outputs copied to %s (%s)\n", n, fs.Arg(1), humanBytes(size))
	default:
		fs.Usage()
		return 2
	}
	return 0
}

// humanBytes is a size in KiB, MiB or GiB, as du -h writes it.
func humanBytes(n int64) string {
	f, unit := float64(n), "B"
	for _, u := range []string{"K", "M", "G"} {
		if f < 1024 {
			break
		}
		f, unit = f/1024, u
	}
	if unit == "B" {
		return fmt.Sprintf("%d", n)
	}
	if f < 10 {
		return fmt.Sprintf("%.1f%s", f, unit)
	}
	return fmt.Sprintf("%.0f%s", f, unit)
}
