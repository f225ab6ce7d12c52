package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/imslab/quasipool/internal/harness/lab"
)

// buildCmd builds every command into the lab's build cache and prints the directory.
func buildCmd(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(errOut)
	race := fs.Bool("race", false, "build with the race detector")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(errOut, "imslab build: unexpected arguments %q\n", fs.Args())
		return 2
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(errOut, "imslab build:", err)
		return 2
	}
	repo, err := lab.FindRepo(wd)
	if err != nil {
		fmt.Fprintln(errOut, "imslab build:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := lab.BuildBinaries(ctx, lab.BuildOptions{Repo: repo, Race: *race})
	if err != nil {
		fmt.Fprintln(errOut, "imslab build:", err)
		return 2
	}
	fmt.Fprintln(out, dir)
	return 0
}
