package ue_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	"github.com/imslab/quasipool/internal/harness/ue"
)

// running is a ue started by a spec; stop ends it and waits for Run to return (also done by DeferCleanup).
type running struct {
	*ue.UE
	records string
	stop    func()
}

func startUE(cfg ue.Config) running {
	GinkgoHelper()
	cfg.Listen = "127.0.0.1:0"
	cfg.RecordsFile = filepath.Join(GinkgoT().TempDir(), "records.jsonl")
	u, err := ue.New(cfg, ue.WithLogger(testLogger().With("node", "ue")))
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- u.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		Eventually(errc).WithTimeout(20 * time.Second).Should(Receive(BeNil()))
	}
	DeferCleanup(stop)
	Eventually(u.Ready()).WithTimeout(10 * time.Second).Should(BeClosed())
	return running{UE: u, records: cfg.RecordsFile, stop: stop}
}

func readRecords(path string) []ue.Record {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []ue.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r ue.Record
		Expect(json.Unmarshal(sc.Bytes(), &r)).To(Succeed(), sc.Text())
		out = append(out, r)
	}
	return out
}

func recordsWhere(path string, keep func(ue.Record) bool) func() []ue.Record {
	return func() []ue.Record {
		var out []ue.Record
		for _, r := range readRecords(path) {
			if keep(r) {
				out = append(out, r)
			}
		}
		return out
	}
}

