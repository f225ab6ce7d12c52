package topology_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
	"github.com/imslab/quasipool/topologies"
)

// base is the default lab in block style, one field per line, so that tests can point at lines.
const base = `domain: ims.test
dns:
  listen: 127.0.0.1:1053
  ttl: 1s
hss:
  host: hss
  address: 127.0.0.1
  diameter_port: 3868
  http_port: 8090
bac:
  host: bac
  address: 127.0.0.1
  port: 5060
icscf:
  host: icscf
  address: 127.0.0.1
  port: 5070
pools:
  pcscf:
    size: 3
    address: 127.0.0.1
    base_port: 5061
    weight: 10
  scscf:
    size: 3
    address: 127.0.0.1
    base_port: 5081
    weight: 10
timers:
  t1: 500ms
  invite_no_answer: 2s
  non_invite_no_answer: 2s
probing:
  interval: 1s
  timeout: 500ms
  failures_to_down: 2
  successes_to_up: 1
registration:
  expires: 600s
`

// withLine returns base with line n (1-based) replaced.
func withLine(n int, text string) string {
	lines := strings.Split(base, "\n")
	lines[n-1] = text
	return strings.Join(lines, "\n")
}

func fieldErrors(err error) []*topology.FieldError {
	var out []*topology.FieldError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *topology.FieldError
		Expect(errors.As(e, &fe)).To(BeTrue(), "not a FieldError: %v", e)
		out = append(out, fe)
	}
	return out
}

