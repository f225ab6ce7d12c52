package main

// imslab bench and imslab memory: the flags; the bench itself is internal/bench (docs/performance.md).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/imslab/quasipool/internal/bench"
	"github.com/imslab/quasipool/internal/runtime/nfrun"
	"github.com/imslab/quasipool/internal/topology"
)

// runBench is "imslab bench": it returns the exit status (0 every step ran, 1 a step failed, 2 bad flags).
func runBench(args []string, out, errOut io.Writer) int {
	if len(args) > 0 && args[0] == "relay" {
		if err := benchRelay(args[1:]); err != nil {
			fmt.Fprintln(errOut, "imslab bench relay:", err)
			return 1
		}
		return 0
	}
	c, err := parseBenchFlags(args, errOut)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(errOut, "imslab bench:", err)
		return 2
	}
	if c.Repo, err = bench.RepoRoot(c.Repo); err != nil {
		fmt.Fprintln(errOut, "imslab bench:", err)
		return 2
	}
	c.Command, c.Argv = "imslab bench "+strings.Join(args, " "), os.Args
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench.Run(ctx, *c, out, errOut); err != nil {
		fmt.Fprintln(errOut, "imslab bench:", err)
		return 1
	}
	return 0
}

// parseBenchFlags parses the flags of imslab bench; every bad value is an error naming its flag.
func parseBenchFlags(args []string, errOut io.Writer) (*bench.Config, error) {
	fs := flag.NewFlagSet("imslab bench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	kinds := fs.String("kinds", strings.Join(bench.Kinds, ","),
		"the kinds of step to run, comma-separated: proxy (lab proxy vs Kamailio), capacity (full-chain calls/s), "+
			"registration (registrations/s), memory (registered phones → memory of all nodes)")
	rateList := fs.String("rate", "100", "proxy: calls per second SIPp places through the proxy; several (100,300) run the steps at each")
	duration := fs.Duration("duration", 20*time.Second, "proxy: how long SIPp places calls in each step")
	steps := fs.String("steps", "kamailio,lab,kamailio,lab,kamailio,lab",
		"proxy: the proxies in the order they run, comma-separated (kamailio, lab, lab-bare); alternate them so noise hits all")
	callRates := fs.String("call-rates", "100,300,500", "capacity: full-chain call rates, one step each (calls/s)")
	callDuration := fs.Duration("call-duration", 30*time.Second, "capacity: traffic time of each step after every phone registered")
	callHold := fs.Duration("call-hold", time.Second, "capacity: hold time of each answered call")
	regRates := fs.String("reg-rates", "300,1000", "registration: registration rates, one step each (registrations/s)")
	regDuration := fs.Duration("reg-duration", 10*time.Second, "registration: how long each step registers phones (phones = rate × this)")
	phones := fs.String("phones", "10000,100000", "memory: registered phones of each memory point")
	memRegRate := fs.Float64("mem-reg-rate", 100, "memory: the rate the phones register at (registrations/s)")
	memHold := fs.Duration("mem-hold", 20*time.Second, "memory: how long the lab runs after every phone registered")
	outDir := fs.String("out", "", "output directory for bench.md and bench.json (default: runs/bench-<date-time>)")
	repo := fs.String("repo", "", "repository root (default: found from the working directory)")
	binDir := fs.String("bin-dir", "", "lab steps: prebuilt node binaries (default: built once into <out>/bin)")
	portBase := fs.Int("port-base", 45000, "lab steps: the lab's nodes listen on port-base+53 … port-base+99; "+
		"proxy steps use port-base+100 … +102 (0: proxy steps on free ports)")
	install := fs.Bool("install", true, "apt-get install kamailio when it is missing (root only)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c := &bench.Config{Duration: *duration, CallDuration: *callDuration, CallHold: *callHold, RegDuration: *regDuration,
		MemRegRate: *memRegRate, MemHold: *memHold, OutDir: *outDir, Repo: *repo, BinDir: *binDir, PortBase: *portBase,
		Install: *install}
	var err error
	for _, k := range strings.Split(*kinds, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(bench.Kinds, k) {
			return nil, fmt.Errorf("--kinds: unknown kind %q (%s)", k, strings.Join(bench.Kinds, ", "))
		}
		if !slices.Contains(c.Kinds, k) {
			c.Kinds = append(c.Kinds, k)
		}
	}
	if c.Rates, err = parseRates("--rate", *rateList, "calls per second"); err != nil {
		return nil, err
	}
	if c.CallRates, err = parseRates("--call-rates", *callRates, "calls per second"); err != nil {
		return nil, err
	}
	if c.RegRates, err = parseRates("--reg-rates", *regRates, "registrations per second"); err != nil {
		return nil, err
	}
	for _, f := range strings.Split(*phones, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > topology.MaxLabSubscribers {
			return nil, fmt.Errorf("--phones %q: must be a whole number of phones from 1 to %d", f, topology.MaxLabSubscribers)
		}
		c.Phones = append(c.Phones, n)
	}
	for _, s := range strings.Split(*steps, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(bench.Proxies, s) {
			return nil, fmt.Errorf("--steps: unknown proxy %q (kamailio, lab or lab-bare)", s)
		}
		c.Steps = append(c.Steps, s)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--duration", c.Duration}, {"--call-duration", c.CallDuration}, {"--reg-duration", c.RegDuration}, {"--mem-hold", c.MemHold}} {
		if d.v < time.Second {
			return nil, fmt.Errorf("%s %s: must be at least 1s", d.name, d.v)
		}
	}
	if c.CallHold < 0 {
		return nil, fmt.Errorf("--call-hold %s: must not be negative", c.CallHold)
	}
	if bench.BadRate(c.MemRegRate) {
		return nil, fmt.Errorf("--mem-reg-rate %g: must be a positive number of registrations per second", c.MemRegRate)
	}
	if c.PortBase != 0 && (c.PortBase < 1024 || c.PortBase > 65535-110) {
		return nil, fmt.Errorf("--port-base %d: must be 0 or from 1024 to %d", c.PortBase, 65535-110)
	}
	for _, r := range c.RegRates {
		if n := math.Ceil(r * c.RegDuration.Seconds()); n > topology.MaxLabSubscribers {
			return nil, fmt.Errorf("--reg-rates %g × --reg-duration %s = %.0f phones: the lab provisions at most %d",
				r, c.RegDuration, n, topology.MaxLabSubscribers)
		}
	}
	return c, nil
}

