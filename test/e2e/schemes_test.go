package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/topology"
)

// withScheme sets the scheme of one pool ("pcscf" or "scscf") in the test topology.
func withScheme(pool, scheme string) func(string) string {
	return func(doc string) string {
		return strings.Replace(doc, "  "+pool+": {size: 3,", "  "+pool+": {scheme: "+scheme+", size: 3,", 1)
	}
}

// registerAll registers phones user<from>…user<from+n-1>.
func registerAll(sctx context.Context, phones *ue.UE, from, n int) {
	for i := from; i < from+n; i++ {
		ctx, cancel := context.WithTimeout(sctx, 20*time.Second)
		Expect(phones.Phone(fmt.Sprintf("user%04d", i)).Register(ctx)).To(Succeed())
		cancel()
	}
}

// tryCall places a call and returns its result, failed or not.
func tryCall(sctx context.Context, phones *ue.UE, from, to string) ue.CallResult {
	ctx, cancel := context.WithTimeout(sctx, 30*time.Second)
	defer cancel()
	res, _ := phones.Phone(from).Call(ctx, "sip:"+to+"@ims.test", 300*time.Millisecond)
	return res
}

// pick returns a phone of 1..n whose registration names (or does not name) host.
func pick(phones *ue.UE, n int, on bool, host func(ue.Registration) string, dead string) string {
	for i := 1; i <= n; i++ {
		u := fmt.Sprintf("user%04d", i)
		if (shortName(host(phones.Phone(u).Registration())) == dead) == on {
			return u
		}
	}
	Fail(fmt.Sprintf("no phone with on=%v for %s", on, dead))
	return ""
}

// killUnder finds a phone among user0002…user0006 registered through neither deadP nor deadS (skipping the spec
// when the random spread put none there), kills both nodes and returns that phone's user name: the other end of
// the calls that check the takeover.
func killUnder(l *lab, phones *ue.UE, deadP, deadS string) string {
	GinkgoHelper()
	other := ""
	for i := 2; i <= 6 && other == ""; i++ {
		r := phones.Phone(fmt.Sprintf("user%04d", i)).Registration()
		if shortName(r.PCSCF) != deadP && shortName(r.SCSCF) != deadS {
			other = fmt.Sprintf("user%04d", i)
		}
	}
	if other == "" {
		Skip("no phone on the other P-CSCF and S-CSCF (random registration spread)")
	}
	l.kill(deadP)
	l.kill(deadS)
	return other
}

func pcscfOf(r ue.Registration) string { return r.PCSCF }
func scscfOf(r ue.Registration) string { return r.SCSCF }

