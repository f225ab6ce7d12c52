package ue_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/nf/hss/store"
)

var _ = Describe("user names beyond user9999", Label("unit"), func() {
	It("keeps user0001…user9999 and continues with user10000, as the HSS provisions them", func() {
		cfg := ue.DefaultConfig()
		cfg.Users.Count = 12000
		Expect(cfg.Validate()).To(Succeed())
		r := cfg.Users
		Expect([]string{r.User(1), r.User(999), r.User(9999), r.User(10000), r.User(12000), r.User(999999)}).To(Equal(
			[]string{"user0001", "user0999", "user9999", "user10000", "user12000", "user999999"}))
		Expect(r.Password(10000)).To(Equal("pass10000"))

		// Every phone's digest credentials are those the lab's HSS holds for it (HA1 of user, realm, password).
		subs := store.LabSubscribers(12000)
		Expect(subs).To(HaveLen(12000))
		for _, n := range []int{1, 9999, 10000, 12000} {
			s := subs[n-1]
			Expect(s.IMPI).To(Equal(r.User(n) + "@ims.test"))
			Expect(s.IMPUs).To(Equal([]string{"sip:" + r.User(n) + "@ims.test"}))
			Expect(s.HA1).To(Equal(store.HA1(s.IMPI, "ims.test", r.Password(n))))
		}
	})

	It("refuses users beyond user999999 and names the limit", func() {
		cfg := ue.DefaultConfig()
		cfg.Users.From, cfg.Users.Count = 999990, 20
		Expect(cfg.Validate()).To(MatchError("ue config: users.count: users 999990..1000009 go beyond user999999, the largest the lab provisions"))
		cfg.Users.Count = 10
		Expect(cfg.Validate()).To(Succeed())
	})
})
