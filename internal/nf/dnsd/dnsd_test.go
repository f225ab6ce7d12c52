package dnsd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/imslab/quasipool/internal/nf/dnsd"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

type running struct {
	srv    *dnsd.Server
	addr   string
	events *gbytes.Buffer
}

// start runs a server on 127.0.0.1:0 until the spec ends and checks that Run returns nil.
func start(cfg dnsd.Config, opts ...dnsd.Option) *running {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	events := gbytes.NewBuffer()
	opts = append([]dnsd.Option{
		dnsd.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))),
		dnsd.WithEvents(obs.NewRecorder(events, "dnsd")),
	}, opts...)
	srv, err := dnsd.New(cfg, opts...)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	Eventually(srv.Ready(), 5*time.Second).Should(BeClosed())
	DeferCleanup(func() {
		cancel()
		Eventually(done, 5*time.Second).Should(Receive(BeNil()))
	})
	return &running{srv: srv, addr: srv.Addr(), events: events}
}

func query(network, addr, name string, qtype uint16) *dns.Msg {
	GinkgoHelper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	Expect(err).NotTo(HaveOccurred())
	Expect(r.Id).To(Equal(m.Id))
	return r
}

// short formats records without name, TTL and class: "SRV 1 10 5061 pcscf1.ims.test.", "A 127.0.0.1".
func short(rrs []dns.RR) []string {
	out := []string{}
	for _, rr := range rrs {
		switch v := rr.(type) {
		case *dns.SRV:
			out = append(out, fmt.Sprintf("SRV %d %d %d %s", v.Priority, v.Weight, v.Port, v.Target))
		case *dns.A:
			out = append(out, "A "+v.Hdr.Name+" "+v.A.String())
		case *dns.SOA:
			out = append(out, "SOA "+v.Ns)
		case *dns.NS:
			out = append(out, "NS "+v.Ns)
		case *dns.OPT:
		default:
			out = append(out, rr.String())
		}
	}
	return out
}

func lines(b *gbytes.Buffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b.Contents())), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		Expect(json.Unmarshal([]byte(l), &m)).To(Succeed())
		out = append(out, m)
	}
	return out
}

func eventKinds(b *gbytes.Buffer) []string {
	var out []string
	for _, e := range lines(b) {
		out = append(out, e["kind"].(string))
	}
	return out
}

