package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/netns"
)

// clean is "imslab clean": it removes what crashed runs left behind, each part printed on a line of its own:
// the namespace networks of runs whose owner process is gone (netns.Clean), the empty cpu cgroups of slow faults
// (lab.RemoveStaleCPUCgroups), and the compose projects whose owner process is gone (compose.CleanProjects;
// skipped with a note when no Docker engine answers). A live run's namespaces, cgroups and project are left
// alone. The error is the namespace part's (without root it cannot remove anything), or a removal that failed.
func clean(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("imslab clean", flag.ContinueOnError)
	dir := fs.String("record-dir", netns.DefaultRecordDir, "where namespace runs record their owner")
	cgRoot := fs.String("cpu-cgroup-root", lab.CPUCgroupRoot, "where the cgroup v1 cpu controller is mounted")
	sock := fs.String("docker-socket", "", "the Docker Engine's unix socket (default: DOCKER_HOST or "+
		compose.DefaultSocket+")")
	only := fs.String("parts", "namespaces,cgroups,compose", "what to clean, comma-separated: namespaces, cgroups, compose")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("clean: unexpected arguments %q", fs.Args())
	}
	parts := map[string]bool{}
	for _, p := range strings.Split(*only, ",") {
		p = strings.TrimSpace(p)
		if p != "namespaces" && p != "cgroups" && p != "compose" {
			return fmt.Errorf("clean: --parts: %q is not a part (namespaces, cgroups, compose)", p)
		}
		parts[p] = true
	}
	ctx := context.Background()
	var errs []error

	if !parts["namespaces"] {
		fmt.Fprintln(out, "clean: namespaces: skipped (--parts)")
	} else if rm, err := netns.Clean(ctx, *dir); err != nil {
		fmt.Fprintln(out, "clean: namespaces: not cleaned:", err)
		errs = append(errs, fmt.Errorf("clean: %w", err))
	} else {
		fmt.Fprintln(out, "clean: namespaces:", rm)
	}

	lab.CPUCgroupRoot = *cgRoot
	if !parts["cgroups"] {
		fmt.Fprintln(out, "clean: cpu cgroups: skipped (--parts)")
	} else if rm := lab.RemoveStaleCPUCgroups(); len(rm) > 0 {
		names := make([]string, len(rm))
		for i, d := range rm {
			names[i] = filepath.Base(d)
		}
		fmt.Fprintf(out, "clean: cpu cgroups: removed %d (%v) under %s\n", len(rm), names, *cgRoot)
	} else {
		fmt.Fprintln(out, "clean: cpu cgroups: none left behind under", *cgRoot)
	}

	if !parts["compose"] {
		fmt.Fprintln(out, "clean: compose: skipped (--parts)")
		return errors.Join(errs...)
	}
	var eng *compose.Engine
	if *sock != "" {
		eng = compose.NewEngineAt(*sock)
	} else {
		var err error
		if eng, err = compose.NewEngine(); err != nil {
			fmt.Fprintln(out, "clean: compose: skipped:", err)
			return errors.Join(errs...)
		}
	}
	res, err := compose.CleanProjects(ctx, eng, nil)
	switch {
	case errors.Is(err, compose.ErrNoEngine):
		fmt.Fprintln(out, "clean: compose: skipped:", err)
	case err != nil:
		fmt.Fprintln(out, "clean: compose:", res)
		errs = append(errs, fmt.Errorf("clean: compose: %w", err))
	default:
		fmt.Fprintln(out, "clean: compose:", res)
	}
	return errors.Join(errs...)
}
