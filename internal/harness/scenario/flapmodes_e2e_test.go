package scenario_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

// listenOf returns a node's listen address (host:port in the lab network) from the run's configuration.
func listenOf(dir, node string) string {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(dir, "config", node+".yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "listen:"); ok && strings.Contains(v, "10.89.") {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	Fail("no namespace listen address in the configuration of " + node)
	return ""
}

// dnsAnswers sends one DNS query for name from namespace ns to server and reports whether any answer came back
// within timeout (its rcode does not matter: an answer shows the server was reached).
func dnsAnswers(ns, server, name string, timeout time.Duration) bool {
	GinkgoHelper()
	var conn net.Conn
	Expect(netns.Do(ns, func() error {
		var err error
		conn, err = net.Dial("udp", server) // the socket lives in ns from now on
		return err
	})).To(Succeed())
	defer conn.Close()
	id := uint16(time.Now().UnixNano())
	q := binary.BigEndian.AppendUint16(nil, id)
	q = append(q, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0) // recursion desired, one question
	for _, label := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		q = append(q, byte(len(label)))
		q = append(q, label...)
	}
	q = append(q, 0, 0, 1, 0, 1) // root, type A, class IN
	_, err := conn.Write(q)
	Expect(err).NotTo(HaveOccurred())
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 1500)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return false // a timeout (silent drop), or a refusal: no answer either way
		}
		if n >= 2 && binary.BigEndian.Uint16(buf) == id {
			return true
		}
	}
}

// running tells whether process pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// labEvents reads events/lab.jsonl with every field.
func labEvents(dir string) []map[string]any {
	GinkgoHelper()
	b, err := readNodeEvents(filepath.Join(dir, "events", "lab.jsonl"))
	Expect(err).NotTo(HaveOccurred())
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		Expect(json.Unmarshal([]byte(l), &m)).To(Succeed())
		out = append(out, m)
	}
	return out
}

