package hss_test

import (
	"os"
	"path/filepath"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/hss"
	"github.com/imslab/quasipool/internal/proto/cx"
)

// A short Tw so that the specs take about a second: 300 ms ± 30 ms, closed after 2 unanswered DWRs.
const (
	testTw     = 300 * time.Millisecond
	testJitter = 30 * time.Millisecond
)

func shortWatchdog(c *hss.Config) {
	c.Watchdog = cx.WatchdogConfig{Interval: testTw, Jitter: testJitter, MaxMissed: 2}
}

func isDWR(m *rawAnswer) bool {
	return m.Header.ApplicationID == 0 && m.Header.CommandCode == diam.DeviceWatchdog &&
		m.Header.CommandFlags&diam.RequestFlag != 0
}

// dwaFor answers the HSS's DWR the way a peer's state machine does.
func dwaFor(dwr *rawAnswer) *diam.Message {
	m := diam.NewMessage(diam.DeviceWatchdog, 0, 0, dwr.Header.HopByHopID, dwr.Header.EndToEndID, cx.Dict())
	m.NewAVP(avp.ResultCode, avp.Mbit, 0, datatype.Unsigned32(2001))
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity("raw.ims.test"))
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
	return m
}

func dwrFrom(host string) *diam.Message {
	m := diam.NewRequest(diam.DeviceWatchdog, 0, cx.Dict())
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(host))
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
	return m
}

func (p *rawPeer) sendMsg(m *diam.Message) {
	b, err := m.Serialize()
	Expect(err).NotTo(HaveOccurred())
	p.send(b)
}

// avpString finds a top-level AVP's payload (vendor 0).
func avpString(m *rawAnswer, code uint32) string {
	for _, a := range m.AVP {
		if a.Code == code && a.Vendor == 0 {
			return string(a.Data)
		}
	}
	return ""
}

// watchdogClosures are the HSS's watchdog refusals of the raw peer's connections.
func (h *testHSS) watchdogClosures() []map[string]any {
	var out []map[string]any
	for _, e := range h.events("cx_refused") {
		if e["reason"] == cx.RefusedWatchdog && e["peer"] == "raw.ims.test" {
			out = append(out, e)
		}
	}
	return out
}