var _ = Describe("Simulated phones", Label("integration"), func() {
	var fake *fakeBAC

	manual := func() ue.Config {
		cfg := ue.DefaultConfig()
		cfg.Manual = true
		cfg.Proxy = fake.addr
		cfg.Users.Count = 2
		return cfg
	}

	Context("reachability probes", func() {
		BeforeEach(func() { fake = startFakeBAC(600) })

		It("probes the users of a faulted node from probers elsewhere, marks the probes and stops once confirmed", func(ctx SpecContext) {
			cfg := manual()
			cfg.Users.Count = 4
			cfg.RingTime = 10 * time.Millisecond
			cfg.Reachability = ue.Reachability{Interval: 50 * time.Millisecond, Confirm: 2, Probers: 2}
			fake.mu.Lock()
			fake.pcscfOf = map[string]string{"user0004": "pcscf2", "user0005": "pcscf2", "user0006": "pcscf2"}
			fake.mu.Unlock()
			u := startUE(cfg)
			Expect(u.Probers()).To(HaveLen(2))
			for _, p := range append(u.Phones(), u.Probers()...) {
				Expect(p.Register(ctx)).To(Succeed())
			}
			Expect(u.StartReachability([]string{"pcscf1"})).To(Equal(3), "user0001-3 registered through pcscf1")
			Expect(u.StartReachability([]string{"pcscf1"})).To(BeZero(), "a user is probed once")

			probes := recordsWhere(u.records, func(r ue.Record) bool { return r.Probe == ue.ProbeMT || r.Probe == ue.ProbeMO })
			okOf := func(kind, user string) func() int {
				return func() int {
					n := 0
					for _, r := range probes() {
						if r.Probe == kind && r.Direction == "mo" && r.ProbeUser == "sip:"+user+"@ims.test" && r.Result == "ok" {
							n++
						}
					}
					return n
				}
			}
			for _, user := range []string{"user0001", "user0002", "user0003"} {
				Eventually(okOf(ue.ProbeMT, user)).WithTimeout(5 * time.Second).Should(BeNumerically(">=", 2))
				Eventually(okOf(ue.ProbeMO, user)).WithTimeout(5 * time.Second).Should(BeNumerically(">=", 2))
			}
			// Confirmed twice in each direction: the probes stop. Without failures each direction of each user
			// places its 2 confirming probes plus at most max_in_flight (2) started before they were answered.
			callerSide := func() int {
				n := 0
				for _, r := range probes() {
					if r.Direction == "mo" {
						n++
					}
				}
				return n
			}
			Consistently(callerSide).WithTimeout(300 * time.Millisecond).Should(BeNumerically("<=", 3*2*(2+2)))
			n := len(probes())
			Consistently(func() int { return len(probes()) }).WithTimeout(300 * time.Millisecond).Should(Equal(n))
			for _, r := range probes() {
				Expect(r.ProbeUser).NotTo(Equal("sip:user0004@ims.test"), "user0004 is not on pcscf1")
				if r.Direction == "mo" && r.Probe == ue.ProbeMT {
					Expect(r.IMPU).To(BeElementOf("sip:user0005@ims.test", "sip:user0006@ims.test"), "a prober calls")
				}
				if r.Direction == "mt" && r.Probe == ue.ProbeMT {
					Expect(r.IMPU).To(BeElementOf("sip:user0001@ims.test", "sip:user0002@ims.test", "sip:user0003@ims.test"))
				}
			}
			s := u.Summary()
			Expect(s.CallsOK+s.CallsFailed+s.MTOK+s.MTFailed).To(BeZero(), "probes are not the users' calls")
			Expect(s.ProbesOK).To(BeNumerically(">=", 12))
		}, SpecTimeout(20*time.Second))

		// registeredWithProbers starts a UE of users phones and 2 probers (probes every 50 ms, confirm in a row)
		// and registers them all.
		registeredWithProbers := func(ctx SpecContext, users, confirm int) running {
			cfg := manual()
			cfg.Users.Count = users
			cfg.RingTime = 10 * time.Millisecond
			cfg.Reachability = ue.Reachability{Interval: 50 * time.Millisecond, Confirm: confirm, Probers: 2}
			u := startUE(cfg)
			for _, p := range append(u.Phones(), u.Probers()...) {
				Expect(p.Register(ctx)).To(Succeed())
			}
			return u
		}
		// mtProbesOK lists the answered MT probes, on the prober's side.
		mtProbesOK := func(u running) func() []ue.Record {
			return recordsWhere(u.records, func(r ue.Record) bool {
				return r.Probe == ue.ProbeMT && r.Direction == "mo" && r.Result == "ok"
			})
		}

		It("registers the probers again when every one of them is behind the faulted node, and then probes", func(ctx SpecContext) {
			u := registeredWithProbers(ctx, 3, 2) // everyone through pcscf1, the probers (user0004-5) too
			fake.mu.Lock()
			fake.pcscfOf = map[string]string{"user0004": "pcscf2", "user0005": "pcscf2"} // where they land next
			fake.mu.Unlock()
			Expect(u.StartReachability([]string{"pcscf1"})).To(Equal(3))

			rescued := recordsWhere(u.records, func(r ue.Record) bool {
				return r.Type == "register" && r.Kind == "prober_rescue" && r.Result == "ok"
			})
			Eventually(rescued).WithTimeout(5*time.Second).ShouldNot(BeEmpty(), "a prober registered again")
			for _, r := range rescued() {
				Expect(r.Probe).To(Equal(ue.ProbeProber), "the prober's registration, not a user's")
				Expect(r.PCSCF).To(Equal("pcscf2.ims.test"))
			}
			mtOK := mtProbesOK(u)
			Eventually(mtOK).WithTimeout(5*time.Second).Should(HaveLen(3*2), "each affected user reached twice")
			for _, user := range []string{"user0001", "user0002", "user0003"} {
				regs := fake.registersOf(user)
				Expect(regs).To(HaveLen(2), "the probed users did not register again")
			}
		}, SpecTimeout(20*time.Second))

		It("probes a random sample of the affected users with reachability.sample, the same one for the same seed", func(ctx SpecContext) {
			// sampled runs a UE of 6 phones, all behind pcscf1, and its 2 probers behind pcscf2, starts the probes
			// of pcscf1 with a sample of 3 and returns the users the MT probes reached.
			sampled := func(seed int64) []string {
				cfg := manual()
				cfg.Users.Count = 6
				cfg.Seed = seed
				cfg.RingTime = 10 * time.Millisecond
				cfg.Reachability = ue.Reachability{Interval: 50 * time.Millisecond, Confirm: 1, Probers: 2, Sample: 3}
				fake.mu.Lock()
				fake.pcscfOf = map[string]string{"user0007": "pcscf2", "user0008": "pcscf2"}
				fake.mu.Unlock()
				u := startUE(cfg)
				defer u.stop()
				for _, p := range append(u.Phones(), u.Probers()...) {
					Expect(p.Register(ctx)).To(Succeed())
				}
				Expect(u.StartReachability([]string{"pcscf1"})).To(Equal(3), "3 of the 6 affected users")
				mtOK := mtProbesOK(u)
				// The users the MT probes reached, each once: a probe sent before the previous one's answer
				// arrived (a loaded machine) may reach a user twice.
				probed := func() []string {
					var users []string
					for _, r := range mtOK() {
						users = append(users, r.ProbeUser)
					}
					slices.Sort(users)
					return slices.Compact(users)
				}
				Eventually(probed).WithTimeout(5*time.Second).Should(HaveLen(3), "three different users")
				Consistently(probed).WithTimeout(200*time.Millisecond).Should(HaveLen(3), "the others are not probed")
				return probed()
			}
			first := sampled(11)
			Expect(sampled(11)).To(Equal(first), "the sample comes from the run's seed")
			bad := ue.Reachability{Interval: time.Second, Confirm: 1, Probers: 1, MaxInFlight: 1, Sample: -1}
			Expect(bad.Validate("r")).To(MatchError("r.sample: must not be negative (0 = every affected user), is -1"))
		}, SpecTimeout(30*time.Second))

		It("leaves the probers alone when one of them is outside the faulted node", func(ctx SpecContext) {
			fake.mu.Lock()
			fake.pcscfOf = map[string]string{"user0004": "pcscf2"}
			fake.mu.Unlock()
			u := registeredWithProbers(ctx, 2, 1)
			Expect(u.StartReachability([]string{"pcscf1"})).To(Equal(2))
			mtOK := mtProbesOK(u)
			Eventually(mtOK).WithTimeout(5 * time.Second).Should(HaveLen(2))
			for _, r := range mtOK() {
				Expect(r.IMPU).To(Equal("sip:user0004@ims.test"), "only the prober outside pcscf1 calls")
			}
			Expect(fake.registersOf("user0003")).To(HaveLen(2), "no prober registered again")
			Expect(fake.registersOf("user0004")).To(HaveLen(2))
		}, SpecTimeout(20*time.Second))
	})

	Context("registration", func() {
		BeforeEach(func() { fake = startFakeBAC(600) })

		It("registers with SIP Digest and keeps Service-Route and P-Associated-URI", func(ctx SpecContext) {
			u := startUE(manual())
			p := u.Phone("user0001")
			Expect(p.Register(ctx)).To(Succeed())

			reg := p.Registration()
			Expect(reg.Registered).To(BeTrue())
			Expect(reg.Expires).To(Equal(600 * time.Second))
			Expect(reg.ServiceRoute).To(Equal([]string{"<sip:orig@scscf1.ims.test;lr>"}))
			Expect(reg.AssociatedURIs).To(Equal([]string{"<sip:user0001@ims.test>", "<tel:+15550001>"}))
			Expect(reg.PCSCF).To(Equal("pcscf1.ims.test"))
			Expect(reg.SCSCF).To(Equal("scscf1.ims.test"))

			seen := fake.registersOf("user0001")
			Expect(seen).To(HaveLen(2))
			Expect(seen[0].Status).To(Equal(401))
			Expect(seen[1].Status).To(Equal(200))
			Expect(seen[1].CallID).To(Equal(seen[0].CallID))
			Expect(seen[1].CSeq).To(Equal(seen[0].CSeq + 1))

			recs := readRecords(u.records)
			Expect(recs).To(HaveLen(1))
			Expect(recs[0]).To(MatchFields(IgnoreExtras, Fields{
				"Type": Equal("register"), "IMPU": Equal("sip:user0001@ims.test"), "CallID": Equal(seen[0].CallID),
				"Result": Equal("ok"), "Status": Equal(200), "Kind": Equal("initial"), "Expires": Equal(600),
				"PCSCF": Equal("pcscf1.ims.test"), "SCSCF": Equal("scscf1.ims.test"),
			}))
			Expect(recs[0].TNs).To(BeNumerically(">", 0))
			Expect(u.Phone("user0002").Registered()).To(BeFalse())
		}, SpecTimeout(20*time.Second))

		It("records a 403 when the password is wrong", func(ctx SpecContext) {
			cfg := manual()
			cfg.Users.PasswordPrefix = "wrong"
			u := startUE(cfg)
			p := u.Phone("sip:user0002@ims.test")

			err := p.Register(ctx)
			var se *ue.StatusError
			Expect(errors.As(err, &se)).To(BeTrue(), "%v", err)
			Expect(se.Code).To(Equal(403))
			Expect(p.Registered()).To(BeFalse())

			Expect(readRecords(u.records)).To(ConsistOf(MatchFields(IgnoreExtras, Fields{
				"Type": Equal("register"), "IMPU": Equal("sip:user0002@ims.test"), "Result": Equal("403"),
				"Status": Equal(403), "Kind": Equal("initial"),
			})))
			Expect(u.Summary().RegisterFailed).To(BeEquivalentTo(1))
		}, SpecTimeout(20*time.Second))
	})

	Context("with a short registration period", func() {
		BeforeEach(func() { fake = startFakeBAC(4) })

		It("re-registers before the registration expires, on the same Call-ID", func(ctx SpecContext) {
			u := startUE(manual())
			p := u.Phone("user0001")
			Expect(p.Register(ctx)).To(Succeed())
			Expect(p.Registration().Expires).To(Equal(4 * time.Second))
			first := fake.registersOf("user0001")[1]

			ok := func() []seenRegister {
				var out []seenRegister
				for _, r := range fake.registersOf("user0001") {
					if r.Status == 200 {
						out = append(out, r)
					}
				}
				return out
			}
			Eventually(ok).WithTimeout(4 * time.Second).WithPolling(50 * time.Millisecond).Should(HaveLen(2))
			refresh := ok()[1]
			Expect(refresh.At.Sub(first.At)).To(BeNumerically("<", 4*time.Second))
			Expect(refresh.At.Sub(first.At)).To(BeNumerically(">", 1500*time.Millisecond))
			Expect(refresh.CallID).To(Equal(first.CallID))
			Expect(refresh.CSeq).To(BeNumerically(">", first.CSeq))
			// The fake BAC records its 200 when it sends it; the phone counts the refresh once it has read it.
			Eventually(func() int { return p.Registration().Count }).Should(Equal(2))
			Eventually(recordsWhere(u.records, func(r ue.Record) bool { return r.Kind == "refresh" })).
				Should(ContainElement(MatchFields(IgnoreExtras, Fields{"Result": Equal("ok"), "CallID": Equal(first.CallID)})))
		}, SpecTimeout(20*time.Second))
	})

	Context("calls", func() {
		BeforeEach(func() { fake = startFakeBAC(600) })

		It("connects two phones: 180, 200, ACK and BYE along the route set, with setup times recorded", func(ctx SpecContext) {
			u := startUE(manual())
			a, b := u.Phone("user0001"), u.Phone("user0002")
			Expect(a.Register(ctx)).To(Succeed())
			Expect(b.Register(ctx)).To(Succeed())

			res, err := a.Call(ctx, "user0002", 300*time.Millisecond)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Result).To(Equal("ok"))
			Expect(res.Status).To(Equal(200))
			Expect(res.To).To(Equal("sip:user0002@ims.test"))
			Expect(res.Setup180).To(BeNumerically(">", 0))
			Expect(res.Setup200).To(BeNumerically(">=", 100*time.Millisecond)) // the callee rings 100ms
			Expect(res.Setup180).To(BeNumerically("<", res.Setup200))
			Expect(res.Duration).To(BeNumerically(">=", 300*time.Millisecond))
			Expect(res.Ended).To(Equal("local"))
			Expect(res.ByeStatus).To(Equal(200))
			Expect(res.PCSCF).To(Equal("pcscf1.ims.test"))
			Expect(res.SCSCF).To(Equal("scscf1.ims.test"))

			// ACK and BYE went to the outbound proxy with the caller's route set: Record-Route reversed.
			route := []string{"pcscf1.ims.test", "scscf1.ims.test", "scscf2.ims.test", "pcscf2.ims.test"}
			Eventually(func() []seenRequest { return fake.relayedFor(res.CallID) }).Should(ConsistOf(
				seenRequest{Method: "ACK", CallID: res.CallID, Routes: route},
				seenRequest{Method: "BYE", CallID: res.CallID, Routes: route},
			))

			mo := recordsWhere(u.records, func(r ue.Record) bool { return r.Direction == "mo" })()
			Expect(mo).To(HaveLen(1))
			Expect(mo[0]).To(MatchFields(IgnoreExtras, Fields{
				"Type": Equal("call"), "IMPU": Equal("sip:user0001@ims.test"), "To": Equal("sip:user0002@ims.test"),
				"CallID": Equal(res.CallID), "Result": Equal("ok"), "Status": Equal(200), "ByeStatus": Equal(200),
				"Setup180": PointTo(BeNumerically(">", 0)), "Setup200": PointTo(BeNumerically(">=", 100)),
				"DurationMs": BeNumerically(">=", 300), "PCSCF": Equal("pcscf1.ims.test"),
			}))
			Eventually(recordsWhere(u.records, func(r ue.Record) bool { return r.Direction == "mt" })).
				Should(ConsistOf(MatchFields(IgnoreExtras, Fields{
					"Type": Equal("call"), "IMPU": Equal("sip:user0002@ims.test"), "CallID": Equal(res.CallID),
					"From": Equal("sip:user0001@ims.test"), "Result": Equal("ok"), "Status": Equal(200),
					"Ended": Equal("remote"), "Setup200": PointTo(BeNumerically(">=", 100)),
					"PCSCF": Equal("pcscf2.ims.test"), "SCSCF": Equal("scscf2.ims.test"),
				})))
			Expect(u.Summary()).To(MatchFields(IgnoreExtras, Fields{
				"CallsOK": BeEquivalentTo(1), "MTOK": BeEquivalentTo(1), "CallsFailed": BeZero(),
			}))
		}, SpecTimeout(20*time.Second))

		It("gives up a BYE the network does not answer StopGrace after the stop, instead of after the BYE's 32 s", func(ctx SpecContext) {
			DeferCleanup(ue.SetStopGrace(time.Second))
			u := startUE(manual())
			a, b := u.Phone("user0001"), u.Phone("user0002")
			Expect(a.Register(ctx)).To(Succeed())
			Expect(b.Register(ctx)).To(Succeed())
			fake.silence(sip.BYE)
			cctx, hangUp := context.WithCancel(context.Background())
			called := make(chan ue.CallResult, 1)
			go func() {
				defer GinkgoRecover()
				res, _ := a.Call(cctx, "user0002", time.Minute) // held until hangUp
				called <- res
			}()
			Eventually(fake.methods).Should(ContainElement("ACK"), "the call was answered and acknowledged")
			hangUp() // the BYE goes out; nobody answers it
			Eventually(fake.methods).Should(ContainElement("BYE"))
			start := time.Now()
			u.stop()
			var res ue.CallResult
			Eventually(called).WithTimeout(5*time.Second).Should(Receive(&res), "the BYE was given up after 1 s of grace")
			Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
			Expect(res.Result).To(Equal("ok"), "the call itself was answered")
			Expect(res.ByeStatus).To(BeZero(), "the BYE got no answer")
		}, SpecTimeout(30*time.Second))

		It("CANCELs a call that is not answered within the call timeout, and the callee answers 487", func(ctx SpecContext) {
			cfg := manual()
			cfg.RingTime = 5 * time.Second
			cfg.CallTimeout = 500 * time.Millisecond
			u := startUE(cfg)
			a, b := u.Phone("user0001"), u.Phone("user0002")
			Expect(a.Register(ctx)).To(Succeed())
			Expect(b.Register(ctx)).To(Succeed())

			start := time.Now()
			res, err := a.Call(ctx, "sip:user0002@ims.test", time.Second)
			Expect(err).To(MatchError(ue.ErrTimeout))
			Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second))
			Expect(res.Result).To(Equal("timeout"))
			Expect(res.Status).To(Equal(487))
			Expect(res.Setup180).To(BeNumerically(">", 0))
			Expect(res.Setup200).To(BeZero())

			Expect(fake.relayedFor(res.CallID)).To(ContainElement(HaveField("Method", "CANCEL")))
			Expect(recordsWhere(u.records, func(r ue.Record) bool { return r.Direction == "mo" })()).To(ConsistOf(
				MatchFields(IgnoreExtras, Fields{"Result": Equal("timeout"), "Status": Equal(487), "Setup200": BeNil()})))
			Eventually(recordsWhere(u.records, func(r ue.Record) bool { return r.Direction == "mt" })).
				Should(ConsistOf(MatchFields(IgnoreExtras, Fields{
					"IMPU": Equal("sip:user0002@ims.test"), "CallID": Equal(res.CallID), "Result": Equal("487"),
					"Status": Equal(487),
				})))
		}, SpecTimeout(20*time.Second))

		It("answers a re-INVITE inside a call with 200 and SDP, and 481 outside any dialog", func(ctx SpecContext) {
			u := startUE(manual())
			a, b := u.Phone("user0001"), u.Phone("user0002")
			Expect(a.Register(ctx)).To(Succeed())
			Expect(b.Register(ctx)).To(Succeed())
			type outcome struct {
				res ue.CallResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := a.Call(ctx, "user0002", 2*time.Second)
				done <- outcome{res, err}
			}()
			var callID string
			Eventually(func() int {
				fake.mu.Lock()
				defer fake.mu.Unlock()
				for id := range fake.acks {
					callID = id
				}
				return len(fake.acks)
			}).Should(Equal(1))

			status, body := fake.reinvite(ctx, u.Addr(), callID, "")
			Expect(status).To(Equal(200))
			Expect(body).To(ContainSubstring("m=audio"))
			status, _ = fake.reinvite(ctx, u.Addr(), callID, "no-such-dialog")
			Expect(status).To(Equal(481))

			var out outcome
			Eventually(done).WithTimeout(5 * time.Second).Should(Receive(&out))
			Expect(out.err).NotTo(HaveOccurred())
			Expect(out.res.ByeStatus).To(Equal(200))
		}, SpecTimeout(20*time.Second))

		It("answers 404 to a call for a user it does not simulate", func(ctx SpecContext) {
			u := startUE(manual())
			Expect(fake.invite(ctx, u.Addr(), "user0999")).To(Equal(404))
			Eventually(recordsWhere(u.records, func(r ue.Record) bool { return r.Direction == "mt" })).
				Should(ConsistOf(MatchFields(IgnoreExtras, Fields{
					"IMPU": Equal("sip:user0999@ims.test"), "Result": Equal("404"), "Status": Equal(404),
				})))
		}, SpecTimeout(20*time.Second))
	})

	Context("a 503 with Retry-After (an overloaded network)", func() {
		BeforeEach(func() { fake = startFakeBAC(600) })

		It("sends nothing until the Retry-After is over: the user's calls meanwhile fail at once, held back", func(ctx SpecContext) {
			u := startUE(manual())
			p := u.Phone("user0001")
			Expect(p.Register(ctx)).To(Succeed()) // it calls itself through the fake BAC below
			res, err := p.Call(ctx, "overloaded", time.Second)
			Expect(err).To(HaveOccurred())
			Expect(res.Status).To(Equal(503))

			held, err := p.Call(ctx, "user0001", time.Second)
			Expect(err).To(MatchError(ue.ErrBackingOff))
			Expect(held.Result).To(Equal(ue.ResultHeldBack))
			Expect(fake.relayedFor(held.CallID)).To(BeEmpty(), "nothing sent while backing off")
			Expect(u.Summary().CallsHeld).To(BeEquivalentTo(1))
			Expect(u.Summary().RetryAfters).To(BeEquivalentTo(1))
			Eventually(recordsWhere(u.records, func(r ue.Record) bool { return r.CallID == res.CallID })).
				Should(ConsistOf(HaveField("RetryAfterS", 2)), "the record keeps the Retry-After it was told")

			time.Sleep(2100 * time.Millisecond) // Retry-After: 2
			ok, err := p.Call(ctx, "user0001", 100*time.Millisecond)
			Expect(err).NotTo(HaveOccurred(), "sent again once the Retry-After is over")
			Expect(ok.Result).To(Equal("ok"))
		}, SpecTimeout(20*time.Second))
	})

	It("changes the random calls' rate while running (a load step), ignoring a bad rate", func() {
		cfg := ue.DefaultConfig()
		cfg.Manual, cfg.Proxy, cfg.Users.Count, cfg.CallRate = true, "127.0.0.1:5060", 2, 5
		u, err := ue.New(cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(u.CallRate()).To(Equal(5.0))
		u.SetCallRate(12)
		Expect(u.CallRate()).To(Equal(12.0))
		u.SetCallRate(-1)
		Expect(u.CallRate()).To(Equal(12.0))
		u.SetCallRate(0)
		Expect(u.CallRate()).To(BeZero(), "0 pauses the calls")
	})

	Context("a 504 with the 3GPP restoration body", func() {
		BeforeEach(func() { fake = startFakeBAC(600) })

		It("makes the phone register again at once, with a new Call-ID (on_restoration_504: reregister)", func(ctx SpecContext) {
			u := startUE(manual())
			p := u.Phone("user0001")
			Expect(p.Register(ctx)).To(Succeed())
			first := fake.registersOf("user0001")[0].CallID

			res, err := p.Call(ctx, "restoration", time.Second)
			Expect(err).To(HaveOccurred())
			Expect(res.Status).To(Equal(504))
			Eventually(func() []seenRegister { return fake.registersOf("user0001") }).WithTimeout(5*time.Second).
				Should(HaveLen(4), "401 and 200 of a second registration")
			again := fake.registersOf("user0001")[2:]
			Expect(again[0].CallID).NotTo(Equal(first), "an initial registration has a new Call-ID")
			Expect(again[1].Status).To(Equal(200))
			Eventually(recordsWhere(u.records, func(r ue.Record) bool { return r.Type == "register" && r.Kind == "restoration" })).
				Should(HaveLen(1))

			_, _ = p.Call(ctx, "plain504", time.Second)
			Consistently(func() []seenRegister { return fake.registersOf("user0001") }, "700ms").Should(HaveLen(4),
				"a 504 without the restoration body is only a failed call")
		}, SpecTimeout(20*time.Second))

		It("does not register again for a 504 to a call placed before the phone last registered", func(ctx SpecContext) {
			u := startUE(manual())
			p := u.Phone("user0001")
			Expect(p.Register(ctx)).To(Succeed())
			done := make(chan ue.CallResult, 1)
			go func() { res, _ := p.Call(ctx, "late-restoration", time.Second); done <- res }()
			time.Sleep(200 * time.Millisecond) // the INVITE is out; the phone registers again before the answer
			Expect(p.Register(ctx)).To(Succeed())
			Eventually(done, 5*time.Second).Should(Receive(HaveField("Status", 504)))
			Consistently(func() []seenRegister { return fake.registersOf("user0001") }, "700ms").Should(HaveLen(4))
		}, SpecTimeout(20*time.Second))

		It("is only a failed call with on_restoration_504: ignore", func(ctx SpecContext) {
			cfg := manual()
			cfg.OnRestoration504 = ue.RestorationIgnore
			u := startUE(cfg)
			p := u.Phone("user0001")
			Expect(p.Register(ctx)).To(Succeed())
			res, _ := p.Call(ctx, "restoration", time.Second)
			Expect(res.Status).To(Equal(504))
			Consistently(func() []seenRegister { return fake.registersOf("user0001") }, "700ms").Should(HaveLen(2))
		}, SpecTimeout(20*time.Second))

		It("rejects an unknown answer in the configuration", func() {
			cfg := ue.DefaultConfig()
			cfg.OnRestoration504 = "panic"
			Expect(cfg.Validate()).To(MatchError(ContainSubstring("on_restoration_504")))
		})
	})

	Context("automatic mode", func() {
		BeforeEach(func() { fake = startFakeBAC(600) })

		It("finds the BAC by DNS SRV, registers the range at the configured rate, places calls and de-registers on shutdown", func(ctx SpecContext) {
			port, _ := strconv.Atoi(fake.addr[len("127.0.0.1:"):])
			cfg := ue.DefaultConfig()
			cfg.DNSServer = startDNS(port)
			cfg.Users.Count = 4
			cfg.RegisterRate = 20
			cfg.CallRate = 20
			cfg.HoldTime = 100 * time.Millisecond
			cfg.RingTime = 20 * time.Millisecond
			cfg.Deregister = true
			cfg.Seed = 42
			u := startUE(cfg)
			Expect(u.Proxy()).To(Equal(fake.addr))
			Expect(u.Seed()).To(BeEquivalentTo(42))
			Expect(u.Summary()).To(MatchFields(IgnoreExtras, Fields{"InitialOK": BeEquivalentTo(4), "Registered": Equal(4)}))
			Expect(fake.bound()).To(ConsistOf("user0001", "user0002", "user0003", "user0004"))

			initial := recordsWhere(u.records, func(r ue.Record) bool { return r.Kind == "initial" })()
			Expect(initial).To(HaveLen(4))
			first, last := initial[0].TNs, initial[0].TNs
			for _, r := range initial {
				first, last = min(first, r.TNs), max(last, r.TNs)
			}
			Expect(time.Duration(last - first)).To(BeNumerically(">=", 140*time.Millisecond)) // 3 gaps of 50ms

			Eventually(recordsWhere(u.records, func(r ue.Record) bool { return r.Direction == "mo" && r.Result == "ok" })).
				WithTimeout(10 * time.Second).Should(WithTransform(func(rs []ue.Record) int { return len(rs) }, BeNumerically(">=", 5)))

			u.stop()
			Expect(fake.bound()).To(BeEmpty())
			Expect(u.Summary().Deregistered).To(BeEquivalentTo(4))
			Expect(recordsWhere(u.records, func(r ue.Record) bool { return r.Kind == "deregister" })()).
				To(HaveLen(4))
			// Every answered call, including those cut by the shutdown, was hung up on both sides; a call still
			// ringing at shutdown is cancelled and recorded as aborted.
			var answered, ended int
			for _, r := range readRecords(u.records) {
				switch {
				case r.Direction == "mo" && r.Status == 200:
					answered++
					Expect(r.ByeStatus).To(Equal(200), "%+v", r)
				case r.Direction == "mo":
					Expect(r.Result).To(Equal("aborted"), "%+v", r)
				case r.Direction == "mt" && r.Status == 200:
					ended++
					Expect(r.Result).To(Equal("ok"), "%+v", r)
				}
			}
			Expect(answered).To(BeNumerically(">=", 5))
			Expect(ended).To(Equal(answered))
		}, SpecTimeout(30*time.Second))
	})
})

