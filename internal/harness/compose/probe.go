package compose

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/topology"
)

// Probe kinds: what answers for a node being ready (readiness picks one per node).
const (
	ProbeSIP = "sip" // an OPTIONS over UDP answered 2xx
	ProbeDNS = "dns" // the SRV record _sip._udp.<domain> answered NOERROR with records
	ProbeTCP = "tcp" // a TCP connection accepted (the HSS's Diameter port)
)

// Probe checks that one service answers, from wherever the calling goroutine's thread is: the compose lab's
// healthcheck inside a container (`imslab probe`), and the lab's own readiness check inside a container's
// network namespace (ProbeIn). domain is for ProbeDNS only.
func Probe(kind, addr, domain string, timeout time.Duration) error {
	var err error
	switch kind {
	case ProbeSIP:
		err = probeSIP(addr, timeout)
	case ProbeDNS:
		err = probeDNS(addr, domain, timeout)
	case ProbeTCP:
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, timeout); err == nil {
			c.Close()
		}
	default:
		return fmt.Errorf("probe: unknown kind %q (sip, dns or tcp)", kind)
	}
	if err != nil {
		return fmt.Errorf("probe %s %s: %w", kind, addr, err)
	}
	return nil
}

// ProbeIn is Probe from inside the network namespace at nsPath (/proc/<pid>/ns/net of a container's init
// process): the lab's readiness check of a container without the engine's healthcheck, which runs a process in
// the container (a runc exec) every few seconds for its whole life. The host has no address on the core and Cx
// networks (Generate), so the check enters the container's namespace, as the network faults do. Needs root.
func ProbeIn(nsPath, kind, addr, domain string, timeout time.Duration) error {
	return netns.DoPath(nsPath, func() error {
		return Probe(kind, addr, domain, timeout)
	})
}

// readiness returns the probe that tells node n of t ready, with the address and domain it takes: dnsd answers
// the lab's SRV record, the HSS accepts a Diameter connection (it needs no other node, not even dnsd), every SIP
// node answers OPTIONS.
func readiness(t *topology.Topology, n topology.Node) (kind, addr, domain string) {
	switch n.Kind {
	case topology.KindDNS:
		return ProbeDNS, n.Listen(), t.Domain
	case topology.KindHSS:
		return ProbeTCP, n.Endpoint(topology.PortDiameter), ""
	default:
		return ProbeSIP, n.Listen(), ""
	}
}

// waitProbe probes every 200 ms until the probe succeeds, ctx ends or timeout passes; it returns the last error.
func waitProbe(ctx context.Context, timeout time.Duration, probe func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = probe(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("not ready within %s", timeout), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
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