// RFC 6733 §5.5 / RFC 3539 §3.4.1, issue 34: peers run the same 30 s watchdog, so the HSS must probe a silent
// connection itself instead of closing it.
var _ = Describe("HSS device watchdog", Label("integration"), func() {
	It("sends a DWR after Tw of silence and keeps the connection while the peer answers", SpecTimeout(20*time.Second), func(_ SpecContext) {
		h := startHSS(shortWatchdog)
		p := dialRaw(h.node.DiameterAddr())
		last := time.Now() // the CEA
		for i := range 5 {
			m, err := p.recv()
			Expect(err).NotTo(HaveOccurred(), "DWR %d", i+1)
			gap := time.Since(last)
			Expect(isDWR(m)).To(BeTrue(), "message %d is command %d, not a DWR", i+1, m.Header.CommandCode)
			Expect(avpString(m, avp.OriginHost)).To(Equal("hss.ims.test"))
			// Never before Tw − jitter of silence (the measured gap includes this spec's own latency, so it can
			// only be longer).
			Expect(gap).To(BeNumerically(">=", testTw-testJitter-5*time.Millisecond), "DWR %d after %s", i+1, gap)
			Expect(gap).To(BeNumerically("<", 5*testTw), "DWR %d after %s", i+1, gap)
			GinkgoWriter.Printf("DWR %d after %s of silence\n", i+1, gap.Round(time.Millisecond))
			p.sendMsg(dwaFor(m))
			last = time.Now()
		}
		// Still open and serving after five rounds (1.5 s, five times Tw).
		ans := p.roundTrip(cxRequest(cx.CmdLI, cxAVP(601, datatype.UTF8String("sip:bob@ims.test"))))
		Expect(ans.Header.CommandCode).To(Equal(cx.CmdLI))
		Expect(h.watchdogClosures()).To(BeEmpty())
	})

	It("closes the connection after 2 DWRs in a row go unanswered, and records why", SpecTimeout(20*time.Second), func(_ SpecContext) {
		h := startHSS(shortWatchdog)
		p := dialRaw(h.node.DiameterAddr())
		start := time.Now()
		for i := range 2 {
			m, err := p.recv()
			Expect(err).NotTo(HaveOccurred(), "DWR %d", i+1)
			Expect(isDWR(m)).To(BeTrue(), "message %d is command %d, not a DWR", i+1, m.Header.CommandCode)
		}
		Expect(p.closedByPeer()).To(Succeed())
		// Tw of silence, then Tw after each of the 2 DWRs: never sooner than 3 × (Tw − jitter).
		Expect(time.Since(start)).To(BeNumerically(">=", 3*(testTw-testJitter)))
		Eventually(h.watchdogClosures).Should(ConsistOf(And(
			HaveKeyWithValue("remote", Not(BeEmpty())),
			HaveKeyWithValue("error", ContainSubstring("2 DWRs unanswered")))))
	})

	It("counts any message as life: a peer that keeps sending requests gets no DWR", SpecTimeout(20*time.Second), func(_ SpecContext) {
		h := startHSS(shortWatchdog)
		p := dialRaw(h.node.DiameterAddr())
		tick := time.NewTicker(testTw / 2)
		defer tick.Stop()
		until := time.Now().Add(4 * testTw)
		for time.Now().Before(until) {
			<-tick.C
			ans := p.roundTrip(cxRequest(cx.CmdLI, cxAVP(601, datatype.UTF8String("sip:bob@ims.test"))))
			Expect(ans.Header.CommandCode).To(Equal(cx.CmdLI), "a DWR came between requests every Tw/2")
		}
		// Once it falls silent, the watchdog probes it.
		m, err := p.recv()
		Expect(err).NotTo(HaveOccurred())
		Expect(isDWR(m)).To(BeTrue())
		Expect(h.watchdogClosures()).To(BeEmpty())
	})

	It("answers the peer's own DWRs with DWA 2001, and they count as life too", SpecTimeout(20*time.Second), func(_ SpecContext) {
		h := startHSS(shortWatchdog)
		p := dialRaw(h.node.DiameterAddr())
		tick := time.NewTicker(testTw / 2)
		defer tick.Stop()
		until := time.Now().Add(4 * testTw)
		for time.Now().Before(until) {
			<-tick.C
			dwr := dwrFrom("raw.ims.test")
			ans := p.roundTrip(dwr)
			Expect(ans.Header.CommandCode).To(Equal(uint32(diam.DeviceWatchdog)))
			Expect(ans.Header.CommandFlags&diam.RequestFlag).To(BeZero(), "the HSS sent its own DWR although the peer was talking")
			Expect(resultCode(ans)).To(Equal(uint32(2001)))
			Expect(avpString(ans, avp.OriginHost)).To(Equal("hss.ims.test"))
		}
		Expect(h.watchdogClosures()).To(BeEmpty())
	})

	It("runs with RFC 3539's defaults: Tw 30 s ± 2 s, closed after 2 missed", func() {
		wd := hss.DefaultConfig().Watchdog.WithDefaults()
		Expect(wd).To(Equal(cx.WatchdogConfig{Interval: 30 * time.Second, Jitter: 2 * time.Second, MaxMissed: 2}))
	})

	DescribeTable("refuses a bad watchdog configuration, naming the field", func(yaml, want string) {
		path := filepath.Join(GinkgoT().TempDir(), "hss.yaml")
		Expect(os.WriteFile(path, []byte(yaml), 0o644)).To(Succeed())
		_, err := hss.LoadConfig(path)
		Expect(err).To(MatchError(ContainSubstring(want)))
	},
		Entry("negative interval", "watchdog: {interval: -1s}\n", "watchdog.interval: must not be negative"),
		Entry("negative jitter", "watchdog: {jitter: -1s}\n", "watchdog.jitter: must not be negative"),
		Entry("negative max_missed", "watchdog: {max_missed: -1}\n", "watchdog.max_missed: must not be negative"),
		Entry("jitter not below the interval", "watchdog: {interval: 3s, jitter: 3s}\n", "watchdog.jitter: 3s must be less than the interval (3s)"),
		Entry("an unknown field", "watchdog: {intervall: 3s}\n", "intervall"),
		Entry("the removed idle_timeout", "idle_timeout: 90s\n", "idle_timeout: no longer supported: the HSS runs the Diameter device watchdog"),
	)

	It("loads a watchdog section", func() {
		path := filepath.Join(GinkgoT().TempDir(), "hss.yaml")
		Expect(os.WriteFile(path, []byte("watchdog:\n  interval: 20s\n  max_missed: 3\n"), 0o644)).To(Succeed())
		c, err := hss.LoadConfig(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Watchdog).To(Equal(cx.WatchdogConfig{Interval: 20 * time.Second, MaxMissed: 3}))
		Expect(c.Watchdog.WithDefaults().Jitter).To(BeNumerically("~", 1333*time.Millisecond, time.Millisecond))
	})

	It("refuses to start with idle_timeout set in Go too", func() {
		cfg := hss.DefaultConfig()
		cfg.AllowAnyPeer = true
		cfg.IdleTimeout = "30s"
		_, err := hss.New(cfg)
		Expect(err).To(MatchError(ContainSubstring("idle_timeout: no longer supported")))
	})
})