var _ = Describe("Config", Label("unit"), func() {
	DescribeTable("Validate names the bad field",
		func(change func(*ue.Config), field string) {
			cfg := ue.DefaultConfig()
			change(&cfg)
			Expect(cfg.Validate()).To(MatchError(ContainSubstring("ue config: " + field + ":")))
		},
		Entry("listen", func(c *ue.Config) { c.Listen = "nowhere" }, "listen"),
		Entry("wildcard listen without advertise", func(c *ue.Config) { c.Listen = "0.0.0.0:5100" }, "advertise"),
		Entry("proxy is a host name", func(c *ue.Config) { c.Proxy = "bac.ims.test:5060" }, "proxy"),
		Entry("digits", func(c *ue.Config) { c.Users.Digits = 10 }, "users.digits"),
		Entry("range beyond user999999", func(c *ue.Config) { c.Users.From, c.Users.Count = 999999, 2 }, "users.count"),
		Entry("register rate", func(c *ue.Config) { c.RegisterRate = -1 }, "register_rate"),
		Entry("call rate", func(c *ue.Config) { c.CallRate = -1 }, "call_rate"),
		Entry("call timeout", func(c *ue.Config) { c.CallTimeout = -time.Second }, "call_timeout"),
		Entry("mix", func(c *ue.Config) { m := 1.5; c.Mix = &m }, "mix"),
		Entry("T1", func(c *ue.Config) { c.Timers.T1 = -time.Millisecond }, "timers.t1"),
		Entry("refresh phase", func(c *ue.Config) { c.RefreshPhase = "random" }, "refresh_phase"),
		Entry("session interval below 2 s", func(c *ue.Config) { c.SessionExpires = time.Second }, "session_expires"),
		Entry("session interval not whole seconds", func(c *ue.Config) { c.SessionExpires = 2500 * time.Millisecond }, "session_expires"),
	)

	It("reads YAML with durations and refuses unknown fields", func() {
		dir := GinkgoT().TempDir()
		good := filepath.Join(dir, "good.yaml")
		Expect(os.WriteFile(good, []byte("users: {from: 11, count: 90}\nring_time: 250ms\ncall_rate: 2.5\ntimers: {t1: 100ms}\n"), 0o644)).To(Succeed())
		cfg, err := ue.LoadConfig(good)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.RingTime).To(Equal(250 * time.Millisecond))
		Expect(cfg.Timers.T1).To(Equal(100 * time.Millisecond))
		Expect(cfg.Users.From).To(Equal(11))
		Expect(cfg.Users.User(11)).To(Equal("user0011"))
		Expect(cfg.Users.Password(11)).To(Equal("pass0011"))
		Expect(cfg.CallTimeout).To(Equal(10 * time.Second))
		Expect(cfg.Validate()).To(Succeed())

		bad := filepath.Join(dir, "bad.yaml")
		Expect(os.WriteFile(bad, []byte("ring_tme: 1s\n"), 0o644)).To(Succeed())
		_, err = ue.LoadConfig(bad)
		Expect(err).To(MatchError(ContainSubstring("ring_tme")))
	})
})
