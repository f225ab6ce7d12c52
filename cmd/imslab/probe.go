package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
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
	var err error
	switch kind {
	case "sip":
		err = probeSIP(addr, *timeout)
	case "dns":
		err = probeDNS(addr, domain, *timeout)
	case "tcp":
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, *timeout); err == nil {
			c.Close()
		}
	default:
		return fmt.Errorf("probe: unknown kind %q (sip, dns or tcp)", kind)
	}
	if err != nil {
		return fmt.Errorf("probe %s %s: %w", kind, addr, err)
	}
	fmt.Fprintf(out, "%s %s ok\n", kind, addr)
	return nil
}

func probeSIP(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("udp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	local := conn.LocalAddr().(*net.UDPAddr)
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	tag := hex.EncodeToString(id)
	req := "OPTIONS sip:" + host + " SIP/2.0\r\n" + fmt.Sprintf("Via: SIP/2.0/UDP %s;branch=z9hG4bK%s;rport\r\n", local, tag) +
		"Max-Forwards: 70\r\n" +
		fmt.Sprintf("From: <sip:probe@%s>;tag=%s\r\n", local.IP, tag) +
		fmt.Sprintf("To: <sip:%s>\r\n", host) +
		fmt.Sprintf("Call-ID: probe-%s\r\n", tag) +
		"CSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte(req)); err != nil {
		return err
	}
	buf := make([]byte, 65535)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return fmt.Errorf("no answer: %w", err)
		}
		line, _ := bufio.NewReader(strings.NewReader(string(buf[:n]))).ReadString('\n')
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "SIP/2.0" {
			return fmt.Errorf("not a SIP answer: %q", strings.TrimSpace(line))
		}
		switch {
		case f[1][0] == '1':
			continue
		case f[1][0] == '2':
			return nil
		}
		return fmt.Errorf("answered %s", strings.TrimSpace(strings.TrimPrefix(line, "SIP/2.0")))
	}
}

func probeDNS(addr, domain string, timeout time.Duration) error {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn("_sip._udp."+domain), dns.TypeSRV)
	c := &dns.Client{Timeout: timeout}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		return fmt.Errorf("answered %s with %d records", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	return nil
}
