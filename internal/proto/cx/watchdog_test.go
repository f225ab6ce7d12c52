package cx

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Watchdog configuration", Label("unit"), func() {
	It("defaults to RFC 3539's Tw of 30 s ± 2 s and 2 missed DWRs", func() {
		Expect(WatchdogConfig{}.WithDefaults()).To(Equal(WatchdogConfig{Interval: 30 * time.Second, Jitter: 2 * time.Second, MaxMissed: 2}))
		Expect(WatchdogConfig{}.Validate("w")).To(Succeed())
	})

	It("draws each Tw anew, uniformly within interval ± jitter", func() {
		w := WatchdogConfig{}.WithDefaults()
		lo, hi := w.Interval, w.Interval
		seen := map[time.Duration]bool{}
		for range 2000 {
			tw := w.tw()
			Expect(tw).To(BeNumerically(">=", 28*time.Second))
			Expect(tw).To(BeNumerically("<=", 32*time.Second))
			lo, hi = min(lo, tw), max(hi, tw)
			seen[tw] = true
		}
		Expect(len(seen)).To(BeNumerically(">", 1900), "draws repeat")
		// 2000 uniform draws over 4 s reach within 50 ms of both ends with overwhelming probability.
		Expect(lo).To(BeNumerically("<", 28*time.Second+50*time.Millisecond))
		Expect(hi).To(BeNumerically(">", 32*time.Second-50*time.Millisecond))
	})

	DescribeTable("names the bad field", func(w WatchdogConfig, want string) {
		Expect(w.Validate("hss config: watchdog")).To(MatchError(want))
	},
		Entry("negative interval", WatchdogConfig{Interval: -time.Second}, "hss config: watchdog.interval: must not be negative, is -1s"),
		Entry("negative jitter", WatchdogConfig{Jitter: -time.Second}, "hss config: watchdog.jitter: must not be negative, is -1s"),
		Entry("negative max_missed", WatchdogConfig{MaxMissed: -1}, "hss config: watchdog.max_missed: must not be negative (0: default 2), is -1"),
		Entry("jitter as large as the interval", WatchdogConfig{Interval: time.Second, Jitter: time.Second},
			"hss config: watchdog.jitter: 1s must be less than the interval (1s)"),
		Entry("jitter above a short interval", WatchdogConfig{Interval: 300 * time.Millisecond, Jitter: 2 * time.Second},
			"hss config: watchdog.jitter: 2s must be less than the interval (300ms)"),
	)

	It("scales the default jitter with a short interval", func() {
		w := WatchdogConfig{Interval: 300 * time.Millisecond}
		Expect(w.Validate("w")).To(Succeed())
		Expect(w.WithDefaults().Jitter).To(Equal(20 * time.Millisecond))
	})

	It("is checked by the server configuration", func() {
		cfg := ServerConfig{OriginHost: "hss", OriginRealm: "r", AllowAnyPeer: true, Watchdog: WatchdogConfig{MaxMissed: -3}}
		Expect(cfg.Validate()).To(MatchError(ContainSubstring("cx server: watchdog.max_missed")))
	})
})
