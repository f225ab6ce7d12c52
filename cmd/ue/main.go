// Command ue simulates many IMS phones in one process: they register (SIP Digest) through the BAC, refresh
// their registrations, answer calls, and place calls at a configured rate. Every registration and call is one
// JSON line in the records file.
//
//	ue [flags]
//	ue --config ue.yaml --call-rate 5 --records run/records.jsonl
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ue:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("ue", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML configuration file (optional; flags override it)")
	// Every flag below overrides the configuration field in parentheses only when it is given.
	fs.String("listen", "", "UDP listen address of all phones (listen; default 127.0.0.1:5100)")
	fs.String("advertise", "", "ip:port for Contact and Via when listening on a wildcard address (advertise)")
	fs.String("domain", "", "home domain and realm (domain; default ims.test)")
	fs.String("dns", "", "lab DNS server ip:port for the BAC's SRV record (dns_server; default 127.0.0.1:1053)")
	fs.String("proxy-host", "", "outbound proxy host name looked up as _sip._udp.<name> (proxy_host; default bac.<domain>)")
	fs.String("proxy", "", "outbound proxy ip:port, skips DNS (proxy)")
	fs.Int("from", 0, "first subscriber number (users.from; default 1)")
	fs.Int("count", 0, "number of phones (users.count; default 1)")
	fs.Int("digits", 0, "zero-padded width of the number (users.digits; default 4)")
	fs.String("prefix", "", "user name prefix (users.prefix; default user)")
	fs.String("password-prefix", "", "password prefix, password = prefix + number (users.password_prefix; default pass)")
	fs.Int("expires", 0, "registration period asked for, seconds (expires; default 600)")
	fs.Float64("register-rate", 0, "initial registrations per second (register_rate; default 50)")
	fs.Duration("register-retry", 0, "pause before a failed registration is tried again (register_retry; default 30s)")
	fs.Bool("deregister", false, "de-register every phone on shutdown (deregister)")
	fs.Bool("manual", false, "no registrations and no calls unless driven through the Go API (manual)")
	fs.Float64("call-rate", 0, "outgoing calls per second over all phones, 0 = none (call_rate)")
	fs.Duration("hold", 0, "hold time of an answered call (hold_time; default 5s)")
	fs.Duration("ring", 0, "ring time before a called phone answers (ring_time; default 100ms)")
	fs.Duration("call-timeout", 0, "CANCEL a call without a final answer after this (call_timeout; default 10s)")
	fs.String("on-restoration-504", "", "reregister or ignore: a phone's answer to a 504 with the 3GPP restoration body (on_restoration_504; default reregister)")
	fs.Float64("mix", 0, "fraction of the phones that place calls (mix; default 1)")
	fs.Int("callee-from", 0, "first number of a fixed callee range (callee_from)")
	fs.Int("callee-count", 0, "size of the fixed callee range, 0 = this process's phones (callee_count)")
	fs.String("records", "", `records file, one JSON line per call and registration, "-" = stdout (records_file)`)
	fs.String("events", "", `events file, "-" = stdout (events_file)`)
	fs.Int64("seed", 0, "seed of every random choice, 0 = pick one and print it (seed)")
	fs.Duration("t1", 0, "SIP timer T1 (timers.t1; default 500ms)")
	summaryPath := fs.String("summary", "", `write the final summary as JSON to this file, "-" = stdout`)
	fs.String("log-format", "", "text or json")
	fs.String("log-level", "", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := ue.DefaultConfig()
	if *configPath != "" {
		var err error
		if cfg, err = ue.LoadConfig(*configPath); err != nil {
			return err
		}
	}
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		if err := apply(&cfg, f); err != nil && ferr == nil {
			ferr = fmt.Errorf("flag --%s: %w", f.Name, err)
		}
	})
	if ferr != nil {
		return ferr
	}
	log, err := obs.NewLogger(os.Stderr, obs.LogConfig{Format: cfg.Log.Format, Level: cfg.Log.Level}, "ue")
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	u, err := ue.New(cfg, ue.WithLogger(log))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "ue: seed %d (repeat with --seed %d)\n", u.Seed(), u.Seed())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = u.Run(ctx)
	s := u.Summary()
	fmt.Fprintf(os.Stderr, "ue: %d phones: %d registered now (initial round %d ok, %d failed; %d de-registered); "+
		"calls placed %d ok, %d failed, %d skipped; calls received %d ok, %d failed\n",
		s.Phones, s.Registered, s.InitialOK, s.InitialFailed, s.Deregistered,
		s.CallsOK, s.CallsFailed, s.CallsSkipped, s.MTOK, s.MTFailed)
	if s.CallRateAsked > 0 {
		fmt.Fprintf(os.Stderr, "ue: call rate asked %.2f/s, placed %.2f/s (%d of %d arrivals in %.1f s)\n",
			s.CallRateAsked, s.CallRatePlaced, s.CallsPlaced, s.CallsOffered, s.GeneratorSeconds)
	}
	fmt.Fprintf(os.Stderr, "ue: own CPU %.2f s in %.1f s: %.1f %% of one core\n", s.CPUSeconds, s.WallSeconds, 100*s.CPUShare)
	if *summaryPath != "" {
		if werr := writeSummary(*summaryPath, s); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// writeSummary writes the summary as indented JSON to path ("-" = stdout).
func writeSummary(path string, s ue.Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
	} else {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}

// apply sets the configuration field of one flag that was given on the command line.
func apply(c *ue.Config, f *flag.Flag) error {
	v := f.Value.String()
	str := func(dst *string) error { *dst = v; return nil }
	num := func(dst *int) (err error) { *dst, err = strconv.Atoi(v); return err }
	flt := func(dst *float64) (err error) { *dst, err = strconv.ParseFloat(v, 64); return err }
	dur := func(dst *time.Duration) (err error) { *dst, err = time.ParseDuration(v); return err }
	boo := func(dst *bool) (err error) { *dst, err = strconv.ParseBool(v); return err }
	switch f.Name {
	case "listen":
		return str(&c.Listen)
	case "advertise":
		return str(&c.Advertise)
	case "domain":
		return str(&c.Domain)
	case "dns":
		return str(&c.DNSServer)
	case "proxy-host":
		return str(&c.ProxyHost)
	case "proxy":
		return str(&c.Proxy)
	case "from":
		return num(&c.Users.From)
	case "count":
		return num(&c.Users.Count)
	case "digits":
		return num(&c.Users.Digits)
	case "prefix":
		return str(&c.Users.Prefix)
	case "password-prefix":
		return str(&c.Users.PasswordPrefix)
	case "expires":
		return num(&c.Expires)
	case "register-rate":
		return flt(&c.RegisterRate)
	case "register-retry":
		return dur(&c.RegisterRetry)
	case "deregister":
		return boo(&c.Deregister)
	case "manual":
		return boo(&c.Manual)
	case "call-rate":
		return flt(&c.CallRate)
	case "hold":
		return dur(&c.HoldTime)
	case "ring":
		return dur(&c.RingTime)
	case "call-timeout":
		return dur(&c.CallTimeout)
	case "on-restoration-504":
		return str(&c.OnRestoration504)
	case "mix":
		m, err := strconv.ParseFloat(v, 64)
		c.Mix = &m
		return err
	case "callee-from":
		return num(&c.CalleeFrom)
	case "callee-count":
		return num(&c.CalleeCount)
	case "records":
		return str(&c.RecordsFile)
	case "events":
		return str(&c.EventsFile)
	case "seed":
		var err error
		c.Seed, err = strconv.ParseInt(v, 10, 64)
		return err
	case "t1":
		return dur(&c.Timers.T1)
	case "log-format":
		return str(&c.Log.Format)
	case "log-level":
		return str(&c.Log.Level)
	}
	return nil
}
