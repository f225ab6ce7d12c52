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

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/analysis/study"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

// runStudy is "imslab study": it returns the exit status (study.ExitOK, ExitRuns, ExitError).
func runStudy(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("imslab study", flag.ContinueOnError)
	fs.SetOutput(errOut)
	quick := fs.Bool("quick", false, "apply the study file's quick blocks (fewer repetitions, shorter runs: what CI runs)")
	outDir := fs.String("out", "", "output directory (default: the study file's out, with -quick appended under --quick)")
	dryRun := fs.Bool("dry-run", false, "print the runs in the order they would run, and which are done, without running any")
	binDir := fs.String("bin-dir", "", "use prebuilt node binaries from this directory instead of building")
	repo := fs.String("repo", "", "repository root (default: found from the working directory)")
	useNetns := fs.Bool("netns", false, "local backend: every node in its own network namespace (root, Linux)")
	readyTimeout := fs.Duration("ready-timeout", 30*time.Second, "how long one node may take to become ready")
	grace := fs.Duration("grace", 5*time.Second, "wait between SIGTERM and SIGKILL when stopping a node")
	progress := fs.Duration("progress", 10*time.Second, "interval of the progress line of each run")
	logFormat := fs.String("log-format", "", "text or json (the runner's and lab's own log, on stderr)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	portOffset := portOffsetFlag(fs)
	only := fs.String("experiments", "", "comma-separated experiments to run (a sweep's name runs all its points): "+
		"a part of the study, e.g. one per core beside another with its own --port-offset; its outputs have no claims, "+
		"which a --results-only pass without this flag adds")
	resultsOnly := fs.Bool("results-only", false, "run nothing: rewrite study.json, study.md, results.md and figures/ "+
		"from the runs already done under --out, and list the pending ones (exit 1 when some are)")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: imslab study <study.yaml> [--quick] [--out dir] [--dry-run | --results-only]\n\n"+
			"Runs every experiment × scheme × repetition of a study file (docs/study.md), interleaved (repetition 1\n"+
			"of everything, then 2, …) into <out>/<experiment>/<variant>/rep<k>/; a run whose directory already\n"+
			"holds its finished run is not run again. Writes <out>/study.json and study.md (n, mean, median, 95 %%\n"+
			"CI, min/max per experiment, scheme and KPI) with the provenance of the results, results.md (the\n"+
			"headline KPIs from study.json) and figures/ (restoration curves, interruption ECDFs, KPIs with CIs).\n"+
			"--results-only rewrites those outputs from the runs already done and runs nothing.\n"+
			"An experiment's sweep block runs it once per value of one parameter (<exp>@<param>=<value>, the same\n"+
			"seeds) and adds a table and a figure per headline KPI against the parameter (docs/study.md, \"Sweeps\").\n\n"+
			"exit status: 0 every run done, 1 some runs could not be carried out (a rerun retries them) or, with\n"+
			"--results-only, are not done yet, 2 error\n\nflags:\n")
		fs.PrintDefaults()
	}
	file, status := parseWithFile(fs, args, errOut, "study")
	if status >= 0 {
		return status
	}
	f, err := study.Load(file)
	if err != nil {
		fmt.Fprintln(errOut, "imslab study:", err)
		return study.ExitError
	}
	plan, err := f.Plan(*quick)
	if err != nil {
		fmt.Fprintln(errOut, "imslab study:", err)
		return study.ExitError
	}
	if *only != "" {
		if err := plan.Only(strings.Split(*only, ",")); err != nil {
			fmt.Fprintln(errOut, "imslab study: --experiments:", err)
			return study.ExitError
		}
	}
	dir := *outDir
	if dir == "" {
		dir = f.Out
		if *quick {
			dir += "-quick"
		}
	}
	if *dryRun {
		return printPlan(out, errOut, plan, dir)
	}
	log, err := obs.NewLogger(errOut, obs.LogConfig{Format: *logFormat, Level: *logLevel}, "imslab")
	if err != nil {
		fmt.Fprintln(errOut, "imslab study: log:", err)
		return study.ExitError
	}
	repoDir := *repo
	if repoDir == "" {
		if wd, err := os.Getwd(); err == nil {
			repoDir, _ = lab.FindRepo(wd)
		}
	}
	if *resultsOnly {
		fmt.Fprintf(out, "study %s: results only, from the finished runs in %s\n", plan.Name, dir)
		res, err := study.Execute(context.Background(), study.Config{Plan: plan, File: file, OutDir: dir, Out: out,
			ResultsOnly: true, Provenance: study.Collect(repoDir, os.Args)})
		if res != nil {
			fmt.Fprintf(out, "\nstudy %s: %d of %d runs done; wrote %s, %s, %s and %s/\n", res.Study, res.RunsDone,
				res.RunsPlanned, filepath.Join(dir, study.FileJSON), filepath.Join(dir, study.FileMarkdown),
				filepath.Join(dir, study.FileResults), filepath.Join(dir, study.DirFigures))
		}
		if err != nil {
			fmt.Fprintln(errOut, "imslab study:", err)
		}
		return study.ExitCode(err)
	}
	run := compare.LabRunner(scenario.RunConfig{KeepGoing: false, RepoDir: *repo, BinDir: *binDir,
		ReadyTimeout: *readyTimeout, GracePeriod: *grace, Progress: *progress, Netns: *useNetns,
		PortOffset: *portOffset},
		scenario.WithLogger(log), scenario.WithOutput(out))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(out, "study %s: %d experiments, %d runs, into %s\n", plan.Name, len(plan.Experiments), len(plan.Runs), dir)
	res, err := study.Execute(ctx, study.Config{Plan: plan, File: file, OutDir: dir, Run: run, Out: out,
		Provenance: study.Collect(repoDir, os.Args)})
	if res != nil {
		fmt.Fprintf(out, "\nstudy %s: %d of %d runs with a report (%d found done), %d failed: %s\n", res.Study,
			res.RunsDone, res.RunsPlanned, res.RunsSkipped, res.RunsFailed, filepath.Join(dir, study.FileMarkdown))
		for _, e := range res.Experiments {
			for _, v := range e.Variants {
				fmt.Fprintf(out, "  %-20s %-28s n=%d, %d affected users; restored at detection + one probe interval %s\n",
					e.Name, v.Variant, v.Runs, v.AffectedUsers, meanCI(v.Metric("restored_at_bound")))
			}
		}
	}
	if err != nil {
		fmt.Fprintln(errOut, "imslab study:", err)
	}
	return study.ExitCode(err)
}

func meanCI(m *compare.RepeatMetric) string {
	if m == nil {
		return "–"
	}
	s := fmt.Sprintf("%.3g", m.Stat.Mean)
	if m.Stat.MeanCI != nil {
		s += fmt.Sprintf(" [%.3g, %.3g]", m.Stat.MeanCI.Low, m.Stat.MeanCI.High)
	}
	return s
}

// printPlan is --dry-run: the runs in order and whether their directory holds them already.
func printPlan(out, errOut io.Writer, plan *study.Plan, dir string) int {
	states, err := study.States(plan, dir)
	if err != nil {
		fmt.Fprintln(errOut, "imslab study:", err)
		return study.ExitError
	}
	todo := 0
	for i, r := range plan.Runs {
		fmt.Fprintf(out, "%4d  %-70s seed %-10d %s\n", i+1, filepath.Join(dir, r.Dir), r.Seed, states[i])
		if !strings.HasPrefix(states[i], "done") || strings.HasSuffix(states[i], "run again)") {
			todo++
		}
	}
	fmt.Fprintf(out, "%d runs, %d to run\n", len(plan.Runs), todo)
	return study.ExitOK
}