var _ = Describe("dnsd", Label("integration"), func() {
	var r *running
	BeforeEach(func() { r = start(dnsd.Config{}) })

	DescribeTable("answers the topology's zone over UDP and TCP",
		func(name string, qtype uint16, rcode int, aa bool, answer, extra, ns []string) {
			for _, network := range []string{"udp", "tcp"} {
				By(network)
				m := query(network, r.addr, name, qtype)
				Expect(m.Rcode).To(Equal(rcode), dns.RcodeToString[m.Rcode])
				Expect(m.Authoritative).To(Equal(aa))
				Expect(short(m.Answer)).To(Equal(answer))
				Expect(short(m.Extra)).To(Equal(extra))
				Expect(short(m.Ns)).To(Equal(ns))
				for _, rr := range m.Answer {
					Expect(rr.Header().Ttl).To(BeEquivalentTo(1))
				}
			}
		},
		Entry("pool record", "_sip._udp.pcscf.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 5061 pcscf1.ims.test.", "SRV 1 10 5062 pcscf2.ims.test.", "SRV 1 10 5063 pcscf3.ims.test."},
			[]string{"A pcscf1.ims.test. 127.0.0.1", "A pcscf2.ims.test. 127.0.0.1", "A pcscf3.ims.test. 127.0.0.1"}, []string{}),
		Entry("per-host record pcscf1", "_sip._udp.pcscf1.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 5061 pcscf1.ims.test.", "SRV 2 10 5062 pcscf2.ims.test.", "SRV 2 10 5063 pcscf3.ims.test."},
			[]string{"A pcscf1.ims.test. 127.0.0.1", "A pcscf2.ims.test. 127.0.0.1", "A pcscf3.ims.test. 127.0.0.1"}, []string{}),
		Entry("per-host record scscf2", "_sip._udp.scscf2.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 5082 scscf2.ims.test.", "SRV 2 10 5081 scscf1.ims.test.", "SRV 2 10 5083 scscf3.ims.test."},
			[]string{"A scscf2.ims.test. 127.0.0.1", "A scscf1.ims.test. 127.0.0.1", "A scscf3.ims.test. 127.0.0.1"}, []string{}),
		Entry("S-CSCF pool record", "_sip._udp.scscf.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 5081 scscf1.ims.test.", "SRV 1 10 5082 scscf2.ims.test.", "SRV 1 10 5083 scscf3.ims.test."},
			[]string{"A scscf1.ims.test. 127.0.0.1", "A scscf2.ims.test. 127.0.0.1", "A scscf3.ims.test. 127.0.0.1"}, []string{}),
		Entry("I-CSCF", "_sip._udp.icscf.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 5070 icscf.ims.test."}, []string{"A icscf.ims.test. 127.0.0.1"}, []string{}),
		Entry("the domain (home I-CSCF)", "_sip._udp.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 5070 icscf.ims.test."}, []string{"A icscf.ims.test. 127.0.0.1"}, []string{}),
		Entry("BAC", "_sip._udp.bac.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 5060 bac.ims.test."}, []string{"A bac.ims.test. 127.0.0.1"}, []string{}),
		Entry("HSS Diameter", "_diameter._tcp.hss.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 3868 hss.ims.test."}, []string{"A hss.ims.test. 127.0.0.1"}, []string{}),
		Entry("case does not matter", "_SIP._UDP.ICSCF.IMS.Test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{"SRV 1 10 5070 icscf.ims.test."}, []string{"A icscf.ims.test. 127.0.0.1"}, []string{}),
		Entry("A record", "pcscf2.ims.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"A pcscf2.ims.test. 127.0.0.1"}, []string{}, []string{}),
		Entry("A record of dnsd", "dnsd.ims.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"A dnsd.ims.test. 127.0.0.1"}, []string{}, []string{}),
		Entry("SOA at the apex", "ims.test.", dns.TypeSOA, dns.RcodeSuccess, true,
			[]string{"SOA dnsd.ims.test."}, []string{}, []string{}),
		Entry("NS at the apex, with glue", "ims.test.", dns.TypeNS, dns.RcodeSuccess, true,
			[]string{"NS dnsd.ims.test."}, []string{"A dnsd.ims.test. 127.0.0.1"}, []string{}),
		Entry("no A record for the domain", "ims.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{}, []string{}, []string{"SOA dnsd.ims.test."}),
		Entry("unknown name: NXDOMAIN with SOA", "pcscf9.ims.test.", dns.TypeA, dns.RcodeNameError, true,
			[]string{}, []string{}, []string{"SOA dnsd.ims.test."}),
		Entry("unknown SRV name: NXDOMAIN", "_sip._udp.pcscf4.ims.test.", dns.TypeSRV, dns.RcodeNameError, true,
			[]string{}, []string{}, []string{"SOA dnsd.ims.test."}),
		Entry("known name, other type: NODATA", "pcscf1.ims.test.", dns.TypeAAAA, dns.RcodeSuccess, true,
			[]string{}, []string{}, []string{"SOA dnsd.ims.test."}),
		Entry("empty non-terminal: NODATA", "_udp.pcscf.ims.test.", dns.TypeSRV, dns.RcodeSuccess, true,
			[]string{}, []string{}, []string{"SOA dnsd.ims.test."}),
		Entry("outside the zone: REFUSED", "example.com.", dns.TypeA, dns.RcodeRefused, false,
			[]string{}, []string{}, []string{}),
		Entry("a parent of the zone: REFUSED", "test.", dns.TypeSOA, dns.RcodeRefused, false,
			[]string{}, []string{}, []string{}),
		Entry("zone transfer: REFUSED", "ims.test.", dns.TypeAXFR, dns.RcodeRefused, true,
			[]string{}, []string{}, []string{}),
	)

	It("orders SRV targets for Go's resolver: the per-host record's own member first, the pool record shuffled", func(ctx SpecContext) {
		res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, r.addr)
		}}
		for i := 0; i < 30; i++ {
			cname, srvs, err := res.LookupSRV(ctx, "sip", "udp", "pcscf1.ims.test.")
			Expect(err).NotTo(HaveOccurred())
			Expect(cname).To(Equal("_sip._udp.pcscf1.ims.test."))
			Expect(srvs).To(HaveLen(3))
			Expect(*srvs[0]).To(Equal(net.SRV{Target: "pcscf1.ims.test.", Port: 5061, Priority: 1, Weight: 10}))
			Expect([]net.SRV{*srvs[1], *srvs[2]}).To(ConsistOf(
				net.SRV{Target: "pcscf2.ims.test.", Port: 5062, Priority: 2, Weight: 10},
				net.SRV{Target: "pcscf3.ims.test.", Port: 5063, Priority: 2, Weight: 10}))
		}
		first := map[string]int{}
		for i := 0; i < 60; i++ {
			_, srvs, err := res.LookupSRV(ctx, "sip", "udp", "pcscf.ims.test.")
			Expect(err).NotTo(HaveOccurred())
			Expect(srvs).To(HaveLen(3))
			first[srvs[0].Target]++
		}
		Expect(first).To(HaveLen(3), "every member comes first sometimes (non-zero weights are shuffled): %v", first)

		_, srvs, err := res.LookupSRV(ctx, "", "", "_diameter._tcp.hss.ims.test.")
		Expect(err).NotTo(HaveOccurred())
		Expect(srvs).To(Equal([]*net.SRV{{Target: "hss.ims.test.", Port: 3868, Priority: 1, Weight: 10}}))
		addrs, err := res.LookupHost(ctx, "scscf3.ims.test.")
		Expect(err).NotTo(HaveOccurred())
		Expect(addrs).To(Equal([]string{"127.0.0.1"}))
		_, err = res.LookupHost(ctx, "nowhere.ims.test.")
		var dnsErr *net.DNSError
		Expect(err).To(BeAssignableToTypeOf(dnsErr))
		Expect(err.(*net.DNSError).IsNotFound).To(BeTrue())
	}, SpecTimeout(30*time.Second))

	It("changes records while it runs", func() {
		pool := "_sip._udp.pcscf.ims.test."
		serial := func() uint32 { return query("udp", r.addr, "ims.test.", dns.TypeSOA).Answer[0].(*dns.SOA).Serial }
		s0 := serial()

		n, err := r.srv.RemoveRecord(topology.Record{Name: "_sip._udp.pcscf.ims.test", Type: topology.TypeSRV, Target: "pcscf1.ims.test"})
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1))
		m := query("udp", r.addr, pool, dns.TypeSRV)
		Expect(short(m.Answer)).To(Equal([]string{"SRV 1 10 5062 pcscf2.ims.test.", "SRV 1 10 5063 pcscf3.ims.test."}))
		Expect(short(m.Extra)).NotTo(ContainElement(ContainSubstring("pcscf1")))
		s1 := serial()
		Expect(s1).To(BeNumerically(">", s0))

		Expect(r.srv.AddRecord(topology.Record{Name: "_sip._udp.pcscf.ims.test", Type: topology.TypeSRV,
			Target: "pcscf1.ims.test", Port: 5061, Priority: 2, Weight: 10})).To(Succeed())
		Expect(short(query("tcp", r.addr, pool, dns.TypeSRV).Answer)).To(Equal([]string{
			"SRV 1 10 5062 pcscf2.ims.test.", "SRV 1 10 5063 pcscf3.ims.test.", "SRV 2 10 5061 pcscf1.ims.test."}))
		Expect(serial()).To(BeNumerically(">", s1))

		// Removing pcscf1's A record leaves the name (it still has records below it): NODATA, not NXDOMAIN.
		n, err = r.srv.RemoveRecord(topology.Record{Name: "pcscf1.ims.test.", Type: topology.TypeA})
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1))
		m = query("udp", r.addr, "pcscf1.ims.test.", dns.TypeA)
		Expect(m.Rcode).To(Equal(dns.RcodeSuccess))
		Expect(m.Answer).To(BeEmpty())
		Expect(short(query("udp", r.addr, "_sip._udp.pcscf1.ims.test.", dns.TypeSRV).Extra)).
			To(Equal([]string{"A pcscf2.ims.test. 127.0.0.1", "A pcscf3.ims.test. 127.0.0.1"}))

		n, err = r.srv.RemoveRecord(topology.Record{Name: "nothing.ims.test", Type: topology.TypeA})
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(BeZero())

		By("refusing a bad record and keeping the zone")
		before := r.srv.Zone()
		Expect(r.srv.AddRecord(topology.Record{Name: "x.ims.test", Type: topology.TypeA, Address: "::1"})).
			To(MatchError(ContainSubstring("not IPv4")))
		Expect(r.srv.AddRecord(topology.Record{Name: "x.example.com", Type: topology.TypeA, Address: "10.0.0.1"})).
			To(MatchError(ContainSubstring("outside ims.test.")))
		Expect(r.srv.AddRecord(topology.Record{Name: "x.ims.test", Type: "MX"})).To(MatchError(ContainSubstring(`type "MX"`)))
		Expect(r.srv.Zone()).To(Equal(before))

		By("replacing the whole zone")
		t := topology.Default()
		t.Pools.PCSCF.Size = 5
		Expect(t.Validate()).To(Succeed())
		Expect(r.srv.SetZone(t.Zone())).To(Succeed())
		Expect(query("udp", r.addr, pool, dns.TypeSRV).Answer).To(HaveLen(5))
		Expect(query("tcp", r.addr, "pcscf5.ims.test.", dns.TypeA).Answer).To(HaveLen(1))

		Expect(eventKinds(r.events)).To(Equal([]string{"node_ready", "dns_change", "dns_change", "dns_change", "dns_change"}))
		Expect(lines(r.events)[1]).To(HaveKeyWithValue("record", "_sip._udp.pcscf.ims.test. SRV 0 0 0 pcscf1.ims.test."))
		Expect(lines(r.events)[1]).To(HaveKeyWithValue("op", "remove_record"))
	})

	It("gives every concurrent query a whole zone, before or after an edit", func(ctx SpecContext) {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan string, 100)
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(network string) {
				defer GinkgoRecover()
				defer wg.Done()
				c := &dns.Client{Net: network, Timeout: 2 * time.Second}
				for {
					select {
					case <-stop:
						return
					default:
					}
					m := new(dns.Msg)
					m.SetQuestion("_sip._udp.scscf.ims.test.", dns.TypeSRV)
					resp, _, err := c.Exchange(m, r.addr)
					if err != nil {
						errs <- err.Error()
						return
					}
					if n := len(resp.Answer); n != 2 && n != 3 {
						errs <- fmt.Sprintf("%d answers", n)
						return
					}
				}
			}([]string{"udp", "tcp"}[g%2])
		}
		rec := topology.Record{Name: "_sip._udp.scscf.ims.test", Type: topology.TypeSRV, Target: "scscf2.ims.test", Port: 5082, Priority: 1, Weight: 10}
		for i := 0; i < 200; i++ {
			_, err := r.srv.RemoveRecord(rec)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.srv.AddRecord(rec)).To(Succeed())
		}
		close(stop)
		wg.Wait()
		Expect(errs).NotTo(Receive())
	}, SpecTimeout(30*time.Second))

	It("truncates a UDP answer that does not fit and gives it whole over TCP", func() {
		for i := 0; i < 40; i++ {
			Expect(r.srv.AddRecord(topology.Record{Name: "_sip._udp.big.ims.test", Type: topology.TypeSRV,
				Target: fmt.Sprintf("member%02d.ims.test", i), Port: 5060, Priority: 1, Weight: 10})).To(Succeed())
		}
		m := query("udp", r.addr, "_sip._udp.big.ims.test.", dns.TypeSRV)
		Expect(m.Truncated).To(BeTrue())
		m.Compress = true
		Expect(m.Len()).To(BeNumerically("<=", dns.MinMsgSize))
		Expect(len(m.Answer)).To(BeNumerically("<", 40))
		Expect(query("tcp", r.addr, "_sip._udp.big.ims.test.", dns.TypeSRV).Answer).To(HaveLen(40))

		big := new(dns.Msg)
		big.SetQuestion("_sip._udp.big.ims.test.", dns.TypeSRV)
		big.SetEdns0(4096, false)
		resp, _, err := (&dns.Client{Net: "udp", UDPSize: 4096}).Exchange(big, r.addr)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Truncated).To(BeFalse())
		Expect(resp.Answer).To(HaveLen(40))
		Expect(resp.IsEdns0()).NotTo(BeNil())
	})

	It("survives malformed queries and keeps answering", func() {
		u, err := net.Dial("udp", r.addr)
		Expect(err).NotTo(HaveOccurred())
		defer u.Close()
		for _, b := range [][]byte{{}, {0}, []byte("garbage garbage garbage"),
			{0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0xff},          // truncated question
			{0x12, 0x34, 0x01, 0x00, 0x00, 0x05, 0, 0, 0, 0, 0, 0},                // five questions announced
			{0x12, 0x34, 0x79, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}, // opcode 15
		} {
			_, _ = u.Write(b)
		}
		t, err := net.Dial("tcp", r.addr)
		Expect(err).NotTo(HaveOccurred())
		_, _ = t.Write([]byte{0, 40, 1, 2, 3})
		_ = t.Close()
		t, err = net.Dial("tcp", r.addr)
		Expect(err).NotTo(HaveOccurred())
		_, _ = t.Write([]byte{0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
		_ = t.Close()

		for _, network := range []string{"udp", "tcp"} {
			Expect(query(network, r.addr, "pcscf1.ims.test.", dns.TypeA).Answer).To(HaveLen(1))
		}
		Expect(r.srv.Stats().Panics).To(BeZero())
	})

	It("answers a query with EDNS version 1 with BADVERS", func() {
		m := new(dns.Msg)
		m.SetQuestion("pcscf1.ims.test.", dns.TypeA)
		m.SetEdns0(1232, false)
		m.IsEdns0().SetVersion(1)
		resp, _, err := new(dns.Client).Exchange(m, r.addr)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.Rcode).To(Equal(dns.RcodeBadVers))
	})

	It("counts queries and reports them when it stops", func() {
		query("udp", r.addr, "pcscf1.ims.test.", dns.TypeA)
		query("udp", r.addr, "nope.ims.test.", dns.TypeA)
		query("tcp", r.addr, "example.org.", dns.TypeA)
		st := r.srv.Stats()
		Expect(st.Queries).To(BeEquivalentTo(3))
		Expect(st.NoError).To(BeEquivalentTo(1))
		Expect(st.NXDomain).To(BeEquivalentTo(1))
		Expect(st.Refused).To(BeEquivalentTo(1))
		Expect(eventKinds(r.events)).To(Equal([]string{"node_ready"}), "no event per query by default")
		Expect(lines(r.events)[0]).To(HaveKeyWithValue("addr", r.addr))
		Expect(lines(r.events)[0]).To(HaveKeyWithValue("node", "dnsd"))
	})
})

