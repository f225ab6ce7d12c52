package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

// generateCompose writes (or, with --check, verifies) the compose lab generated from a topology.
func generateCompose(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("imslab compose", flag.ContinueOnError)
	fs.SetOutput(errOut)
	topoPath := fs.String("topology", "", "topology file (default: the embedded default topology)")
	def := compose.DefaultOptions()
	file := fs.String("file", compose.CommittedFile, "compose file to write")
	dir := fs.String("config-dir", compose.CommittedDir, "directory of the node configurations (mounted at /lab)")
	subnet := fs.String("subnet", def.Subnet.String(), "the core network, an IPv4 /24 or larger; access and Cx are the blocks just below and above it (docs/compose.md)")
	phones := fs.Int("phones", def.Traffic.Phones, "phones of the traffic service (0 = no traffic service)")
	rate := fs.Float64("call-rate", def.Traffic.CallRate, "calls per second of the traffic service")
	check := fs.Bool("check", false, "write nothing; exit 1 naming the files that differ from what would be generated")
	noHealth := fs.Bool("no-healthcheck", false, "leave the engine's healthchecks out, depends_on orders the start only "+
		"(what a scenario run as root generates, checking readiness itself; scripts/compose-idle-cpu.sh measures the difference)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("compose: unexpected argument %q", fs.Arg(0))
	}
	b, err := generateBundle(*topoPath, *file, *dir, *subnet, *phones, *rate, *noHealth)
	if err != nil {
		return err
	}
	if *check {
		if stale := b.Stale(*file, *dir); len(stale) > 0 {
			return fmt.Errorf("compose: stale, run `go run ./cmd/imslab compose` to regenerate:\n  %s", strings.Join(stale, "\n  "))
		}
		fmt.Fprintf(out, "%s and %s are up to date\n", *file, *dir)
		return nil
	}
	if err := b.Write(*file, *dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s and %s/ (%d services; access %s, core %s, cx %s)\n", *file, *dir,
		len(compose.ServiceNames(b.Topology))+1, b.Networks.Access, b.Networks.Core, b.Networks.Cx)
	return nil
}

// generateBundle generates the compose lab as `imslab compose` does with these flags. The config directory is
// named in the compose file relative to the compose file's directory.
func generateBundle(topoPath, file, dir, subnet string, phones int, rate float64, noHealthcheck bool) (*compose.Bundle, error) {
	t := topology.Default()
	source := "topologies/default.yaml"
	if topoPath != "" {
		var err error
		if t, err = topology.Load(topoPath); err != nil {
			return nil, err
		}
		source = filepath.ToSlash(topoPath)
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil {
		return nil, fmt.Errorf("compose: --subnet: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(file), dir)
	if err != nil {
		return nil, fmt.Errorf("compose: --config-dir: %w", err)
	}
	o := compose.Options{Subnet: p, ConfigDir: "./" + filepath.ToSlash(rel), Source: source, NoHealthcheck: noHealthcheck}
	if phones > 0 {
		o.Traffic = &compose.Traffic{Phones: phones, CallRate: rate}
	}
	return compose.Generate(t, o)
}

// buildImage builds the lab image from static binaries (no base image: works offline).
func buildImage(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("imslab image", flag.ContinueOnError)
	fs.SetOutput(errOut)
	tag := fs.String("tag", compose.DefaultImage, "image tag")
	repo := fs.String("repo", "", "repository root (default: found from the working directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir := *repo
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if dir, err = lab.FindRepo(wd); err != nil {
			return err
		}
	}
	log, err := obs.NewLogger(errOut, obs.LogConfig{}, "imslab")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := compose.BuildImage(ctx, dir, *tag, log); err != nil {
		return err
	}
	fmt.Fprintf(out, "built %s\n", *tag)
	return nil
}
