package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/harness/compose"
)

// probe checks that one service answers: the healthcheck of the compose lab (the image has no shell or curl).
//
//	imslab probe sip <ip:port>           OPTIONS over UDP, a 2xx answer
//	imslab probe dns <ip:port> <domain>  the SRV record _sip._udp.<domain>, answered NOERROR
//	imslab probe tcp <ip:port>           a TCP connection (the HSS's Diameter port)
func probe(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("imslab probe", flag.ContinueOnError)
	fs.SetOutput(errOut)
	timeout := fs.Duration("timeout", 1500*time.Millisecond, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintln(errOut, "usage: imslab probe sip <ip:port> | dns <ip:port> <domain> | tcp <ip:port> [--timeout d]")
		fs.PrintDefaults()
	}
	if len(args) < 2 {
		fs.Usage()
		return fmt.Errorf("probe: %w", flag.ErrHelp)
	}
	kind, addr := args[0], args[1]
	rest := args[2:]
	var domain string
	if kind == "dns" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return fmt.Errorf("probe dns: give the domain after the address")
		}
		domain, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if err := compose.Probe(kind, addr, domain, *timeout); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s ok\n", kind, addr)
	return nil
}