var _ = Describe("Parse", Label("unit"), func() {
	It("reads the default lab, and the block-style file gives the same topology", func() {
		d := topology.Default()
		Expect(d.Domain).To(Equal("ims.test"))
		Expect(d.DNS).To(Equal(topology.DNS{Host: "dnsd", Listen: "127.0.0.1:1053", TTL: time.Second}))
		Expect(d.Pools.PCSCF).To(Equal(topology.Pool{Size: 3, Address: "127.0.0.1", BasePort: 5061, Weight: 10}))
		Expect(d.Timers).To(Equal(topology.Timers{T1: 500 * time.Millisecond, InviteNoAnswer: 2 * time.Second,
			NonInviteNoAnswer: 2 * time.Second}))
		Expect(d.Probing).To(Equal(topology.Probing{Interval: time.Second, Timeout: 500 * time.Millisecond,
			FailuresToDown: 2, SuccessesToUp: 1}))
		Expect(d.Registration.Expires).To(Equal(600 * time.Second))
		Expect(d.HSS.LabSubscribers).To(BeTrue())

		b, err := topology.Parse([]byte(base))
		Expect(err).NotTo(HaveOccurred())
		Expect(b).To(Equal(d))
	})

	It("fills the tuning sections with the lab defaults when they are left out", func() {
		short := base[:strings.Index(base, "timers:")]
		t, err := topology.Parse([]byte(short))
		Expect(err).NotTo(HaveOccurred())
		Expect(t).To(Equal(topology.Default()))
	})

	It("survives Marshal and Parse unchanged", func() {
		t, err := topology.Parse([]byte(base + "nodes:\n  pcscf1:\n    timers: {t1: 250ms}\n    log: {level: debug}\n"))
		Expect(err).NotTo(HaveOccurred())
		b, err := t.Marshal()
		Expect(err).NotTo(HaveOccurred())
		back, err := topology.Parse(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(back).To(Equal(t))
	})

	It("gives the overload block's max_rate to every node and a node's metrics address to that node only", func() {
		t, err := topology.Parse([]byte(base + "overload: {max_rate: 25}\nnodes:\n  bac:\n    metrics: 127.0.0.1:42999\n"))
		Expect(err).NotTo(HaveOccurred())
		bc, err := t.NodeConfig("bac")
		Expect(err).NotTo(HaveOccurred())
		Expect(bc.Overload.MaxRate).To(Equal(25.0))
		Expect(bc.MetricsListen).To(Equal("127.0.0.1:42999"))
		pc, err := t.NodeConfig("pcscf1")
		Expect(err).NotTo(HaveOccurred())
		Expect(pc.Overload.MaxRate).To(Equal(25.0))
		Expect(pc.MetricsListen).To(BeEmpty())
	})

	It("loads a file and names the file in errors", func() {
		dir := GinkgoT().TempDir()
		good := filepath.Join(dir, "good.yaml")
		Expect(os.WriteFile(good, topologies.Default, 0o644)).To(Succeed())
		t, err := topology.Load(good)
		Expect(err).NotTo(HaveOccurred())
		Expect(t).To(Equal(topology.Default()))

		bad := filepath.Join(dir, "bad.yaml")
		Expect(os.WriteFile(bad, []byte(withLine(20, "    size: 0")), 0o644)).To(Succeed())
		_, err = topology.Load(bad)
		Expect(err).To(MatchError(ContainSubstring(bad + ": topology: line 20: pools.pcscf.size")))

		_, err = topology.Load(filepath.Join(dir, "missing.yaml"))
		Expect(err).To(MatchError(os.ErrNotExist))
	})

	DescribeTable("rejects unknown fields, naming the field and the line",
		func(doc, want string) {
			_, err := topology.Parse([]byte(doc))
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry("top level", base+"colour: blue\n", "line 40: field colour not found"),
		Entry("in a pool", withLine(21, "    adress: 127.0.0.1"), "line 21: field adress not found"),
		Entry("in an override", base+"nodes:\n  pcscf1:\n    timerz: {}\n", "line 42: field timerz not found"),
		Entry("a duration without unit", withLine(30, "  t1: 500"), "line 30: cannot unmarshal !!int `500` into time.Duration"),
		Entry("a duration that is not one", withLine(30, "  t1: fast"), "line 30"),
	)

	It("rejects an empty file and a second document", func() {
		_, err := topology.Parse(nil)
		Expect(err).To(MatchError(ContainSubstring("empty")))
		_, err = topology.Parse([]byte(base + "---\ndomain: x\n"))
		Expect(err).To(MatchError(ContainSubstring("more than one YAML document")))
	})

	DescribeTable("Validate names the bad field and its line",
		func(doc, field string, line int, msg string) {
			_, err := topology.Parse([]byte(doc))
			Expect(err).To(HaveOccurred())
			fes := fieldErrors(err)
			Expect(fes).To(ContainElement(And(
				HaveField("Field", field), HaveField("Line", line), HaveField("Msg", ContainSubstring(msg)))), err.Error())
			Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("line %d: %s: ", line, field)))
		},
		Entry("empty domain", withLine(1, `domain: ""`), "domain", 1, "must not be empty"),
		Entry("domain with trailing dot", withLine(1, "domain: ims.test."), "domain", 1, "without the trailing dot"),
		Entry("upper-case domain", withLine(1, "domain: IMS.test"), "domain", 1, "not valid"),
		Entry("dns listen without port", withLine(3, "  listen: 127.0.0.1"), "dns.listen", 3, "want ip:port"),
		Entry("dns listen on a host name", withLine(3, "  listen: dnsd:53"), "dns.listen", 3, "not an IP address"),
		Entry("dns listen on the unspecified address", withLine(3, "  listen: 0.0.0.0:53"), "dns.listen", 3, "specific address"),
		Entry("fractional ttl", withLine(4, "  ttl: 1500ms"), "dns.ttl", 4, "whole number of seconds"),
		Entry("negative ttl", withLine(4, "  ttl: -1s"), "dns.ttl", 4, "at least 0s"),
		Entry("bad hss host", withLine(6, "  host: HSS_1"), "hss.host", 6, "not a host label"),
		Entry("bad hss address", withLine(7, "  address: 300.1.1.1"), "hss.address", 7, "not an IP address"),
		Entry("diameter port 0", withLine(8, "  diameter_port: 0"), "hss.diameter_port", 8, "not a port"),
		Entry("http port too big", withLine(9, "  http_port: 70000"), "hss.http_port", 9, "not a port"),
		Entry("bac port", withLine(13, "  port: -1"), "bac.port", 13, "not a port"),
		Entry("pool size 0", withLine(20, "    size: 0"), "pools.pcscf.size", 20, "between 1 and 8"),
		Entry("pool size 9", withLine(25, "    size: 9"), "pools.scscf.size", 25, "between 1 and 8"),
		Entry("pool size 10 with a spare", withLine(25, "    size: 10\n    scheme: n-plus-1"), "pools.scscf.size", 25, "between 1 and 9"),
		Entry("pool address", withLine(21, "    address: pcscf"), "pools.pcscf.address", 21, "not an IP address"),
		Entry("pool ports beyond 65535", withLine(22, "    base_port: 65534"), "pools.pcscf.base_port", 22, "beyond 65535"),
		Entry("pool without port", withLine(22, "    # no port"), "pools.pcscf.base_port", 19, "missing"),
		Entry("pool with base_port and port", withLine(22, "    base_port: 5061\n    port: 5060"), "pools.pcscf.port", 23, "not both"),
		Entry("zero weight", withLine(23, "    weight: 0"), "pools.pcscf.weight", 23, "between 1 and 65535"),
		Entry("address and addresses", withLine(21, "    address: 127.0.0.1\n    addresses: [127.0.0.2, 127.0.0.3, 127.0.0.4]"),
			"pools.pcscf.addresses", 22, "not both"),
		Entry("addresses count", withLine(21, "    addresses: [127.0.0.2, 127.0.0.3]"), "pools.pcscf.addresses", 21, "2 addresses for 3 members"),
		Entry("one bad address", withLine(21, "    addresses: [127.0.0.2, x, 127.0.0.4]"), "pools.pcscf.addresses[1]", 21, `"x" is not an IP`),
		Entry("t1 zero", withLine(30, "  t1: 0s"), "timers.t1", 30, "must be positive"),
		Entry("timer B negative", withLine(31, "  invite_no_answer: -2s"), "timers.invite_no_answer", 31, "must be positive"),
		Entry("timer F zero", withLine(32, "  non_invite_no_answer: 0s"), "timers.non_invite_no_answer", 32, "must be positive"),
		Entry("probe interval zero", withLine(34, "  interval: 0s"), "probing.interval", 34, "must be positive"),
		Entry("probe timeout above interval", withLine(35, "  timeout: 2s"), "probing.timeout", 35, "not be longer than the interval"),
		Entry("probe interval under 100 ms", withLine(34, "  interval: 50ms"), "probing.interval", 34, "at least 100ms"),
		Entry("jitter as long as the interval", withLine(37, "  successes_to_up: 1\n  jitter: 1s"), "probing.jitter", 38, "less than the interval (1s)"),
		Entry("negative jitter", withLine(37, "  successes_to_up: 1\n  jitter: -5ms"), "probing.jitter", 38, "must not be negative"),
		Entry("override jitter above a node's interval", base+"nodes:\n  bac:\n    probing: {interval: 100ms, timeout: 50ms, jitter: 200ms}\n",
			"nodes.bac.probing.jitter", 42, "less than the interval (100ms)"),
		Entry("provisional timeout too short", base+"failover: {provisional_timeout: 10ms}\n", "failover.provisional_timeout", 40, "at least 50ms"),
		Entry("provisional timeout negative", base+"failover: {provisional_timeout: -1s}\n", "failover.provisional_timeout", 40, "must not be negative"),
		Entry("provisional timeout as long as timer B", base+"failover: {provisional_timeout: 2s}\n", "failover.provisional_timeout", 40,
			"shorter than timers.invite_no_answer (2s)"),
		Entry("failures_to_down zero", withLine(36, "  failures_to_down: 0"), "probing.failures_to_down", 36, "at least 1"),
		Entry("successes_to_up zero", withLine(37, "  successes_to_up: 0"), "probing.successes_to_up", 37, "at least 1"),
		Entry("expires zero", withLine(39, "  expires: 0s"), "registration.expires", 39, "at least 1s"),
		Entry("bad log level", base+"log: {level: loud}\n", "log.level", 40, "debug, info, warn or error"),
		Entry("bad log format", base+"log: {format: xml}\n", "log.format", 40, "text or json"),
		Entry("duplicate address:port", withLine(17, "  port: 5062"), "icscf", 14, "127.0.0.1:5062 is also pcscf2 sip"),
		Entry("duplicate between pools", withLine(27, "    base_port: 5063"), "pools.scscf", 24, "127.0.0.1:5063 is also pcscf3 sip"),
		Entry("hss http on the dns port", withLine(9, "  http_port: 1053"), "hss", 5, "127.0.0.1:1053 is also dnsd dns"),
		Entry("duplicate node name", withLine(11, "  host: pcscf2"), "bac.host", 11, `"pcscf2" is also the name of a pcscf node`),
		Entry("override of an unknown node", base+"nodes:\n  pcscf4:\n    timers: {t1: 1s}\n", "nodes.pcscf4", 41, "no node named"),
		Entry("bad override", base+"nodes:\n  scscf2:\n    timers:\n      t1: -1s\n", "nodes.scscf2.timers.t1", 43, "must be positive"),
		Entry("override timeout above the lab interval", base+"nodes:\n  icscf:\n    probing: {timeout: 3s}\n",
			"nodes.icscf.probing.timeout", 42, "not be longer than the interval (1s)"),
		Entry("bad override log", base+"nodes:\n  bac:\n    log: {level: chatty}\n", "nodes.bac.log.level", 42, "debug, info"),
		Entry("negative max_rate", base+"overload: {max_rate: -5}\n", "overload.max_rate", 40, "positive number of requests per second"),
		Entry("metrics without a port", base+"nodes:\n  bac:\n    metrics: 127.0.0.1\n", "nodes.bac.metrics", 42, "host:port"),
		Entry("metrics of the DNS", base+"nodes:\n  dnsd:\n    metrics: 127.0.0.1:9100\n", "nodes.dnsd.metrics", 42, "only SIP nodes"),
	)

	It("keeps fast failure detection off by default and reads it, and probing down to 100 ms with jitter, when given", func() {
		d := topology.Default()
		Expect(d.Failover.Fast()).To(BeFalse(), "the study's reference: probe-based detection")
		for _, n := range []string{"bac", "pcscf1", "icscf", "scscf2"} {
			c, err := d.NodeConfig(n)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Failover.ProvisionalTimeout).To(BeZero())
		}
		t, err := topology.Parse([]byte(base + "failover: {provisional_timeout: 200ms}\n" +
			"nodes:\n  bac:\n    probing: {interval: 100ms, timeout: 80ms, jitter: 20ms}\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Failover.ProvisionalTimeout).To(Equal(200 * time.Millisecond))
		c, err := t.NodeConfig("bac")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Failover.ProvisionalTimeout).To(Equal(200*time.Millisecond), "every node gets it")
		Expect(c.Probing.Interval).To(Equal(100 * time.Millisecond))
		Expect(c.Probing.Jitter).To(Equal(20 * time.Millisecond))
		Expect(c.Validate()).To(Succeed())
		b, err := t.Marshal()
		Expect(err).NotTo(HaveOccurred())
		back, err := topology.Parse(b)
		Expect(err).NotTo(HaveOccurred())
		Expect(back.Failover).To(Equal(t.Failover))
	})

	It("lists every bad field at once", func() {
		doc := withLine(20, "    size: 0")
		doc = strings.Replace(doc, "t1: 500ms", "t1: 0s", 1)
		_, err := topology.Parse([]byte(doc))
		Expect(fieldErrors(err)).To(ConsistOf(HaveField("Field", "pools.pcscf.size"), HaveField("Field", "timers.t1")))
	})

	It("reports duplicates together with bad tuning values", func() {
		doc := withLine(17, "  port: 5062")
		doc = strings.Replace(doc, "t1: 500ms", "t1: 0s", 1)
		_, err := topology.Parse([]byte(doc))
		Expect(fieldErrors(err)).To(ConsistOf(HaveField("Field", "icscf"), HaveField("Field", "timers.t1")))
	})

	It("validates a topology built in Go, without lines", func() {
		t := topology.Default()
		t.Domain = ""
		err := t.Validate()
		Expect(err).To(MatchError("topology: domain: must not be empty"))
	})
})