var _ = Describe("Load sharing (no restoration)", Label("e2e"), func() {
	It("after a P-CSCF kill: MT to its user fails, its MO call gets 504 with the restoration body, the phone registers again and calls succeed",
		SpecTimeout(120*time.Second), func(sctx SpecContext) {
			l := startLab(withScheme("pcscf", "load-sharing"), withScheme("scscf", "load-sharing"))
			phones := startPhones(l.dns(), 1, 6, 50*time.Millisecond, 0)
			registerAll(sctx, phones, 1, 6)
			dead := shortName(phones.Phone("user0001").Registration().PCSCF)
			victim := pick(phones, 6, true, pcscfOf, dead)
			other := pick(phones, 6, false, pcscfOf, dead)
			count := phones.Phone(victim).Registration().Count
			l.kill(dead)

			By("terminating: the survivor that " + dead + "'s per-host record leads to does not know " + victim)
			mt := tryCall(sctx, phones, other, victim)
			Expect(mt.Result).NotTo(Equal("ok"))
			Expect(mt.Status).To(Equal(480))

			By("originating: 504 with the restoration body, and the phone registers again at once")
			mo := tryCall(sctx, phones, victim, other)
			Expect(mo.Status).To(Equal(504))
			Expect(hasAnyEvent(l, []string{"pcscf1", "pcscf2", "pcscf3"}, "restoration_504", map[string]any{"reason": "not registered here"})).To(BeTrue())
			Eventually(func() int { return phones.Phone(victim).Registration().Count }).WithTimeout(20*time.Second).
				Should(BeNumerically(">", count), "the phone re-registered on the 504")
			Expect(shortName(phones.Phone(victim).Registration().PCSCF)).NotTo(Equal(dead))
			Expect(hasEvent(l.events("hss"), "cx_answer", map[string]any{"cmd": "LIR", "uat": float64(2)})).To(BeFalse(),
				"no quasi-pool takeover query")

			By("after the re-registration calls in both directions succeed")
			Expect(tryCall(sctx, phones, victim, other).Result).To(Equal("ok"))
			Expect(tryCall(sctx, phones, other, victim).Result).To(Equal("ok"))
		})

	It("after an S-CSCF kill: MT to its user fails until the user registers again (UAR UAT 2 picks a live S-CSCF)",
		SpecTimeout(150*time.Second), func(sctx SpecContext) {
			l := startLab(withScheme("pcscf", "load-sharing"), withScheme("scscf", "load-sharing"))
			phones := startPhones(l.dns(), 1, 6, 50*time.Millisecond, 0)
			registerAll(sctx, phones, 1, 6)
			dead := shortName(phones.Phone("user0001").Registration().SCSCF)
			victim := pick(phones, 6, true, scscfOf, dead)
			other := pick(phones, 6, false, scscfOf, dead)
			l.kill(dead)

			By("terminating: the I-CSCF finds " + dead + " in the HSS, cannot reach it and takes no other S-CSCF")
			for range 2 {
				mt := tryCall(sctx, phones, other, victim)
				Expect(mt.Result).NotTo(Equal("ok"))
				Expect(mt.Status).To(Equal(504))
			}
			Expect(hasEvent(l.events("icscf"), "reselect", map[string]any{"cmd": "LIR"})).To(BeFalse())

			By("originating: the P-CSCF cannot reach " + dead + " and answers 504 with the restoration body")
			count := phones.Phone(victim).Registration().Count
			mo := tryCall(sctx, phones, victim, other)
			Expect(mo.Status).To(Equal(504))
			Expect(hasAnyEvent(l, []string{"pcscf1", "pcscf2", "pcscf3"}, "restoration_504", map[string]any{"reason": "S-CSCF unreachable"})).To(BeTrue())

			By("the phone registers again: UAR UAT 2 and a live S-CSCF; then it is reachable again")
			Eventually(func() int { return phones.Phone(victim).Registration().Count }).WithTimeout(20 * time.Second).
				Should(BeNumerically(">", count))
			Expect(shortName(phones.Phone(victim).Registration().SCSCF)).NotTo(Equal(dead))
			Expect(registrationOf(l.hssHTTP(), victim+"@ims.test")["server_name"]).NotTo(Equal("sip:" + dead + ".ims.test"))
			Expect(tryCall(sctx, phones, other, victim).Result).To(Equal("ok"))
			Expect(tryCall(sctx, phones, victim, other).Result).To(Equal("ok"))
			Expect(hasEvent(l.events("hss"), "cx_answer", map[string]any{"cmd": "SAR", "sat": float64(3)})).To(BeFalse(),
				"no S-CSCF restored a user from the HSS")
		})
})

// hasAnyEvent reports an event of a kind with the given fields at any of the nodes.
func hasAnyEvent(l *lab, nodes []string, kind string, fields map[string]any) bool {
	for _, n := range nodes {
		if hasEvent(l.events(n), kind, fields) {
			return true
		}
	}
	return false
}

