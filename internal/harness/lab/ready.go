package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/imslab/quasipool/internal/topology"
)

// StartError is returned when a node does not start or does not become ready.
type StartError struct {
	Node string
	Log  string // the node's log file
	Tail string // its last lines, written by this start
	Err  error
}

func (e *StartError) Error() string {
	s := fmt.Sprintf("lab: node %s did not start: %v", e.Node, e.Err)
	if strings.TrimSpace(e.Tail) != "" {
		s += fmt.Sprintf("\n--- last lines of %s ---\n%s", e.Log, strings.TrimRight(e.Tail, "\n"))
	} else if e.Log != "" {
		s += fmt.Sprintf(" (log %s is empty)", e.Log)
	}
	return s
}

func (e *StartError) Unwrap() error { return e.Err }

// readyLine matches a node's readiness log line ("dnsd ready", "hss ready", "pcscf1 ready", in text or JSON).
var readyLine = regexp.MustCompile(`\bready\b`)

// waitReady waits until the node has logged a "ready" line since it started and answers its probe.
func (l *Lab) waitReady(ctx context.Context, n *node, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	kamailio := n.Vendor == topology.VendorKamailio
	sawLine := kamailio // Kamailio logs no ready line: its probe is all there is
	why := "no ready line in its log"
	for {
		if !sawLine {
			sawLine = logSaysReady(n.logPath, p.logFrom)
		}
		if sawLine {
			var err error
			if kamailio {
				hss, _ := l.cfg.Topology.Node(l.cfg.Topology.HSS.Host)
				err = kamailioProbe(ctx, n.Node, hss.Endpoint(topology.PortDiameter), p.pid)
			} else {
				err = probe(ctx, n.Node)
			}
			if err == nil {
				return nil
			}
			why = "logged ready but " + err.Error()
			if kamailio {
				why = err.Error()
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before it was ready (%s)", p.exitString())
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("not ready after %s: %s", l.cfg.ReadyTimeout, why)
			}
			return fmt.Errorf("not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func logSaysReady(path string, from int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return false
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if readyLine.MatchString(line) && !strings.Contains(line, "not ready") {
			return true
		}
	}
	return false
}

// probe checks that a node answers: a DNS query for dnsd, the health endpoint for the HSS. SIP nodes have no
// probe yet (their ready line is taken at its word).
func probe(ctx context.Context, n topology.Node) error {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	switch n.Kind {
	case topology.KindDNS:
		m := new(dns.Msg)
		domain := n.FQDN[strings.IndexByte(n.FQDN, '.')+1:]
		m.SetQuestion(dns.Fqdn(domain), dns.TypeSOA)
		r, _, err := new(dns.Client).ExchangeContext(ctx, m, n.Listen())
		if err != nil {
			return fmt.Errorf("DNS probe: %w", err)
		}
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative {
			return fmt.Errorf("DNS probe: %s, authoritative %v", dns.RcodeToString[r.Rcode], r.Authoritative)
		}
	case topology.KindHSS:
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.Endpoint(topology.PortHTTP)+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("health probe: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("health probe: %s", resp.Status)
		}
	}
	return nil
}

// tail returns the last n lines written to path after offset from.
func tail(path string, from int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	// Read at most the last 64 KiB.
	if st.Size()-from > 64*1024 {
		from = st.Size() - 64*1024
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return ""
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
