package hss_test

import (
	"crypto/md5"
	"encoding/hex"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/hss"
	"github.com/imslab/quasipool/internal/proto/cx"
)

var _ = Describe("lab population beyond user9999", Label("integration"), func() {
	It("provisions user0001…user12000 from lab_subscriber_count and serves their digest credentials", SpecTimeout(60*time.Second), func(_ SpecContext) {
		h := startHSS(func(c *hss.Config) {
			c.SubscribersFile = ""
			c.LabSubscribers = true
			c.LabSubscriberCount = 12000
		})
		for _, n := range []struct{ impi, password string }{
			{"user0001@ims.test", "pass0001"}, // the four-digit names are unchanged
			{"user9999@ims.test", "pass9999"},
			{"user10000@ims.test", "pass10000"}, // then more digits, no padding beyond four
			{"user12000@ims.test", "pass12000"},
		} {
			a, err := mar(h.scscf(scscf1), n.impi, scscf1)
			Expect(err).NotTo(HaveOccurred(), n.impi)
			Expect(a.AuthItems).To(HaveLen(1))
			sum := md5.Sum([]byte(n.impi + ":ims.test:" + n.password))
			Expect(a.AuthItems[0].Digest.HA1).To(Equal(hex.EncodeToString(sum[:])), n.impi)
		}
		for _, impi := range []string{"user12001@ims.test", "user010000@ims.test"} {
			_, err := h.icscf.UserAuthorization(ctx(), &cx.UAR{UserName: impi, PublicIdentity: "sip:" + impi,
				VisitedNetworkIdentifier: "ims.test"})
			res, ok := cx.ResultOf(err)
			Expect(ok).To(BeTrue(), "%s: %v", impi, err)
			Expect(res).To(Equal(cx.ErrorUserUnknown), impi)
		}
	})

	DescribeTable("refuses a lab_subscriber_count it cannot provision, naming the field and the limit",
		func(count int) {
			cfg := hss.DefaultConfig()
			cfg.AllowAnyPeer = true
			cfg.LabSubscriberCount = count
			Expect(cfg.Validate()).To(MatchError(ContainSubstring(
				"hss config: lab_subscriber_count: must be between 0 (default 1000) and 999999 (user999999)")))
		},
		Entry("negative", -1),
		Entry("beyond user999999", 1_000_000),
	)
})
