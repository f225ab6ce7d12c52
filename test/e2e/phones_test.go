package e2e_test

import (
	"context"
	"log/slog"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/ue"
)

// startPhones runs simulated phones (users from..from+count-1) driven by the test, found through the lab DNS.
func startPhones(dnsAddr string, from, count int, ring time.Duration, expires int) *ue.UE {
	cfg := ue.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DNSServer = dnsAddr
	cfg.Users.From, cfg.Users.Count = from, count
	cfg.Manual = true
	cfg.RingTime = ring
	cfg.CallTimeout = 8 * time.Second
	if expires > 0 {
		cfg.Expires = expires
	}
	u, err := ue.New(cfg, ue.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, nil))))
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.Run(ctx) }()
	DeferCleanup(func() {
		cancel()
		Eventually(done, 15*time.Second).Should(Receive())
	})
	Eventually(u.Ready(), 10*time.Second).Should(BeClosed())
	return u
}

var _ = Describe("Calls between simulated phones", Label("e2e"), Ordered, func() {
	var (
		phones, slow *ue.UE
		hssHTTP      string
	)
	BeforeAll(func() {
		l := startLab()
		hssHTTP = l.hssHTTP()
		phones = startPhones(l.dns(), 1, 4, 100*time.Millisecond, 0)
		slow = startPhones(l.dns(), 20, 1, 30*time.Second, 0) // user0020 never answers in time
	})

	ctxFor := func(sctx context.Context) context.Context {
		ctx, cancel := context.WithTimeout(sctx, 20*time.Second)
		DeferCleanup(cancel)
		return ctx
	}

	It("registers phones with SIP Digest through the BAC", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		for _, name := range []string{"user0001", "user0002"} {
			p := phones.Phone(name)
			Expect(p).NotTo(BeNil())
			Expect(p.Register(ctxFor(sctx))).To(Succeed())
			Expect(p.Registered()).To(BeTrue())
			Expect(registrationOf(hssHTTP, name+"@ims.test")).To(HaveKeyWithValue("state", "registered"))
		}
		Expect(slow.Phone("user0020").Register(ctxFor(sctx))).To(Succeed())
	})

	It("sets up a call: 180, 200, ACK, and hangs up with BYE", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		res, err := phones.Phone("user0001").Call(ctxFor(sctx), "sip:user0002@ims.test", 500*time.Millisecond)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Result).To(Equal("ok"))
		Expect(res.Status).To(Equal(200))
		Expect(res.Setup180).To(BeNumerically(">", 0), "the 180 reached the caller")
		Expect(res.Setup200).To(BeNumerically(">=", res.Setup180))
		Expect(res.ByeStatus).To(Equal(200), "the BYE crossed the route set back to the callee")
		Expect(res.PCSCF).To(MatchRegexp(`pcscf\d\.ims\.test`))
		Expect(res.SCSCF).To(MatchRegexp(`scscf\d\.ims\.test`))
	})

	It("cancels a call that is not answered: the callee's INVITE ends with 487", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		res, err := phones.Phone("user0001").Call(ctxFor(sctx), "sip:user0020@ims.test", time.Second)
		Expect(err).To(HaveOccurred())
		Expect(res.Setup180).To(BeNumerically(">", 0), "it rang")
		Expect(res.Status).To(Equal(487))
	})

	It("answers 404 for a call to a user that does not exist, and 480 for one not registered", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		res, _ := phones.Phone("user0001").Call(ctxFor(sctx), "sip:nobody@ims.test", time.Second)
		Expect(res.Status).To(Equal(404))
		res, _ = phones.Phone("user0001").Call(ctxFor(sctx), "sip:user0004@ims.test", time.Second)
		Expect(res.Status).To(Equal(480))
	})

	It("re-registers on the same S-CSCF and de-registers", SpecTimeout(60*time.Second), func(sctx SpecContext) {
		p := phones.Phone("user0003")
		Expect(p.Register(ctxFor(sctx))).To(Succeed())
		before := registrationOf(hssHTTP, "user0003@ims.test")
		Expect(p.Register(ctxFor(sctx))).To(Succeed())
		after := registrationOf(hssHTTP, "user0003@ims.test")
		Expect(after["server_name"]).To(Equal(before["server_name"]))
		Expect(after["state"]).To(Equal("registered"))
		Expect(p.Deregister(ctxFor(sctx))).To(Succeed())
		Expect(registrationOf(hssHTTP, "user0003@ims.test")).To(HaveKeyWithValue("state", "not_registered"))
		res, _ := phones.Phone("user0001").Call(ctxFor(sctx), "sip:user0003@ims.test", time.Second)
		Expect(res.Status).To(Equal(480), "a de-registered user cannot be reached")
	})
})