var _ = Describe("dnsd lifecycle", Label("integration"), func() {
	It("returns nil from Run after a clean shutdown and records dns_query (when asked) and dns_stats", func() {
		events := gbytes.NewBuffer()
		srv, err := dnsd.New(dnsd.Config{Listen: "127.0.0.1:0", QueryEvents: true},
			dnsd.WithEvents(obs.NewRecorder(events, "dnsd")), dnsd.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		Eventually(srv.Ready()).Should(BeClosed())
		query("udp", srv.Addr(), "hss.ims.test.", dns.TypeA)
		cancel()
		Eventually(done, 5*time.Second).Should(Receive(BeNil()))
		Expect(eventKinds(events)).To(Equal([]string{"node_ready", "dns_query", "dns_stats"}))
		ev := lines(events)
		Expect(ev[1]).To(And(HaveKeyWithValue("name", "hss.ims.test."), HaveKeyWithValue("qtype", "A"),
			HaveKeyWithValue("rcode", "NOERROR"), HaveKey("peer")))
		Expect(ev[2]).To(And(HaveKeyWithValue("queries", BeEquivalentTo(1)), HaveKeyWithValue("noerror", BeEquivalentTo(1))))
	})

	It("serves on already-bound sockets", func() {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			pc.Close()
			Skip("the TCP port next to a fresh UDP port is taken: " + err.Error())
		}
		r := start(dnsd.Config{}, dnsd.WithConns(pc, ln))
		Expect(r.addr).To(Equal(pc.LocalAddr().String()))
		Expect(query("tcp", r.addr, "bac.ims.test.", dns.TypeA).Answer).To(HaveLen(1))
	})

	It("serves a topology file, with a TTL override", func() {
		dir := GinkgoT().TempDir()
		t := topology.Default()
		t.Domain = "lab.example"
		t.Pools.SCSCF.Size = 2
		path := filepath.Join(dir, "t.yaml")
		Expect(t.WriteFile(path)).To(Succeed())
		r := start(dnsd.Config{Topology: path, TTL: 30 * time.Second})
		m := query("udp", r.addr, "_sip._udp.scscf.lab.example.", dns.TypeSRV)
		Expect(m.Answer).To(HaveLen(2))
		Expect(m.Answer[0].Header().Ttl).To(BeEquivalentTo(30))
		Expect(query("udp", r.addr, "_sip._udp.scscf.ims.test.", dns.TypeSRV).Rcode).To(Equal(dns.RcodeRefused))
	})

	It("fails Run, without becoming ready, when the address is taken", func() {
		busy, err := net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		defer busy.Close()
		srv, err := dnsd.New(dnsd.Config{Listen: busy.LocalAddr().String()})
		Expect(err).NotTo(HaveOccurred())
		err = srv.Run(context.Background())
		Expect(err).To(MatchError(ContainSubstring("dnsd: listen:")))
		Expect(err).To(MatchError(ContainSubstring("address already in use")))
		Expect(srv.Ready()).NotTo(BeClosed())
	})

	It("refuses a topology file that does not load, naming it", func() {
		path := filepath.Join(GinkgoT().TempDir(), "bad.yaml")
		Expect(os.WriteFile(path, []byte("domain: ims.test\nbogus: 1\n"), 0o644)).To(Succeed())
		_, err := dnsd.New(dnsd.Config{Topology: path})
		Expect(err).To(MatchError(ContainSubstring(path)))
		Expect(err).To(MatchError(ContainSubstring("field bogus not found")))
	})

	It("refuses a zone with a bad record", func() {
		z := topology.Default().Zone()
		z.Records = append(z.Records, topology.Record{Name: "x.ims.test", Type: topology.TypeSRV})
		_, err := dnsd.New(dnsd.Config{Listen: "127.0.0.1:0"}, dnsd.WithZone(z))
		Expect(err).To(MatchError(ContainSubstring(`target "" is not a domain name`)))
	})

	DescribeTable("Validate names the bad field",
		func(cfg dnsd.Config, want string) {
			Expect(cfg.Validate()).To(MatchError(want))
			_, err := dnsd.New(cfg)
			Expect(err).To(MatchError(want))
		},
		Entry("listen without port", dnsd.Config{Listen: "127.0.0.1"}, `dnsd config: listen: "127.0.0.1": want ip:port`),
		Entry("listen on a name", dnsd.Config{Listen: "dnsd:53"}, `dnsd config: listen: "dnsd" is not an IP address`),
		Entry("listen on a bad port", dnsd.Config{Listen: "127.0.0.1:99999"}, `dnsd config: listen: port "99999": want 0..65535`),
		Entry("negative ttl", dnsd.Config{TTL: -time.Second}, "dnsd config: ttl: must not be negative"),
		Entry("fractional ttl", dnsd.Config{TTL: 1500 * time.Millisecond}, "dnsd config: ttl: 1.5s: must be a whole number of seconds"),
	)
})

