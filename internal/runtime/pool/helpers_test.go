package pool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/pool"
)

// fakeClock is a pool.Clock that moves only when Advance is called.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	clk *fakeClock
	at  time.Time
	c   chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) pool.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{clk: c, at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves the clock and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !c.now.Before(t.at) {
			t.c <- c.now
			continue
		}
		kept = append(kept, t)
	}
	c.timers = kept
}

// Waiters is the number of timers not yet fired or stopped: a probe loop parked until its next probe.
func (c *fakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// fakeProber answers probes with a result set per address and counts them.
type fakeProber struct {
	mu     sync.Mutex
	result map[string]error
	calls  map[string]int
}

func newFakeProber() *fakeProber {
	return &fakeProber{result: map[string]error{}, calls: map[string]int{}}
}

func (p *fakeProber) Probe(_ context.Context, t pool.Target) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[t.Addr]++
	return p.result[t.Addr]
}

func (p *fakeProber) Set(addr string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.result[addr] = err
}

func (p *fakeProber) Calls(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[addr]
}

// eventLog collects what an obs.Recorder writes.
type eventLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *eventLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

// PeerStates returns the peer_state events as {peer, addr, state, reason} maps, in order.
func (l *eventLog) PeerStates() []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var ev map[string]any
		Expect(json.Unmarshal([]byte(line), &ev)).To(Succeed())
		if ev["kind"] != "peer_state" {
			continue
		}
		m := map[string]string{}
		for _, k := range []string{"peer", "addr", "state", "reason"} {
			m[k], _ = ev[k].(string)
		}
		out = append(out, m)
	}
	return out
}

// Kinds returns the kinds of the events written, in order.
func (l *eventLog) Kinds() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var ev map[string]any
		Expect(json.Unmarshal([]byte(line), &ev)).To(Succeed())
		k, _ := ev["kind"].(string)
		out = append(out, k)
	}
	return out
}

func peerEvent(name, addr, state, reason string) map[string]string {
	return map[string]string{"peer": name, "addr": addr, "state": state, "reason": reason}
}

// The lab's P-CSCF pool (docs/architecture.md): every host on 127.0.0.1, ports from SRV.
var (
	pcscf1 = pool.Target{Name: "pcscf1.ims.test", Addr: "127.0.0.1:5061"}
	pcscf2 = pool.Target{Name: "pcscf2.ims.test", Addr: "127.0.0.1:5062"}
	pcscf3 = pool.Target{Name: "pcscf3.ims.test", Addr: "127.0.0.1:5063"}
)

// perHost returns the per-host SRV answer of pcscfK: itself at priority 1, the others at priority 2, weight 10.
func perHost(self pool.Target, others ...pool.Target) []pool.Target {
	self.Priority, self.Weight = 1, 10
	out := []pool.Target{self}
	for _, o := range others {
		o.Priority, o.Weight = 2, 10
		out = append(out, o)
	}
	return out
}

// testDNS is a tiny authoritative server for ims.test on one 127.0.0.1 port, UDP and TCP.
type testDNS struct {
	Addr string

	mu       sync.Mutex
	rrs      map[string][]dns.RR // lower-case FQDN + "/" + type
	noExtra  bool                // leave the A records of SRV targets out of the additional section
	truncate map[string]bool     // answer these names over UDP with TC=1 and nothing else
	seen     []string            // "udp SRV _sip._udp.pcscf.ims.test."

	udpQueries, tcpQueries atomic.Int64
	// silent: the server reads queries and answers nothing (dead); servfail: it answers SERVFAIL.
	silent, servfail atomic.Bool
}

func startDNS() *testDNS {
	s := &testDNS{rrs: map[string][]dns.RR{}, truncate: map[string]bool{}}
	var pc net.PacketConn
	var l net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		l, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		_ = pc.Close()
		Expect(attempt).To(BeNumerically("<", 20), "no port free for both UDP and TCP: %v", err)
	}
	s.Addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: l, Handler: s}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() {
			defer GinkgoRecover()
			_ = srv.ActivateAndServe()
		}()
		Eventually(started).Should(BeClosed())
		DeferCleanup(srv.Shutdown)
	}
	return s
}

