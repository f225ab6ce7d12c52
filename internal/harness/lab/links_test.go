package lab_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/topology"
)

// sitesTopology is the default topology on two sites, pcscf3 and scscf3 in south, with the given link.
func sitesTopology(link topology.Link) *topology.Topology {
	GinkgoHelper()
	t := topology.Default()
	t.Sites = []topology.Site{{Name: "north", Nodes: []string{"dnsd", "hss", "bac", "icscf"}, PCSCF: []int{1, 2},
		SCSCF: []int{1, 2}}, {Name: "south", PCSCF: []int{3}, SCSCF: []int{3}}}
	link.Between = []string{"north", "south"}
	t.LinksBetween = []topology.Link{link}
	Expect(t.Validate()).To(Succeed())
	return t
}

func ruleset(ns string) string {
	GinkgoHelper()
	out, err := netns.Exec(context.Background(), ns, "nft", "list", "ruleset")
	Expect(err).NotTo(HaveOccurred())
	return out
}

var _ = Describe("site links on the namespace backend", Label("netns", "e2e"), func() {
	BeforeEach(func() {
		if err := netns.Check(); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_NETNS") != "" {
				Fail("network namespaces are required (IMSLAB_REQUIRE_NETNS is set): " + err.Error())
			}
			Skip(err.Error())
		}
	})

	newLab := func(t *topology.Topology) *lab.Lab {
		GinkgoHelper()
		l, err := lab.New(lab.Config{Topology: t, RunDir: GinkgoT().TempDir(), Netns: true, Only: []string{"dnsd"},
			GracePeriod: 2 * time.Second}, lab.WithLogger(testLogger()))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = l.Down(); _ = l.Close() })
		return l
	}

	It("drops the link's share of the packets between the sites, only between them, and heals at Down",
		SpecTimeout(3*time.Minute), func(ctx SpecContext) {
			l := newLab(sitesTopology(topology.Link{Loss: 10}))
			Expect(l.Up(ctx)).To(Succeed())
			t := l.Topology()
			hss, _ := t.Node("hss")
			p3, _ := t.Node("pcscf3")
			p1, _ := t.Node("pcscf1")

			By("a south node drops 10 % of what it sends to north, a north node 10 % of what it sends to south")
			south := ruleset(l.Namespace("pcscf3"))
			Expect(south).To(And(ContainSubstring("numgen random mod 100 < 10 drop"), ContainSubstring(hss.Address),
				ContainSubstring(p1.Address)))
			Expect(south).NotTo(ContainSubstring(p3.Address+" "), "not towards its own site")
			north := ruleset(l.Namespace("hss"))
			Expect(north).To(And(ContainSubstring("numgen random mod 100 < 10 drop"), ContainSubstring(p3.Address)))
			Expect(north).NotTo(ContainSubstring(p1.Address), "nothing towards its own site")

			By("the lab recorded the links")
			links := eventsOf(l, "links", "")
			Expect(links).To(HaveLen(1))
			Expect(links[0]["faults"]).To(BeNumerically("==", len(t.Nodes())), "every node of both sites, a loss each")

			By("Down heals them")
			Expect(l.Down()).To(Succeed())
			Expect(ruleset(l.Namespace("pcscf3"))).NotTo(ContainSubstring("imslab_fault"))
			Expect(ruleset(l.Namespace("hss"))).NotTo(ContainSubstring("imslab_fault"))
		})

	It("shapes a link's rate towards the other site only (an HTB class with u32 filters), and removes it at Down",
		SpecTimeout(3*time.Minute), func(ctx SpecContext) {
			l := newLab(sitesTopology(topology.Link{RateKbit: 1000}))
			Expect(l.Up(ctx)).To(Succeed())
			t := l.Topology()
			p1, _ := t.Node("pcscf1")
			tc := func(ns string, args ...string) string {
				out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "tc"}, args...)...).CombinedOutput()
				Expect(err).NotTo(HaveOccurred(), "%s", out)
				return string(out)
			}
			ns := l.Namespace("pcscf3")
			Expect(tc(ns, "qdisc", "show")).To(ContainSubstring("qdisc htb fa17: dev eth0 root"))
			Expect(tc(ns, "class", "show", "dev", "eth0")).To(ContainSubstring("rate 1Mbit"))
			filters := tc(ns, "filter", "show", "dev", "eth0")
			a4 := netip.MustParseAddr(p1.Address).As4()
			hex := fmt.Sprintf("%02x%02x%02x%02x", a4[0], a4[1], a4[2], a4[3])
			Expect(filters).To(ContainSubstring(hex+"/ffffffff"), "pcscf1 (north) is behind the link")
			Expect(l.Down()).To(Succeed())
		})

	It("applies a link's delay or, on a kernel that cannot delay packets, fails naming the link and what is missing",
		SpecTimeout(3*time.Minute), func(ctx SpecContext) {
			l := newLab(sitesTopology(topology.Link{Delay: 20 * time.Millisecond, Loss: 1}))
			err := l.Up(ctx)
			if err != nil {
				Expect(errors.Is(err, netfault.ErrUnsupported)).To(BeTrue(), err.Error())
				Expect(err.Error()).To(And(ContainSubstring("site link north–south cannot be applied"),
					ContainSubstring("delay 20ms"), ContainSubstring("needs sch_netem")))
				Expect(status(l, "dnsd").PID).To(BeZero(), "nothing was started")
				for _, n := range []string{"pcscf3", "hss"} {
					Expect(ruleset(l.Namespace(n))).NotTo(ContainSubstring("imslab_fault"),
						"what was applied before the failure is healed")
				}
				return
			}
			Expect(eventsOf(l, "links", "")).To(HaveLen(1))
			q, qerr := netns.Exec(ctx, l.Namespace("pcscf3"), "tc", "qdisc", "show", "dev", "eth0")
			Expect(qerr).NotTo(HaveOccurred())
			GinkgoWriter.Println(q)
			Expect(strings.TrimSpace(q)).NotTo(BeEmpty())
		})
})

var _ = Describe("site links without namespaces", Label("e2e"), func() {
	It("are not applied, and the lab says so in its events instead of passing a one-host run off as a WAN",
		SpecTimeout(3*time.Minute), func(ctx SpecContext) {
			t := testTopology()
			t.Sites = []topology.Site{{Name: "north", Nodes: []string{"dnsd", "hss", "bac", "icscf"}, PCSCF: []int{1},
				SCSCF: []int{1}}, {Name: "south", PCSCF: []int{2}, SCSCF: []int{2}}}
			t.LinksBetween = []topology.Link{{Between: []string{"north", "south"}, Loss: 1}}
			Expect(t.Validate()).To(Succeed())
			l, err := lab.New(lab.Config{Topology: t, RunDir: GinkgoT().TempDir(), Only: []string{"dnsd"},
				GracePeriod: 2 * time.Second}, lab.WithLogger(testLogger()))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = l.Down(); _ = l.Close() })
			Expect(l.Up(ctx)).To(Succeed())
			Expect(eventsOf(l, "links", "")).To(BeEmpty())
			Expect(eventsOf(l, "links_not_applied", "")).To(ConsistOf(HaveKeyWithValue("reason", ContainSubstring("--netns"))))
		})
})