var _ = Describe("the handler", Label("unit"), func() {
	It("answers FORMERR to a message without exactly one question, and NOTIMP to other opcodes", func() {
		srv, err := dnsd.New(dnsd.Config{Listen: "127.0.0.1:0"})
		Expect(err).NotTo(HaveOccurred())
		w := &recorder{}
		m := new(dns.Msg)
		m.Id = 7
		srv.ServeDNS(w, m)
		Expect(w.msg.Rcode).To(Equal(dns.RcodeFormatError))
		Expect(w.msg.Id).To(BeEquivalentTo(7))

		m.SetQuestion("pcscf1.ims.test.", dns.TypeA)
		m.Question = append(m.Question, m.Question[0])
		srv.ServeDNS(w, m)
		Expect(w.msg.Rcode).To(Equal(dns.RcodeFormatError))

		m.SetQuestion("pcscf1.ims.test.", dns.TypeA)
		m.Opcode = dns.OpcodeUpdate
		srv.ServeDNS(w, m)
		Expect(w.msg.Rcode).To(Equal(dns.RcodeNotImplemented))

		m.Opcode = dns.OpcodeQuery
		m.Question[0].Qclass = dns.ClassCHAOS
		srv.ServeDNS(w, m)
		Expect(w.msg.Rcode).To(Equal(dns.RcodeRefused))

		m.Question[0].Qclass = dns.ClassINET
		m.Question[0].Qtype = dns.TypeANY
		m.Question[0].Name = "ims.test."
		srv.ServeDNS(w, m)
		Expect(short(w.msg.Answer)).To(Equal([]string{"SOA dnsd.ims.test.", "NS dnsd.ims.test."}))
		Expect(slices.ContainsFunc(w.msg.Extra, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeA })).To(BeTrue())
	})
})