var _ = Describe("N+1 (a cold spare)", Label("e2e"), func() {
	It("gives the spare no users until a member fails, then the failed member's users as they register again",
		SpecTimeout(150*time.Second), func(sctx SpecContext) {
			l := startLab(withScheme("pcscf", "n-plus-1"), withScheme("scscf", "n-plus-1"))
			phones := startPhones(l.dns(), 1, 6, 50*time.Millisecond, 0)
			registerAll(sctx, phones, 1, 6)
			for i := 1; i <= 6; i++ {
				r := phones.Phone(fmt.Sprintf("user%04d", i)).Registration()
				Expect(shortName(r.PCSCF)).NotTo(Equal("pcscf3"), "the spare P-CSCF gets no first registration")
				Expect(shortName(r.SCSCF)).NotTo(Equal("scscf3"), "the spare S-CSCF gets no first registration")
			}
			deadP := shortName(phones.Phone("user0001").Registration().PCSCF)
			deadS := shortName(phones.Phone("user0001").Registration().SCSCF)
			other := killUnder(l, phones, deadP, deadS)

			By("the spare has no data: user0001's call is refused with the restoration 504, and the phone registers again")
			count := phones.Phone("user0001").Registration().Count
			Expect(tryCall(sctx, phones, "user0001", other).Status).To(Equal(504))
			Eventually(func() int { return phones.Phone("user0001").Registration().Count }).WithTimeout(30 * time.Second).
				Should(BeNumerically(">", count))

			By("the re-registration lands on the spares: " + deadP + "'s and " + deadS + "'s per-host records put them second")
			r := phones.Phone("user0001").Registration()
			Expect(shortName(r.PCSCF)).To(Equal("pcscf3"))
			Expect(shortName(r.SCSCF)).To(Equal("scscf3"))
			Expect(tryCall(sctx, phones, "user0001", other).Result).To(Equal("ok"))
			Expect(tryCall(sctx, phones, other, "user0001").Result).To(Equal("ok"))
		})
})

// countEvents counts the events of a kind with the given fields over nodes.
func countEvents(l *lab, nodes []string, kind string, fields map[string]any) int {
	n := 0
	for _, node := range nodes {
		for _, e := range l.events(node) {
			if e["kind"] != kind {
				continue
			}
			match := true
			for k, v := range fields {
				if e[k] != v {
					match = false
				}
			}
			if match {
				n++
			}
		}
	}
	return n
}

var _ = Describe("Pool with state replication (pool-sync)", Label("e2e"), func() {
	It("copies every registration to the other members, which serve the users of a dead P-CSCF and S-CSCF without a re-registration",
		SpecTimeout(150*time.Second), func(sctx SpecContext) {
			l := startLab(withScheme("pcscf", "pool-sync"), withScheme("scscf", "pool-sync"))
			phones := startPhones(l.dns(), 1, 6, 50*time.Millisecond, 0)
			registerAll(sctx, phones, 1, 6)
			pcscfs, scscfs := []string{"pcscf1", "pcscf2", "pcscf3"}, []string{"scscf1", "scscf2", "scscf3"}
			Eventually(func() int { return countEvents(l, pcscfs, "repl_send", map[string]any{"op": "put"}) }).
				Should(Equal(12), "each P-CSCF registration goes to the two other members")
			Eventually(func() int { return countEvents(l, scscfs, "repl_send", map[string]any{"op": "put"}) }).
				Should(Equal(12), "each S-CSCF registration goes to the two other members")

			r := phones.Phone("user0001").Registration()
			deadP, deadS := shortName(r.PCSCF), shortName(r.SCSCF)
			other := killUnder(l, phones, deadP, deadS)

			By("both directions succeed at once through members holding copies")
			Expect(tryCall(sctx, phones, "user0001", other).Result).To(Equal("ok"))
			Expect(tryCall(sctx, phones, other, "user0001").Result).To(Equal("ok"))
			Expect(phones.Phone("user0001").Registration().Count).To(Equal(r.Count), "no re-registration")
			Expect(hasEvent(l.events("hss"), "cx_answer", map[string]any{"cmd": "LIR", "uat": float64(2)})).To(BeFalse())
			Expect(hasEvent(l.events("hss"), "cx_answer", map[string]any{"cmd": "SAR", "sat": float64(3)})).To(BeFalse())

			By("re-registration: the I-CSCF re-selects (UAR UAT 2) instead of a random DNS walk, so challenge and answer meet")
			rctx, cancel := context.WithTimeout(sctx, 20*time.Second)
			defer cancel()
			Expect(phones.Phone("user0001").Register(rctx)).To(Succeed())
			Expect(registrationOf(l.hssHTTP(), "user0001@ims.test")["server_name"]).NotTo(Equal("sip:" + deadS + ".ims.test"))
			Expect(tryCall(sctx, phones, other, "user0001").Result).To(Equal("ok"))

			By("a restarted member says hello and gets a full copy from each peer")
			before := countEvents(l, []string{deadS}, "repl_recv", map[string]any{"op": "put"})
			l.start(deadS)
			Eventually(func() int {
				return countEvents(l, []string{deadS}, "repl_recv", map[string]any{"op": "put"}) - before
			}).WithTimeout(10*time.Second).Should(BeNumerically(">=", 2*6), "6 users from each of the 2 peers")
		})
})

