package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/imslab/quasipool/internal/netns"
)

// clean is "imslab clean": it removes the namespace networks of runs whose owner process is gone (netns.Clean).
func clean(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("imslab clean", flag.ContinueOnError)
	dir := fs.String("record-dir", netns.DefaultRecordDir, "where namespace runs record their owner")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("clean: unexpected arguments %q", fs.Args())
	}
	rm, err := netns.Clean(context.Background(), *dir)
	if err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	fmt.Fprintln(out, "clean:", rm)
	return nil
}
