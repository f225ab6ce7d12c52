package scenario_test

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
)

// The issue-11 scenarios that act on processes, against containers: the same shortened runs and shipped
// expectations as the local specs (shipped_e2e_test.go), each fault checked by what the containers' nodes wrote
// in their own event files, not by the injector's fault events. On this backend a "process" is a container: the
// lab kills it (docker kill) and starts it again (docker start), and the node inside writes node_ready again.
var _ = Describe("the process-fault scenarios against containers", Label("e2e", "docker", "full"), func() {
	// composeRun is a finished compose run: its directory, the scenario as run and its summary.
	type composeRun struct {
		dir string
		sc  *scenario.Scenario
		sum report.Summary
	}
	run := func(ctx SpecContext, name string, ports int, d time.Duration) composeRun {
		GinkgoHelper()
		dir, sc := runCompose(ctx, name, func(sc *scenario.Scenario) { shortenTo(sc, freeBlock(ports), ports, d) })
		var r composeRun
		r.dir, r.sc = dir, sc
		b, err := os.ReadFile(filepath.Join(dir, report.FileSummary))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(b, &r.sum)).To(Succeed())
		return r
	}
	// own is a node's own events of a kind, in time order. A line that does not decode (a killed container's
	// torn last line) is skipped, as the report skips it.
	own := func(r composeRun, node, kind string) []nodeEvent {
		GinkgoHelper()
		var out []nodeEvent
		eachLine(filepath.Join(r.dir, "events", node+".jsonl"), func(line []byte) {
			var e nodeEvent
			if json.Unmarshal(line, &e) == nil && e.Kind == kind {
				out = append(out, e)
			}
		})
		slices.SortStableFunc(out, func(a, b nodeEvent) int { return cmp.Compare(a.TNs, b.TNs) })
		return out
	}
	// at is the instant of an offset from the run's start.
	at := func(r composeRun, d time.Duration) int64 { return r.sum.StartNs + int64(d) }

	It("hss-outage: the HSS container answered no Cx while it was down, started again on its data, and pcscf1's "+
		"users were taken over by LIR UAT 2 after its return", func(ctx SpecContext) {
		r := run(ctx, "hss-outage", 11, ciDuration)
		f := r.sc.Faults[0]
		Expect(f.Kind).To(Equal("hss-down"))
		ready := own(r, "hss", "node_ready")
		Expect(len(ready)).To(BeNumerically(">=", 2), "the HSS wrote node_ready at the start and again after its restart")
		back := ready[len(ready)-1].TNs
		Expect(back).To(BeNumerically(">=", at(r, f.At+f.For)-int64(500*time.Millisecond)),
			"the HSS came back at the end of the outage, not before")
		var answers []cxAnswer
		eachLine(filepath.Join(r.dir, "events", "hss.jsonl"), func(line []byte) {
			var e struct {
				Kind string `json:"kind"`
			}
			var a cxAnswer
			if json.Unmarshal(line, &e) == nil && e.Kind == "cx_answer" && json.Unmarshal(line, &a) == nil {
				answers = append(answers, a)
			}
		})
		// The lab's kill of the container (its fault event, written as docker kill is sent): the HSS may still
		// answer in the few milliseconds the engine takes to stop it (14 ms after the event in one run), not later.
		var killed int64
		for _, e := range readJSONL[map[string]any](filepath.Join(r.dir, "events", "lab.jsonl")) {
			if e["kind"] == "fault" && e["fault"] == "kill" && e["target"] == "hss" {
				killed = int64(e["t_ns"].(float64))
			}
		}
		Expect(killed).NotTo(BeZero(), "the lab killed the HSS container")
		for _, a := range answers {
			Expect(a.TNs > killed+int64(100*time.Millisecond) && a.TNs < back).To(BeFalse(),
				"a Cx answer while the HSS was down: %s", a)
		}
		Expect(r.sum.AffectedIMPUs).NotTo(BeEmpty())
		for _, u := range r.sum.AffectedIMPUs {
			Expect(answers).To(ContainElement(Satisfy(func(a cxAnswer) bool {
				return a.Cmd == "LIR" && a.IMPU == u && uatIs(a, 2) && cxOK(a) && a.TNs > back
			})), "%s: LIR with UAT 2 answered after the HSS's return", u)
		}
	}, NodeTimeout(6*time.Minute))

	It("dns-outage: the nodes served stale answers while the dnsd container was down, and dnsd wrote node_ready "+
		"again after it", func(ctx SpecContext) {
		r := run(ctx, "dns-outage", 11, ciDuration)
		f := r.sc.Faults[0]
		Expect(f.Kind).To(Equal("dns-down"))
		Expect(len(own(r, "dnsd", "node_ready"))).To(BeNumerically(">=", 2), "dnsd started again")
		for _, n := range []string{"bac", "icscf"} {
			served := 0
			for _, e := range own(r, n, "dns_stale") {
				if e.TNs > at(r, f.At) && e.TNs <= at(r, f.At+f.For)+int64(1500*time.Millisecond) {
					served += e.Served
				}
			}
			Expect(served).To(BeNumerically(">", 0), "%s served stale answers while dnsd was down", n)
		}
	}, NodeTimeout(6*time.Minute))

	It("failback-pcscf: the pcscf1 container, started again empty, restored its old users on their calls and "+
		"nobody registered again", func(ctx SpecContext) {
		r := run(ctx, "failback-pcscf", 11, ciDuration)
		Expect(r.sum.Faults).NotTo(BeEmpty())
		Expect(r.sum.Faults[0].HealS).NotTo(BeNil(), "the heal was recorded")
		heal := r.sum.StartNs + int64(*r.sum.Faults[0].HealS*1e9)
		Expect(len(own(r, "pcscf1", "node_ready"))).To(BeNumerically(">=", 2), "pcscf1 started again")
		restored := 0
		for _, e := range own(r, "pcscf1", "restore") {
			if e.TNs > heal {
				restored++
			}
		}
		Expect(restored).To(BeNumerically(">", 0), "pcscf1, back and empty, restored users on their calls")
		regs, ok := r.sum.Lookup("faults.0.after_heal.registrations")
		Expect(ok).To(BeTrue())
		Expect(regs).To(BeZero(), "nobody registered again")
	}, NodeTimeout(6*time.Minute))

	// 30 s, as the local spec: two full cycles of the 5 s flap (shortenTo does not scale a flap's period).
	It("flapping-scscf: the scscf1 container came back more than once by its own account, and the others took "+
		"its users over", func(ctx SpecContext) {
		r := run(ctx, "flapping-scscf", 11, 30*time.Second)
		Expect(len(own(r, "scscf1", "node_ready"))).To(BeNumerically(">=", 3),
			"scscf1 wrote node_ready at the start and after at least two restarts")
		takeovers := len(own(r, "scscf2", "takeover")) + len(own(r, "scscf3", "takeover"))
		restores := 0
		for _, n := range []string{"pcscf1", "pcscf2", "pcscf3"} {
			restores += len(own(r, n, "restore"))
		}
		Expect(takeovers+restores).To(BeNumerically(">", 0), "scscf1's users were restored elsewhere")
	}, NodeTimeout(6*time.Minute))

	It("site-loss: every south container died and a north node holds each down; the affected users were served",
		func(ctx SpecContext) {
			r := run(ctx, "site-loss", 13, ciDuration)
			site, ok := strings.CutPrefix(r.sc.Faults[0].Target, topology.SiteTargetPrefix)
			Expect(ok).To(BeTrue(), "the fault names a site: %q", r.sc.Faults[0].Target)
			south := r.sc.Topology.SiteNodes(site)
			Expect(south).To(ConsistOf("pcscf3", "pcscf4", "scscf3", "scscf4"))
			for _, n := range south {
				var by []string
				for _, m := range r.sc.Topology.SiteNodes("north") {
					var last *nodeEvent
					for _, e := range own(r, m, "peer_state") {
						if nodeOfHost(e.Peer) == n {
							last = &e
						}
					}
					if last != nil && last.State == "down" {
						by = append(by, m)
					}
				}
				Expect(by).NotTo(BeEmpty(), "a north node holds %s down at the end (its last peer_state)", n)
			}
			Expect(r.sum.AffectedIMPUs).NotTo(BeEmpty())
		}, NodeTimeout(6*time.Minute))
})
