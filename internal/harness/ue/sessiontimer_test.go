package ue_test

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	"github.com/imslab/quasipool/internal/harness/ue"
)

var _ = Describe("Steady state workload", Label("integration"), func() {
	var fake *fakeBAC

	phones := func(n int) ue.Config {
		cfg := ue.DefaultConfig()
		cfg.Manual = true
		cfg.Proxy = fake.addr
		cfg.Users.Count = n
		cfg.Seed = 7
		return cfg
	}
	held := func(u running, from, to string, hold time.Duration) chan ue.CallResult {
		out := make(chan ue.CallResult, 1)
		go func() {
			defer GinkgoRecover()
			res, _ := u.Phone(from).Call(context.Background(), to, hold)
			out <- res
		}()
		return out
	}
	mtRecord := func(u running, callID string) func() []ue.Record {
		return recordsWhere(u.records, func(r ue.Record) bool { return r.Direction == "mt" && r.CallID == callID })
	}

	Context("session timers (session_expires)", func() {
		BeforeEach(func() { fake = startFakeBAC(600) })

		It("refreshes an answered call with UPDATE along the route set every half interval and keeps it", func(ctx SpecContext) {
			cfg := phones(2)
			cfg.SessionExpires = 2 * time.Second
			u := startUE(cfg)
			Expect(u.Phone("user0001").Register(ctx)).To(Succeed())
			Expect(u.Phone("user0002").Register(ctx)).To(Succeed())

			var res ue.CallResult
			Eventually(held(u, "user0001", "user0002", 2500*time.Millisecond)).WithTimeout(10 * time.Second).
				Should(Receive(&res))
			Expect(res.Ended).To(Equal("local"))
			Expect(res.ByeStatus).To(Equal(200))
			route := []string{"pcscf1.ims.test", "scscf1.ims.test", "scscf2.ims.test", "pcscf2.ims.test"}
			updates := slices.DeleteFunc(fake.relayedFor(res.CallID), func(s seenRequest) bool { return s.Method != "UPDATE" })
			Expect(updates).To(HaveLen(2), "one refresh at 1 s and one at 2 s of a 2.5 s call")
			Expect(updates).To(HaveEach(seenRequest{Method: "UPDATE", CallID: res.CallID, Routes: route}))

			mo := recordsWhere(u.records, func(r ue.Record) bool { return r.CallID == res.CallID && r.Direction == "mo" })()
			Expect(mo).To(ConsistOf(MatchFields(IgnoreExtras, Fields{
				"Ended": Equal("local"), "Refreshes": Equal(2), "LastRefreshNs": BeNumerically(">", mo[0].TNs),
				"CutNs": BeZero(),
			})))
			Eventually(mtRecord(u, res.CallID)).Should(ConsistOf(MatchFields(IgnoreExtras, Fields{
				"Result": Equal("ok"), "Ended": Equal("remote"), "CutNs": BeZero(),
			})), "the callee heard the refreshes and did not end the call")
		}, SpecTimeout(30*time.Second))

		It("ends the call as cut when a refresh gets 481, says when, and still sends BYE", func(ctx SpecContext) {
			cfg := phones(2)
			cfg.SessionExpires = 2 * time.Second
			u := startUE(cfg)
			Expect(u.Phone("user0001").Register(ctx)).To(Succeed())
			Expect(u.Phone("user0002").Register(ctx)).To(Succeed())
			fake.refuseWith(sip.UPDATE, 481)

			start := time.Now()
			var res ue.CallResult
			Eventually(held(u, "user0001", "user0002", time.Minute)).WithTimeout(10 * time.Second).Should(Receive(&res))
			Expect(res.Result).To(Equal("ok"), "the call was answered")
			Expect(res.Ended).To(Equal(ue.EndedCut))
			Expect(res.ByeStatus).To(Equal(200), "the BYE still reached the callee")
			mo := recordsWhere(u.records, func(r ue.Record) bool { return r.CallID == res.CallID && r.Direction == "mo" })()
			Expect(mo).To(HaveLen(1))
			Expect(mo[0].Ended).To(Equal("cut"))
			Expect(mo[0].RefreshResult).To(Equal("481"))
			noticed := time.Unix(0, mo[0].CutNs).Sub(start)
			Expect(noticed).To(BeNumerically("~", time.Second, 700*time.Millisecond), "at the first refresh, half the interval after the answer")
			Eventually(mtRecord(u, res.CallID)).Should(ConsistOf(MatchFields(IgnoreExtras, Fields{"Ended": Equal("remote")})))
		}, SpecTimeout(30*time.Second))

		It("has the callee end the call as cut when no refresh comes within the interval", func(ctx SpecContext) {
			cfg := phones(2)
			cfg.SessionExpires = 3 * time.Second
			u := startUE(cfg)
			Expect(u.Phone("user0001").Register(ctx)).To(Succeed())
			Expect(u.Phone("user0002").Register(ctx)).To(Succeed())
			fake.silence(sip.UPDATE) // the refreshes are lost: neither answered nor relayed

			start := time.Now()
			var res ue.CallResult
			Eventually(held(u, "user0001", "user0002", time.Minute)).WithTimeout(10 * time.Second).Should(Receive(&res))
			Eventually(mtRecord(u, res.CallID)).Should(ConsistOf(MatchFields(IgnoreExtras, Fields{
				"Result": Equal("ok"), "Ended": Equal(ue.EndedCut), "RefreshResult": Equal("expired"),
				"ByeResult": Equal("ok"),
			})))
			mt := mtRecord(u, res.CallID)()[0]
			// 3 s less the grace of a third: 2 s after the answer.
			Expect(time.Unix(0, mt.CutNs).Sub(start)).To(BeNumerically("~", 2100*time.Millisecond, 600*time.Millisecond))
			Expect(res.Ended).To(Equal("remote"), "the caller got the callee's BYE")
		}, SpecTimeout(30*time.Second))

		It("refreshes nothing without session_expires (the default)", func(ctx SpecContext) {
			u := startUE(phones(2))
			Expect(u.Phone("user0001").Register(ctx)).To(Succeed())
			Expect(u.Phone("user0002").Register(ctx)).To(Succeed())
			var res ue.CallResult
			Eventually(held(u, "user0001", "user0002", 2500*time.Millisecond)).WithTimeout(10 * time.Second).
				Should(Receive(&res))
			Expect(res.Ended).To(Equal("local"))
			Expect(fake.methods()).NotTo(ContainElement("UPDATE"))
		}, SpecTimeout(20*time.Second))
	})

	Context("refresh_phase: steady", func() {
		BeforeEach(func() { fake = startFakeBAC(8) }) // refresh after 4 s

		It("refreshes each phone first at its own point of the refresh interval, drawn from the seed", func(ctx SpecContext) {
			cfg := phones(6)
			cfg.RefreshPhase = ue.RefreshSteady
			u := startUE(cfg)
			registered := map[string]time.Time{}
			for _, p := range u.Phones() {
				Expect(p.Register(ctx)).To(Succeed())
				registered[p.User()] = time.Now()
			}
			refreshes := func() int {
				n := 0
				for _, p := range u.Phones() {
					if p.Registration().Count >= 2 {
						n++
					}
				}
				return n
			}
			Eventually(refreshes).WithTimeout(6 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal(6))
			var lags []float64
			for i, p := range u.Phones() {
				regs := fake.registersOf(p.User())
				var oks []seenRegister
				for _, r := range regs {
					if r.Status == 200 {
						oks = append(oks, r)
					}
				}
				Expect(len(oks)).To(BeNumerically(">=", 2))
				want := ue.SteadyFirstRefresh(7, 1+i, 4*time.Second)
				got := oks[1].At.Sub(registered[p.User()])
				Expect(got).To(BeNumerically("~", want, 300*time.Millisecond), p.User())
				lags = append(lags, want.Seconds())
			}
			slices.Sort(lags)
			Expect(lags[5]-lags[0]).To(BeNumerically(">", 0.8), "spread over the interval, not in lockstep (4 s ±10 %%)")
		}, SpecTimeout(20*time.Second))
	})
})

var _ = Describe("SteadyFirstRefresh", Label("unit"), func() {
	It("is uniform over (0, interval], the same for the same seed and user, different across users", func() {
		const n = 4000
		every := 300 * time.Second
		var sum float64
		quarter := [4]int{}
		for i := 1; i <= n; i++ {
			d := ue.SteadyFirstRefresh(42, i, every)
			Expect(d).To(BeNumerically(">", 0))
			Expect(d).To(BeNumerically("<=", every))
			Expect(ue.SteadyFirstRefresh(42, i, every)).To(Equal(d))
			x := d.Seconds() / every.Seconds()
			sum += x
			quarter[min(3, int(x*4))]++
		}
		Expect(sum / n).To(BeNumerically("~", 0.5, 3*math.Sqrt(1.0/12/n)))
		for _, q := range quarter {
			Expect(q).To(BeNumerically("~", n/4, 4*math.Sqrt(n*0.25*0.75)))
		}
		Expect(ue.SteadyFirstRefresh(43, 1, every)).NotTo(Equal(ue.SteadyFirstRefresh(42, 1, every)))
	})
})
