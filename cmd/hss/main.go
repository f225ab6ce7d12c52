// Command hss runs the testbed's Home Subscriber Server: Cx over Diameter/TCP, a durable subscriber and
// registration database, and an HTTP provisioning API with Prometheus metrics.
//
//	hss [flags]                       serve
//	hss gen-subscribers [flags]       print a provisioning file with generated test subscribers
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/nf/hss"
	"github.com/imslab/quasipool/internal/nf/hss/store"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "gen-subscribers" {
		if err := genSubscribers(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "hss gen-subscribers:", err)
			os.Exit(2)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hss:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("hss", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML configuration file (optional)")
	dataDir := fs.String("data-dir", "", "database directory (overrides data_dir)")
	diamListen := fs.String("diameter-listen", "", "Diameter/TCP listen address (overrides diameter_listen)")
	httpListen := fs.String("http-listen", "", "provisioning API and /metrics listen address (overrides http_listen)")
	originHost := fs.String("origin-host", "", "Diameter Origin-Host (overrides origin_host)")
	realm := fs.String("realm", "", "Diameter Origin-Realm (overrides origin_realm)")
	subsFile := fs.String("subscribers", "", "provisioning file imported at start (overrides subscribers_file)")
	lab := fs.Bool("lab-subscribers", false, "import the default lab's subscribers user0001…user1000 (password passNNNN)")
	labCount := fs.Int("lab-subscriber-count", 0, "with --lab-subscribers: import user0001…user<n> (up to user999999; overrides lab_subscriber_count)")
	anyPeer := fs.Bool("allow-any-peer", false, "admit Cx clients that are not in peers (tools and tests only: any host may then read HA1s)")
	tokenFile := fs.String("api-token-file", "", "HTTP API bearer token file, created if missing (overrides api_token_file)")
	events := fs.String("events", "", `events file, one JSON line per answered request ("-" = stdout)`)
	logFormat := fs.String("log-format", "", "text or json")
	logLevel := fs.String("log-level", "", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := hss.DefaultConfig()
	if *configPath != "" {
		var err error
		if cfg, err = hss.LoadConfig(*configPath); err != nil {
			return err
		}
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.DataDir, *dataDir)
	set(&cfg.DiameterListen, *diamListen)
	set(&cfg.HTTPListen, *httpListen)
	set(&cfg.OriginHost, *originHost)
	set(&cfg.OriginRealm, *realm)
	set(&cfg.SubscribersFile, *subsFile)
	set(&cfg.EventsFile, *events)
	set(&cfg.Log.Format, *logFormat)
	set(&cfg.Log.Level, *logLevel)
	set(&cfg.APITokenFile, *tokenFile)
	if *lab {
		cfg.LabSubscribers = true
	}
	if *labCount != 0 {
		cfg.LabSubscriberCount = *labCount
	}
	if *anyPeer {
		cfg.AllowAnyPeer = true
	}
	log, err := obs.NewLogger(os.Stderr, obs.LogConfig{Format: cfg.Log.Format, Level: cfg.Log.Level}, "hss")
	if err != nil {
		return fmt.Errorf("log: %w", err)
	}
	rec, err := obs.OpenRecorder(cfg.EventsFile, "hss")
	if err != nil {
		return err
	}
	defer rec.Close()
	stopProfile, err := obs.StartCPUProfileFromEnv("hss")
	if err != nil {
		return err
	}
	defer stopProfile()
	node, err := hss.New(cfg, hss.WithLogger(log), hss.WithEvents(rec))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return node.Run(ctx)
}

func genSubscribers(args []string) error {
	fs := flag.NewFlagSet("gen-subscribers", flag.ContinueOnError)
	prefix := fs.String("prefix", "user", "user name prefix")
	from := fs.Int("from", 1, "first number")
	count := fs.Int("count", 1000, "number of subscribers")
	digits := fs.Int("digits", 4, "zero-padded width of the number")
	domain := fs.String("domain", "ims.test", "home domain (realm)")
	pass := fs.String("password-prefix", "pass", "password prefix (password = prefix + number)")
	expand := fs.Bool("expand", false, "write every subscriber instead of one generate stanza")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *count <= 0 || *digits <= 0 || *from < 0 {
		return errors.New("count and digits must be positive, from must not be negative")
	}
	enc := yaml.NewEncoder(os.Stdout)
	defer enc.Close()
	if *expand {
		return enc.Encode(map[string]any{"subscribers": store.Generate(*prefix, *from, *count, *digits, *domain, *pass)})
	}
	return enc.Encode(map[string]any{"generate": []map[string]any{{
		"prefix": *prefix, "from": *from, "count": *count, "digits": *digits, "domain": *domain, "password_prefix": *pass,
	}}})
}