var _ = Describe("Nodes", Label("unit"), func() {
	It("lists the default lab in order with names, kinds, FQDNs, addresses and ports", func() {
		type row struct {
			name  string
			kind  topology.Kind
			fqdn  string
			ports []topology.Port
		}
		sip := func(p int) []topology.Port { return []topology.Port{{Name: "sip", Proto: "udp", Port: p}} }
		want := []row{
			{"dnsd", topology.KindDNS, "dnsd.ims.test", []topology.Port{{Name: "dns", Proto: "udp+tcp", Port: 1053}}},
			{"hss", topology.KindHSS, "hss.ims.test", []topology.Port{{Name: "diameter", Proto: "tcp", Port: 3868}, {Name: "http", Proto: "tcp", Port: 8090}}},
			{"bac", topology.KindBAC, "bac.ims.test", sip(5060)},
			{"pcscf1", topology.KindPCSCF, "pcscf1.ims.test", sip(5061)},
			{"pcscf2", topology.KindPCSCF, "pcscf2.ims.test", sip(5062)},
			{"pcscf3", topology.KindPCSCF, "pcscf3.ims.test", sip(5063)},
			{"icscf", topology.KindICSCF, "icscf.ims.test", sip(5070)},
			{"scscf1", topology.KindSCSCF, "scscf1.ims.test", sip(5081)},
			{"scscf2", topology.KindSCSCF, "scscf2.ims.test", sip(5082)},
			{"scscf3", topology.KindSCSCF, "scscf3.ims.test", sip(5083)},
		}
		nodes := topology.Default().Nodes()
		Expect(nodes).To(HaveLen(len(want)))
		for i, w := range want {
			n := nodes[i]
			Expect(n.Name).To(Equal(w.name))
			Expect(n.Kind).To(Equal(w.kind))
			Expect(n.FQDN).To(Equal(w.fqdn))
			Expect(n.Address).To(Equal("127.0.0.1"))
			Expect(n.Ports).To(Equal(w.ports))
		}
		Expect(nodes[1].Endpoint("http")).To(Equal("127.0.0.1:8090"))
		Expect(nodes[1].Endpoint("sip")).To(BeEmpty())
		Expect(nodes[1].Listen()).To(Equal("127.0.0.1:3868"))
		Expect(nodes[5].Pool).To(Equal("pcscf"))
		Expect(nodes[5].Index).To(Equal(3))
	})

	It("gives pool members their own addresses and one port when asked", func() {
		doc := withLine(21, "    addresses: [10.0.0.11, 10.0.0.12, 10.0.0.13]")
		doc = strings.Replace(doc, "    base_port: 5061", "    port: 5060", 1)
		t, err := topology.Parse([]byte(doc))
		Expect(err).NotTo(HaveOccurred())
		var got []string
		for _, n := range t.NodesOfKind(topology.KindPCSCF) {
			got = append(got, n.Listen())
		}
		Expect(got).To(Equal([]string{"10.0.0.11:5060", "10.0.0.12:5060", "10.0.0.13:5060"}))
	})

	It("names hosts after the topology", func() {
		t, err := topology.Parse([]byte(withLine(11, "  host: sbc")))
		Expect(err).NotTo(HaveOccurred())
		n, ok := t.Node("sbc")
		Expect(ok).To(BeTrue())
		Expect(n.Kind).To(Equal(topology.KindBAC))
		Expect(n.FQDN).To(Equal("sbc.ims.test"))
		_, ok = t.Node("bac")
		Expect(ok).To(BeFalse())
	})
})

