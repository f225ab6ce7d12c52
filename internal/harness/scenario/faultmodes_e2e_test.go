package scenario_test

import (
	"math"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
)

// Variants of the shipped process faults the scenarios do not ship: the HSS frozen instead of killed, and a site
// that comes back. Each is checked by what the processes and the nodes recorded, not by the injector's word; the
// scenarios' own expectations are about the shipped variants and are not checked here.
var _ = Describe("process faults the shipped scenarios do not use, observed", Label("e2e", "full"), Ordered, func() {
	var binDir string
	BeforeAll(func(ctx SpecContext) { binDir = buildNodes(ctx) }, NodeTimeout(5*time.Minute))

	// run runs the shortened scenario, changed by edit, in a directory kept only when the spec fails.
	run := func(ctx SpecContext, name string, edit func(*scenario.Scenario)) *shippedRun {
		GinkgoHelper()
		dir, err := os.MkdirTemp("", "faultmode-"+name+"-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				AddReportEntry("run directory (kept)", dir)
				return
			}
			Expect(os.RemoveAll(dir)).To(Succeed())
		})
		return runShippedEdited(ctx, name, binDir, dir, ciDuration, edit)
	}

	// hss-outage shortened (24 s), the HSS frozen (SIGSTOP) from 6 s to 14 s instead of killed, pcscf1 left alone.
	It("hss-down, mode pause: the same HSS process, silent while frozen, answers again when resumed", func(ctx SpecContext) {
		s := run(ctx, "hss-outage", func(sc *scenario.Scenario) {
			sc.Faults = sc.Faults[:1]
			sc.Faults[0].Mode = scenario.ModePause
			sc.Expectations = nil
		})
		f := s.sc.Faults[0]
		from, to := s.sum.StartNs+int64(f.At), s.sum.StartNs+int64(f.At+f.For)
		for _, e := range s.procEvents("hss", 0) {
			Expect(e.Kind == "node_exit" && e.TNs < s.endNs()).To(BeFalse(), "the HSS process did not exit: %+v", e)
		}
		Expect(s.ownEvents("hss", "node_ready", 0, math.MaxInt64)).To(HaveLen(1), "the HSS started once: frozen, not restarted")
		// A stopped process writes nothing: no Cx answer from just after the freeze until the resume.
		silent := 0
		var after []cxAnswer
		for _, a := range s.cx {
			switch {
			case a.TNs > from+int64(100*time.Millisecond) && a.TNs < to:
				silent++
			case a.TNs >= to && a.TNs <= s.endNs() && cxOK(a):
				after = append(after, a)
			}
		}
		Expect(silent).To(BeZero(), "Cx answers while the HSS was frozen")
		Expect(after).NotTo(BeEmpty(), "the resumed HSS answers Cx again")
		// The S-CSCF assignments are intact: nobody registered again, and calls started 2 s after the resume are
		// answered (the Cx clients' requests of the freeze timed out meanwhile; the connections stayed up).
		Expect(s.registrations(from, s.endNs())).To(BeZero(), "nobody registered again")
		all, ok := s.calls(to+int64(2*time.Second), s.endNs()-int64(2*time.Second))
		Expect(all).To(BeNumerically(">", 0))
		Expect(float64(ok)).To(BeNumerically(">=", 0.95*float64(all)), "calls answered after the resume")
		GinkgoWriter.Printf("hss pause: %d Cx answers after the resume; calls from 2 s after it: %d answered of %d\n",
			len(after), ok, all)
	}, NodeTimeout(6*time.Minute))

	// site-loss shortened (24 s), south killed at 8 s and started again 8 s later (for: 8s).
	It("site-down with for: every south node died, started again by its own account, and north holds it up", func(ctx SpecContext) {
		s := run(ctx, "site-loss", func(sc *scenario.Scenario) {
			sc.Faults[0].For = 8 * time.Second
			sc.Expectations = nil
		})
		site, ok := strings.CutPrefix(s.dead, topology.SiteTargetPrefix)
		Expect(ok).To(BeTrue(), "the fault names a site: %q", s.dead)
		south := s.sc.Topology.SiteNodes(site)
		Expect(south).To(ConsistOf("pcscf3", "pcscf4", "scscf3", "scscf4"))
		for _, n := range south {
			exit, ready, _ := s.outage(n, s.faultNs)
			Expect(exit.Signal).To(Equal("SIGKILL"), "%s was killed: %+v", n, exit)
			Expect(ready.TNs).NotTo(BeZero(), "the lab started %s again", n)
			own := s.ownEvents(n, "node_ready", exit.TNs, math.MaxInt64)
			Expect(own).NotTo(BeEmpty(), "%s wrote node_ready again after its restart", n)
			// A north node that probes n holds it up at the end (its last peer_state for n).
			var up []string
			for _, m := range s.sc.Topology.SiteNodes("north") {
				var last *nodeEvent
				for _, e := range s.ownEvents(m, "peer_state", 0, s.endNs()) {
					if nodeOfHost(e.Peer) == n {
						last = &e
					}
				}
				if last != nil && last.State == "up" && last.TNs > own[0].TNs {
					up = append(up, m)
				}
			}
			Expect(up).NotTo(BeEmpty(), "a north node marked %s up again after its return", n)
		}
	}, NodeTimeout(6*time.Minute))
})
