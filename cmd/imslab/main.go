// Command imslab runs the testbed's lab.
//
//	imslab up [--topology f] [--run-dir d] [--only n1,n2]   build the nodes, start them, wait for Ctrl-C
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/imslab/quasipool/internal/lab"
	"github.com/imslab/quasipool/internal/obs"
	"github.com/imslab/quasipool/internal/topology"
)

const usage = `usage: imslab <command> [flags]

commands:
  up    build the node binaries, start every node of the topology as a local process, print the table and
        stop them all on Ctrl-C or SIGTERM

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
	logFormat := fs.String("log-format", "", "text or json (the lab's own log)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error")
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
	dir := *runDir
	latest := false
	if dir == "" {
		dir = filepath.Join("runs", time.Now().Format("20060102-150405"))
		latest = true
	}
	cfg := lab.Config{Topology: t, RunDir: dir, RepoDir: *repo, BinDir: *binDir, ReadyTimeout: *readyTimeout,
		GracePeriod: *grace}
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
	fmt.Fprintf(out, "\nrun dir %s (logs/, events/). Ctrl-C stops the lab.\n", l.RunDir())
	<-ctx.Done()
	log.Info("stopping the lab")
	return l.Down()
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