var _ = Describe("lab population", Label("unit"), func() {
	It("passes hss.lab_subscriber_count to the HSS's configuration", func() {
		t := topology.Default()
		t.HSS.LabSubscriberCount = 12000
		Expect(t.Validate()).To(Succeed())
		nc, err := t.NodeConfig("hss")
		Expect(err).NotTo(HaveOccurred())
		Expect(nc.HSS.LabSubscriberCount).To(Equal(12000))
		b, err := nc.Marshal()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring("lab_subscriber_count: 12000"))
	})
	DescribeTable("refuses a population it cannot provision, naming the field and the limit", func(n int) {
		t := topology.Default()
		t.HSS.LabSubscriberCount = n
		Expect(t.Validate()).To(MatchError(ContainSubstring(
			"topology: hss.lab_subscriber_count: must be between 0 (the default, 1000) and 999999 (user999999)")))
	},
		Entry("negative", -5),
		Entry("a million", 1_000_000),
	)
})

var _ = Describe("NodeGoMaxProcs", Label("unit"), func() {
	It("shares the machine's CPUs among the topology's nodes, at least one each", func() {
		d := topology.Default()
		Expect(d.Nodes()).To(HaveLen(10))
		Expect(d.NodeGoMaxProcs(2)).To(Equal(1))
		Expect(d.NodeGoMaxProcs(1)).To(Equal(1))
		Expect(d.NodeGoMaxProcs(32)).To(Equal(3))
	})

	It("lets the caller's own GOMAXPROCS win", func() {
		d := topology.Default()
		GinkgoT().Setenv("GOMAXPROCS", "")
		Expect(d.NodeGoMaxProcsSetting(64)).To(Equal("6"))
		GinkgoT().Setenv("GOMAXPROCS", "4")
		Expect(d.NodeGoMaxProcsSetting(64)).To(Equal("4"))
	})
})