var _ = Describe("flap mode partition and dns-down mode unreachable in the real lab", Label("netns", "e2e", "full"), func() {
	var binDir string
	BeforeEach(func(ctx SpecContext) {
		if err := netns.Check(); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_NETNS") != "" {
				Fail("network namespaces are required (IMSLAB_REQUIRE_NETNS is set): " + err.Error())
			}
			Skip(err.Error())
		}
		binDir = buildNodes(ctx)
	}, NodeTimeout(5*time.Minute))

	It("flap mode partition: the BAC loses pcscf1 in every cut and gets it back after every heal; pcscf1 is never stopped",
		SpecTimeout(9*time.Minute), func(ctx SpecContext) {
			const at, period, lasts = 8 * time.Second, 5 * time.Second, 20 * time.Second // cuts at 8 s and 18 s
			r := startNetns(ctx, "partition-bac-pcscf", binDir, func(sc *scenario.Scenario) {
				sc.Duration, sc.Seed = 34*time.Second, 42
				sc.Traffic.Phones = 10
				sc.Faults = []scenario.Fault{{Kind: "flap", Mode: scenario.ModePartition, Target: "pcscf1",
					Peers: []string{"bac"}, At: at, For: lasts, Period: period}}
				sc.Expectations = nil // the shipped ones are about one partition
			})
			up := r.labEvent("netns_up")
			ns := netns.NamespaceName(up.ID, "pcscf1")
			By("during the first cut pcscf1's namespace holds the partition table")
			r.labEvent("net_fault")
			rules := nftRuleset(ctx, ns)
			healed, _ := readNodeEvents(filepath.Join(r.dir, "events", "lab.jsonl"))
			if strings.Contains(string(healed), `"kind":"net_fault_heal"`) {
				// This process was starved past the 5 s cut (a loaded machine): the table is rightly gone.
				AddReportEntry("first cut's table not seen: healed before it was listed", rules)
			} else {
				Expect(rules).To(And(ContainSubstring("imslab_fault_partition"), ContainSubstring(nodeAddr(r.dir, "bac"))))
			}
			r.wait()

			var start, end int64
			var cuts, heals []int64
			evs := labEvents(r.dir)
			for _, e := range evs {
				if e["kind"] == "fault_heal" && e["fault"] == "flap" {
					end = int64(e["t_ns"].(float64))
				}
			}
			Expect(end).NotTo(BeZero(), "the flap is over before the run ends")
			for _, e := range evs {
				tns := int64(e["t_ns"].(float64))
				if tns > end {
					break // the lab stops every node at the end of the run
				}
				switch {
				case e["kind"] == "fault" && e["fault"] == "flap":
					start = tns
					Expect(e["mode"]).To(Equal("partition"))
				case e["kind"] == "net_fault" && e["target"] == "pcscf1":
					cuts = append(cuts, tns)
				case e["kind"] == "net_fault_heal" && e["target"] == "pcscf1":
					heals = append(heals, tns)
				case e["target"] == "pcscf1" && (e["kind"] == "node_exit" || e["kind"] == "node_start" && start != 0 ||
					e["kind"] == "fault" && e["fault"] != "flap"):
					Fail(fmt.Sprintf("pcscf1 was not to be stopped: %v", e))
				}
			}
			Expect(start).NotTo(BeZero())
			Expect(cuts).To(HaveLen(2), "cut at 8 s and 18 s")
			Expect(heals).To(HaveLen(2), "healed at 13 s and 23 s")
			// The lab records a cut or a heal once nft has done it: never before its scheduled instant (the flap's
			// fault event is at its at). How late is reported, not bounded: on a loaded machine one apply (a
			// snapshot of the ruleset and qdiscs, then the table) was recorded 4.9 s after its instant.
			for i := range cuts {
				cut, heal := time.Duration(cuts[i]-start), time.Duration(heals[i]-start)
				Expect(cut).To(BeNumerically(">=", time.Duration(2*i)*period), "cut %d", i)
				Expect(heal).To(BeNumerically(">=", time.Duration(2*i+1)*period), "heal %d", i)
				AddReportEntry(fmt.Sprintf("cut %d and heal %d recorded after their instants", i, i),
					fmt.Sprintf("%s, %s", cut-time.Duration(2*i)*period, heal-time.Duration(2*i+1)*period))
			}

			By("the BAC's own probing: pcscf1 down within every cut, up again after every heal")
			var downs, ups []int64
			for _, e := range r.events("bac") {
				// The window is the flap and one period after it: later transitions are not the flap's (on the
				// loaded machine the lab degraded later in every run, the shipped partition spec's too).
				if e.Kind == "peer_state" && strings.HasPrefix(e.Peer, "pcscf1.") && e.TNs > start &&
					e.TNs < end+int64(period) {
					if e.State == "down" {
						// The reason is not checked: a silent drop ends a probe in a timeout, but a transaction
						// already in flight (or a connection) at the cut can end as a transport_error (seen once).
						downs = append(downs, e.TNs)
						AddReportEntry("bac down reason", e.Reason)
					} else if e.State == "up" {
						ups = append(ups, e.TNs)
					}
				}
			}
			GinkgoWriter.Printf("cuts %v heals %v downs %v ups %v\n", cuts, heals, downs, ups)
			Expect(downs).To(HaveLen(2), "one down per cut")
			Expect(ups).To(HaveLen(2), "one up per heal")
			// A cut takes effect between its scheduled instant and its recorded one (the lab records it once nft
			// is done), a heal likewise (the table goes first, the check that the namespace is as before follows).
			for i := range cuts {
				cutAt, healAt := start+int64(time.Duration(2*i)*period), start+int64(time.Duration(2*i+1)*period)
				Expect(downs[i]).To(BeNumerically(">", cutAt), "down %d after cut %d", i, i)
				Expect(downs[i]).To(BeNumerically("<", heals[i]), "down %d while cut", i)
				Expect(ups[i]).To(BeNumerically(">", healAt), "up %d after heal %d", i, i)
				if i+1 < len(cuts) {
					Expect(ups[i]).To(BeNumerically("<", cuts[i+1]), "back before the next cut")
				}
				AddReportEntry(fmt.Sprintf("cycle %d: BAC down after the cut, up after the heal", i),
					fmt.Sprintf("%s, %s", time.Duration(downs[i]-cutAt), time.Duration(ups[i]-healAt)))
			}
			Expect(r.err).NotTo(HaveOccurred())
		})

	It("dns-down mode unreachable: dnsd runs but nobody reaches it; calls go on with the nodes' stale answers",
		SpecTimeout(9*time.Minute), func(ctx SpecContext) {
			r := startNetns(ctx, "dns-outage", binDir, func(sc *scenario.Scenario) {
				sc.Duration, sc.Seed = 36*time.Second, 42
				sc.Traffic.Phones = 10
				sc.Faults[0].Mode = scenario.ModeUnreachable
				sc.Faults[0].At, sc.Faults[0].For = 10*time.Second, 12*time.Second
			})
			up := r.labEvent("netns_up")
			pcscf1 := netns.NamespaceName(up.ID, "pcscf1")
			dnsd := listenOf(r.dir, "dnsd")
			Eventually(func() bool { return dnsAnswers(pcscf1, dnsd, "ims.test", time.Second) }, time.Minute).
				Should(BeTrue(), "dnsd answers pcscf1 before the fault")

			By("while it lasts dnsd's process is alive, its namespace drops everything, and pcscf1's query gets no answer")
			r.labEvent("net_fault")
			var dnsdPID int
			for _, e := range labEvents(r.dir) {
				if e["kind"] == "node_start" && e["target"] == "dnsd" {
					dnsdPID = int(e["pid"].(float64))
				}
			}
			Expect(dnsdPID).NotTo(BeZero())
			Expect(running(dnsdPID)).To(BeTrue(), "dnsd runs")
			Expect(nftRuleset(ctx, netns.NamespaceName(up.ID, "dnsd"))).To(ContainSubstring("imslab_fault_isolate"))
			Expect(dnsAnswers(pcscf1, dnsd, "ims.test", 1500*time.Millisecond)).To(BeFalse(), "unreachable")
			Expect(running(dnsdPID)).To(BeTrue(), "dnsd still runs")

			By("after the heal pcscf1 reaches it again")
			r.labEvent("fault_heal")
			Eventually(func() bool { return dnsAnswers(pcscf1, dnsd, "ims.test", time.Second) }, 10*time.Second).
				Should(BeTrue())
			r.wait()
			evs := labEvents(r.dir)
			var healed int64
			for _, e := range evs {
				if e["kind"] == "fault_heal" {
					healed = int64(e["t_ns"].(float64))
				}
			}
			Expect(healed).NotTo(BeZero())
			for _, e := range evs {
				if int64(e["t_ns"].(float64)) > healed+int64(5*time.Second) {
					break // the lab stops every node at the end of the run
				}
				if e["target"] == "dnsd" {
					Expect(e["kind"]).NotTo(Equal("node_exit"), "dnsd was never stopped: %v", e)
					Expect(e["fault"] == nil || e["fault"] == "dns-down").To(BeTrue(), "no process fault on dnsd: %v", e)
				}
			}
			Expect(r.err).NotTo(HaveOccurred())
			By("the scenario's own expectations: calls during the outage answered (stale answers), nobody registered again")
			for _, res := range r.outcome.Results {
				if res.Metric == "setup_latency_ms.normal.max" {
					// Tuned for the kill mode, where a query to the dead dnsd meets ICMP port unreachable at once;
					// an unreachable dnsd makes every recheck wait out the query timeout. Reported, not checked.
					AddReportEntry("setup_latency_ms.normal.max with dnsd unreachable", *res.Actual)
					continue
				}
				Expect(res.OK).To(BeTrue(), "%s: %v", res.Title(), res)
			}
			Expect(r.outcome.Results).NotTo(BeEmpty())
		})
})