var _ = Describe("1+1 active-standby", Label("e2e"), func() {
	It("runs a standby per member that holds its member's state and takes over its DNS entry",
		SpecTimeout(150*time.Second), func(sctx SpecContext) {
			l := startLab(withScheme("pcscf", "active-standby"), withScheme("scscf", "active-standby"))
			Expect(l.procs).To(HaveKey("pcscf1b"))
			Expect(l.procs).To(HaveKey("scscf3b"))
			phones := startPhones(l.dns(), 1, 6, 50*time.Millisecond, 0)
			registerAll(sctx, phones, 1, 6)
			for i := 1; i <= 6; i++ {
				r := phones.Phone(fmt.Sprintf("user%04d", i)).Registration()
				Expect(r.PCSCF).NotTo(ContainSubstring("b."), "standbys get no registration of their own")
				Expect(r.SCSCF).NotTo(ContainSubstring("b."))
			}
			r := phones.Phone("user0001").Registration()
			deadP, deadS := shortName(r.PCSCF), shortName(r.SCSCF)
			Eventually(func() int {
				return countEvents(l, []string{deadP}, "repl_send", map[string]any{"op": "put", "peer": l.topo.ReplicationPeers(deadP)[0]})
			}).
				Should(BeNumerically(">=", 1), "the member copies its registrations to its standby only")
			other := killUnder(l, phones, deadP, deadS)

			By("the standbys " + deadP + "b and " + deadS + "b serve both directions without a re-registration")
			mo := tryCall(sctx, phones, "user0001", other)
			Expect(mo.Result).To(Equal("ok"))
			Expect(mo.PCSCF).To(Equal(deadP + "b.ims.test"))
			mt := tryCall(sctx, phones, other, "user0001")
			Expect(mt.Result).To(Equal("ok"))
			Expect(phones.Phone("user0001").Registration().Count).To(Equal(r.Count), "no re-registration")
			Expect(countEvents(l, []string{deadS + "b"}, "sip_tx", map[string]any{"method": "INVITE"})).To(BeNumerically(">=", 2))
		})
})

// withMutual sets both pools to the mutual scheme with 4 members: pairs 1+2 and 3+4.
func withMutual(doc string) string {
	for _, pool := range []string{"pcscf", "scscf"} {
		doc = strings.Replace(doc, "  "+pool+": {size: 3,", "  "+pool+": {scheme: mutual, size: 4,", 1)
	}
	return doc
}

// partnerOf returns the mutual partner of pcscfK / scscfK.
func partnerOf(name string) string {
	k := int(name[len(name)-1] - '0')
	return fmt.Sprintf("%s%d", name[:len(name)-1], topology.MutualPartner(k))
}