// Zone loads records in zone-file syntax ("name ttl IN type data"), replacing every record of the same name and
// type.
func (s *testDNS) Zone(lines ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := map[string]bool{}
	for _, line := range lines {
		rr, err := dns.NewRR(line)
		Expect(err).NotTo(HaveOccurred(), line)
		k := key(rr.Header().Name, rr.Header().Rrtype)
		if !fresh[k] {
			delete(s.rrs, k)
			fresh[k] = true
		}
		s.rrs[k] = append(s.rrs[k], rr)
	}
}

// LabZone loads the P-CSCF records of docs/architecture.md with the given TTL.
func (s *testDNS) LabZone(ttl int) {
	t := fmt.Sprintf
	s.Zone(
		t("_sip._udp.pcscf.ims.test. %d IN SRV 1 10 5061 pcscf1.ims.test.", ttl),
		t("_sip._udp.pcscf.ims.test. %d IN SRV 1 10 5062 pcscf2.ims.test.", ttl),
		t("_sip._udp.pcscf.ims.test. %d IN SRV 1 10 5063 pcscf3.ims.test.", ttl),
		t("_sip._udp.pcscf1.ims.test. %d IN SRV 1 10 5061 pcscf1.ims.test.", ttl),
		t("_sip._udp.pcscf1.ims.test. %d IN SRV 2 10 5062 pcscf2.ims.test.", ttl),
		t("_sip._udp.pcscf1.ims.test. %d IN SRV 2 10 5063 pcscf3.ims.test.", ttl),
		t("_sip._udp.pcscf2.ims.test. %d IN SRV 1 10 5062 pcscf2.ims.test.", ttl),
		t("_sip._udp.pcscf2.ims.test. %d IN SRV 2 10 5061 pcscf1.ims.test.", ttl),
		t("_sip._udp.pcscf2.ims.test. %d IN SRV 2 10 5063 pcscf3.ims.test.", ttl),
		t("_sip._udp.pcscf3.ims.test. %d IN SRV 1 10 5063 pcscf3.ims.test.", ttl),
		t("_sip._udp.pcscf3.ims.test. %d IN SRV 2 10 5061 pcscf1.ims.test.", ttl),
		t("_sip._udp.pcscf3.ims.test. %d IN SRV 2 10 5062 pcscf2.ims.test.", ttl),
		t("pcscf1.ims.test. %d IN A 127.0.0.1", ttl),
		t("pcscf2.ims.test. %d IN A 127.0.0.1", ttl),
		t("pcscf3.ims.test. %d IN A 127.0.0.1", ttl),
	)
}

func (s *testDNS) SetNoExtra(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noExtra = v
}

func (s *testDNS) SetTruncate(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncate[dns.CanonicalName(name)] = true
}

// Seen returns the queries received so far as "proto TYPE name".
func (s *testDNS) Seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func key(name string, t uint16) string { return dns.CanonicalName(name) + "/" + dns.TypeToString[t] }

func (s *testDNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if s.silent.Load() {
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	if s.servfail.Load() {
		m.SetRcode(r, dns.RcodeServerFailure)
		_ = w.WriteMsg(m)
		return
	}
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.SetRcode(r, dns.RcodeFormatError)
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	proto := "tcp"
	if udp {
		proto = "udp"
		s.udpQueries.Add(1)
	} else {
		s.tcpQueries.Add(1)
	}

	s.mu.Lock()
	s.seen = append(s.seen, proto+" "+dns.TypeToString[q.Qtype]+" "+q.Name)
	name := dns.CanonicalName(q.Name)
	m.Answer = append(m.Answer, s.rrs[key(name, q.Qtype)]...)
	known := false
	for k := range s.rrs {
		if strings.HasPrefix(k, name+"/") {
			known = true
		}
	}
	if !s.noExtra {
		for _, rr := range m.Answer {
			if srv, ok := rr.(*dns.SRV); ok {
				m.Extra = append(m.Extra, s.rrs[key(srv.Target, dns.TypeA)]...)
			}
		}
	}
	truncate := udp && s.truncate[name]
	s.mu.Unlock()

	if !known {
		m.SetRcode(r, dns.RcodeNameError)
	}
	if truncate {
		m.Answer, m.Extra, m.Truncated = nil, nil, true
	}
	if udp {
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}

func itoa(i int) string { return fmt.Sprint(i) }

// NextAt is when the earliest pending timer fires (zero when none is pending).
func (c *fakeClock) NextAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	for _, t := range c.timers {
		if at.IsZero() || t.at.Before(at) {
			at = t.at
		}
	}
	return at
}