func parseRates(name, list, unit string) ([]float64, error) {
	var rates []float64
	for _, f := range strings.Split(list, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || bench.BadRate(r) {
			return nil, fmt.Errorf("%s %q: must be a positive number of %s", name, f, unit)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

// benchRelay is "imslab bench relay": the lab's proxy run alone (bench.Relay), which the proxy steps start.
func benchRelay(args []string) error {
	fs := flag.NewFlagSet("imslab bench relay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "SIP UDP address")
	next := fs.String("next", "", "ip:port every initial request is relayed to (required)")
	host := fs.String("host", "bench.ims.test", "the proxy's host name (its Record-Route)")
	trust := fs.String("trust", "", "comma-separated ip:port of the peers treated as core nodes")
	events := fs.String("events", "", "record events (JSON lines) to this file, as a lab node does")
	trace := fs.String("trace", "", "record the message trace (pcapng segments) to this file, as a lab node does")
	memLimit := fs.Int64("memory-limit-mib", nfrun.DefaultMemoryLimitMiB, "soft memory limit of the Go runtime in MiB, the nodes' default (GOMEMLIMIT overrides)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := bench.RelayConfig{Listen: *listen, Next: *next, Host: *host, Events: *events, Trace: *trace, MemoryLimitMiB: *memLimit}
	if *trust != "" {
		c.Trust = strings.Split(*trust, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.Relay(ctx, c)
}

// memory is "imslab memory": the memory point of a run directory (bench.ReadMemoryPoint).
func memory(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("memory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.String("json", "", "also write the result as JSON to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: imslab memory [--json file] <run-dir>\n\nthe nodes' resident memory before the phones registered, at t0 and at its peak after t0, from\nevents/lab.jsonl; the phones' process apart (docs/performance.md, \"Memory point\")")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	mp, err := bench.ReadMemoryPoint(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "imslab memory: %v\n", err)
		return 2
	}
	bench.WriteMemoryTable(stdout, mp)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(mp, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(stderr, "imslab memory: %v\n", err)
			return 2
		}
	}
	return 0
}