var _ = Describe("1+1 mutual backup (mutual)", Label("e2e"), func() {
	It("replicates to the partner only, whose copy serves a dead member's users without HSS restoration; the other pair is untouched",
		SpecTimeout(150*time.Second), func(sctx SpecContext) {
			l := startLab(withMutual)
			Expect(l.procs).To(HaveLen(4+4+4), "dns, hss, bac, icscf and four members per pool, no standby processes")
			const users = 12
			phones := startPhones(l.dns(), 1, users, 50*time.Millisecond, 0)
			registerAll(sctx, phones, 1, users)
			pcscfs, scscfs := []string{"pcscf1", "pcscf2", "pcscf3", "pcscf4"}, []string{"scscf1", "scscf2", "scscf3", "scscf4"}

			By("every registration is copied once, to the partner of the member that holds it")
			for _, pool := range [][]string{pcscfs, scscfs} {
				Eventually(func() int { return countEvents(l, pool, "repl_send", map[string]any{"op": "put"}) }).
					Should(Equal(users), "one message per registration per pool (%s…)", pool[0])
				for _, m := range pool {
					peer := l.topo.ReplicationPeers(partnerOf(m))
					Expect(peer).To(HaveLen(1))
					own := l.topo.ReplicationPeers(m)
					Expect(own).To(HaveLen(1))
					for _, e := range l.events(m) {
						if e["kind"] == "repl_send" {
							Expect(e["peer"]).To(Equal(own[0]), "%s sends to its partner %s only", m, partnerOf(m))
						}
					}
				}
			}

			r := phones.Phone("user0001").Registration()
			deadP, deadS := shortName(r.PCSCF), shortName(r.SCSCF)
			partP, partS := partnerOf(deadP), partnerOf(deadS)
			affected, unaffected := []string{}, []string{}
			for i := 1; i <= users; i++ {
				u := fmt.Sprintf("user%04d", i)
				ri := phones.Phone(u).Registration()
				p, s := shortName(ri.PCSCF), shortName(ri.SCSCF)
				switch {
				case p == deadP || s == deadS:
					affected = append(affected, u)
				case p != partP && s != partS:
					unaffected = append(unaffected, u)
				}
			}
			if len(unaffected) < 2 {
				Skip("fewer than two phones on the other pairs of both pools (random registration spread)")
			}
			other := unaffected[0]
			lirBefore := countEvents(l, []string{"hss"}, "cx_answer", map[string]any{"cmd": "LIR"})
			l.kill(deadP)
			l.kill(deadS)

			By("the partners " + partP + " and " + partS + " serve every affected user in both directions at once")
			for _, u := range affected {
				count := phones.Phone(u).Registration().Count
				mo := tryCall(sctx, phones, u, other)
				Expect(mo.Result).To(Equal("ok"), "MO of %s", u)
				mt := tryCall(sctx, phones, other, u)
				Expect(mt.Result).To(Equal("ok"), "MT of %s", u)
				if shortName(phones.Phone(u).Registration().PCSCF) == deadP {
					Expect(shortName(mo.PCSCF)).To(Equal(partP), "%s's P-CSCF per-host record leads to the partner", u)
				}
				Expect(phones.Phone(u).Registration().Count).To(Equal(count), "no re-registration of %s", u)
			}
			Expect(countEvents(l, []string{partS}, "sip_tx", map[string]any{"method": "INVITE"})).To(BeNumerically(">", 0))

			By("no restoration through the HSS: the MT calls' LIRs are the ordinary ones (no UAT 2), and no SAR UNREGISTERED_USER")
			Expect(countEvents(l, []string{"hss"}, "cx_answer", map[string]any{"cmd": "LIR"})).To(BeNumerically(">", lirBefore))
			Expect(countEvents(l, []string{"hss"}, "cx_answer", map[string]any{"cmd": "LIR", "uat": float64(2)})).To(BeZero())
			Expect(countEvents(l, []string{"hss"}, "cx_answer", map[string]any{"cmd": "SAR", "sat": float64(3)})).To(BeZero())

			By("the other pairs' users keep their own members, and their state was never copied to the partners")
			res := tryCall(sctx, phones, unaffected[0], unaffected[1])
			Expect(res.Result).To(Equal("ok"))
			Expect(shortName(res.PCSCF)).To(Equal(shortName(phones.Phone(unaffected[0]).Registration().PCSCF)))
			partners := []string{l.topo.ReplicationPeers(deadP)[0], l.topo.ReplicationPeers(deadS)[0]}
			for _, u := range unaffected {
				copies := 0
				for _, m := range append(slices.Clone(pcscfs), scscfs...) {
					for _, e := range l.events(m) {
						if key, _ := e["key"].(string); e["kind"] == "repl_send" && strings.Contains(key, u+"@") {
							copies++
							Expect(partners).NotTo(ContainElement(e["peer"]), "%s's state went to %s or %s", u, partP, partS)
						}
					}
				}
				Expect(copies).To(Equal(2), "%s: one copy per pool, to the partners of its own members", u)
			}
		})
})
