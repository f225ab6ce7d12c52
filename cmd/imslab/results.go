package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/imslab/quasipool/internal/analysis/results"
	"github.com/imslab/quasipool/internal/analysis/study"
	"github.com/imslab/quasipool/internal/harness/lab"
)

// runResults is "imslab results": docs/results.md's generated sections from the committed runs (make results).
func runResults(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("imslab results", flag.ContinueOnError)
	fs.SetOutput(errOut)
	repo := fs.String("repo", "", "repository root (default: found from the working directory)")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: imslab results [--repo dir] [all | <study> [dir] | storms | claims]\n\n"+
			"Regenerates docs/results.md's generated sections from the committed runs; nothing is run.\n"+
			"  all              every published study (docs/results/study-<name>), the storms, then the claims (default)\n"+
			"  <study> [dir]    studies/<study>.yaml: its study.json, study.md, results.md and figures/ rewritten from\n"+
			"                   its runs in dir (default docs/results/study-<study>), and its section of docs/results.md;\n"+
			"                   figures/ gets every figure's print forms too (<name>.col|full.pdf|svg|png: 3.5 in and\n"+
			"                   7 in), which docs/results/.gitignore keeps out of the repository (all: screen SVGs only)\n"+
			"  storms           issue 13's 100k storm table (docs/results/issue13/storm-100k-*)\n"+
			"  claims           the overview of every claim, from the studies' study.json\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	root := *repo
	if root == "" {
		wd, err := os.Getwd()
		if err == nil {
			root, err = lab.FindRepo(wd)
		}
		if err != nil {
			fmt.Fprintln(errOut, "imslab results: repository root:", err)
			return 2
		}
	}
	// The study files name their scenarios relative to the repository, and each study records its file so.
	if err := os.Chdir(root); err != nil {
		fmt.Fprintln(errOut, "imslab results:", err)
		return 2
	}
	c := results.Config{Root: ".", Out: out, Provenance: study.Collect(".", os.Args)}
	what := "all"
	if fs.NArg() > 0 {
		what = fs.Arg(0)
	}
	if fs.NArg() > 2 || fs.NArg() == 2 && (what == "all" || what == "storms" || what == "claims") {
		fs.Usage()
		return 2
	}
	var err error
	switch what {
	case "all":
		err = results.All(context.Background(), c)
	case "storms":
		err = results.Storms(c)
	case "claims":
		err = results.Claims(c)
	default:
		c.PrintForms = true // one study, on demand: its figures for a paper too
		err = results.Study(context.Background(), c, what, fs.Arg(1))
	}
	if err != nil {
		fmt.Fprintln(errOut, "imslab results:", err)
		return 1
	}
	return 0
}
