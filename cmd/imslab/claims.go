package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/imslab/quasipool/internal/analysis/study"
)

// claims is "imslab claims": the overview of every claim of the given studies (study.ClaimsOverview) on out.
func claims(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("imslab claims", flag.ContinueOnError)
	fs.SetOutput(errOut)
	base := fs.String("base", ".", "the directory of the document the table goes into: links to the studies are relative to it")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: imslab claims [--base dir] <study.json>...\n\n"+
			"Writes one markdown table of every claim of the given studies (their study.json, as imslab study\n"+
			"wrote it), in the order of the paper, with its verdict and the numbers behind it.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	var studies []study.Published
	for _, path := range fs.Args() {
		link, err := filepath.Rel(*base, filepath.Dir(path))
		if err != nil {
			fmt.Fprintf(errOut, "imslab claims: %s: %v\n", path, err)
			return 2
		}
		p, err := study.ReadPublished(path, link)
		if err != nil {
			fmt.Fprintln(errOut, "imslab claims:", err)
			return 2
		}
		studies = append(studies, p)
	}
	fmt.Fprint(out, study.ClaimsOverview(studies))
	return 0
}
