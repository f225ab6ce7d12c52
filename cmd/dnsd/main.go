// Command dnsd runs the lab's authoritative DNS server: the zone derived from a topology (SRV and A records,
// SPEC §2.1) on UDP and TCP at one address.
//
//	dnsd                                  the embedded default topology, 127.0.0.1:1053
//	dnsd --topology my.yaml               another topology
//	dnsd --config run/config/dnsd.yaml    a node configuration written by the lab (internal/topology)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/imslab/quasipool/internal/nf/dnsd"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "dnsd") {
			msg = "dnsd: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dnsd", flag.ContinueOnError)
	configPath := fs.String("config", "", "node configuration file written by the lab (optional)")
	topo := fs.String("topology", "", "topology file the zone is built from (default: the embedded default topology)")
	listen := fs.String("listen", "", "UDP and TCP listen address (default: the topology's dns.listen)")
	ttl := fs.Duration("ttl", 0, "TTL of every record, whole seconds (default: the topology's dns.ttl)")
	events := fs.String("events", "", `events file, one JSON line per event ("-" = stdout)`)
	queryEvents := fs.Bool("query-events", false, "record one dns_query event per query")
	logFormat := fs.String("log-format", "", "text or json")
	logLevel := fs.String("log-level", "", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	var cfg dnsd.Config
	var logCfg obs.LogConfig
	eventsFile := ""
	if *configPath != "" {
		nc, err := topology.LoadNodeConfig(*configPath)
		if err != nil {
			return err
		}
		if nc.Kind != topology.KindDNS {
			return fmt.Errorf("%s: kind %q: want %q", *configPath, nc.Kind, topology.KindDNS)
		}
		cfg = dnsd.Config{Listen: nc.Listen, Topology: nc.DNS.Topology, TTL: nc.DNS.TTL}
		logCfg = obs.LogConfig{Format: nc.Log.Format, Level: nc.Log.Level}
		eventsFile = nc.EventsFile
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.Topology, *topo)
	set(&cfg.Listen, *listen)
	set(&eventsFile, *events)
	set(&logCfg.Format, *logFormat)
	set(&logCfg.Level, *logLevel)
	if *ttl != 0 {
		cfg.TTL = *ttl
	}
	if *queryEvents {
		cfg.QueryEvents = true
	}
	log, err := obs.NewLogger(os.Stderr, logCfg, "dnsd")
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	rec, err := obs.OpenRecorder(eventsFile, "dnsd")
	if err != nil {
		return err
	}
	defer rec.Close()
	srv, err := dnsd.New(cfg, dnsd.WithLogger(log), dnsd.WithEvents(rec))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return srv.Run(ctx)
}
