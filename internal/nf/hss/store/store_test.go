package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	bolt "go.etcd.io/bbolt"

	"github.com/imslab/quasipool/internal/nf/hss/store"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// openDB opens a store in dir and closes it when the spec ends.
func openDB(dir string, opts store.Options) *store.DB {
	GinkgoHelper()
	db, err := store.Open(dir, opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(db.Close)
	return db
}

func alice() store.Subscriber {
	return store.Subscriber{
		IMPI:     "alice@ims.test",
		IMPUs:    []string{"sip:alice@ims.test", "tel:+15550001"},
		Realm:    "ims.test",
		Password: "secret",
	}
}

func bob() store.Subscriber {
	return store.Subscriber{
		IMPI:     "bob@ims.test",
		IMPUs:    []string{"sip:bob@ims.test"},
		Realm:    "ims.test",
		Password: "hunter2",
	}
}

// register is an Update callback that records a registration at scscf.
func register(scscf string) func(store.Subscriber, *store.Registration) error {
	return func(_ store.Subscriber, reg *store.Registration) error {
		reg.State = store.Registered
		reg.ServerName = scscf
		reg.Restoration = []byte{0x00, 0x01, 0xff}
		reg.RegisteredAt = t0
		return nil
	}
}

// counter is stored in Restoration by the concurrency specs: it is opaque bytes to the store.
func counter(reg store.Registration) int {
	if len(reg.Restoration) == 0 {
		return 0
	}
	n, err := strconv.Atoi(string(reg.Restoration))
	Expect(err).NotTo(HaveOccurred())
	return n
}

func increment(_ store.Subscriber, reg *store.Registration) error {
	n := 0
	if len(reg.Restoration) > 0 {
		var err error
		if n, err = strconv.Atoi(string(reg.Restoration)); err != nil {
			return err
		}
	}
	reg.State = store.Registered
	reg.Restoration = []byte(strconv.Itoa(n + 1))
	return nil
}

var _ = Describe("Subscriber", Label("unit"), func() {
	It("derives HA1 as MD5(username:realm:password) (RFC 2617 example)", func() {
		Expect(store.HA1("Mufasa", "testrealm@host.com", "Circle Of Life")).To(Equal("939e7578ed9e3c518a452acee763bce9"))
	})

	It("accepts the other TS 29.229 schemes, without a password where they need none", func() {
		s := alice()
		s.AuthScheme, s.Password = "Digest-AKAv1-MD5", ""
		Expect(s.Validate()).To(Succeed())
		s.AuthScheme = "Digest-HTTP"
		Expect(s.Validate()).To(MatchError(ContainSubstring(`password: a password or ha1 is required for "Digest-HTTP"`)))
	})

	It("normalizes defaults and never keeps the password", func() {
		s := alice()
		s.Normalize()
		Expect(s.AuthScheme).To(Equal(store.AuthSIPDigest))
		Expect(s.Password).To(BeEmpty())
		Expect(s.HA1).To(Equal(store.HA1("alice@ims.test", "ims.test", "secret")))
		Expect(s.Validate()).To(Succeed())
	})

	DescribeTable("Validate names the bad field",
		func(mutate func(*store.Subscriber), want string) {
			s := alice()
			mutate(&s)
			err := s.Validate()
			Expect(err).To(MatchError(store.ErrInvalid))
			Expect(err.Error()).To(ContainSubstring(want))
			var fe *store.FieldError
			Expect(errors.As(err, &fe)).To(BeTrue())
		},
		Entry("missing impi", func(s *store.Subscriber) { s.IMPI = "" }, `subscriber "": impi: required`),
		Entry("impi not a NAI", func(s *store.Subscriber) { s.IMPI = "alice" }, "impi: must have the form username@realm"),
		Entry("impi with a space", func(s *store.Subscriber) { s.IMPI = "al ice@ims.test" }, "impi: must not contain whitespace"),
		Entry("impi with two realms", func(s *store.Subscriber) { s.IMPI = "a@b@ims.test" }, "impi: must have the form username@realm"),
		Entry("impu in angle brackets", func(s *store.Subscriber) { s.IMPUs[0] = "sip:<alice@ims.test>" }, "impus[0]: must not contain '<'"),
		Entry("no impus", func(s *store.Subscriber) { s.IMPUs = nil }, "impus: at least one"),
		Entry("impu not a URI", func(s *store.Subscriber) { s.IMPUs = []string{"alice@ims.test"} },
			`subscriber "alice@ims.test": impus[0]: must be a sip: or tel: URI`),
		Entry("second impu empty body", func(s *store.Subscriber) { s.IMPUs[1] = "tel:" }, "impus[1]: must be a sip: or tel: URI"),
		Entry("duplicate impu", func(s *store.Subscriber) { s.IMPUs[1] = s.IMPUs[0] }, "impus[1]: duplicate of impus[0]"),
		Entry("missing realm", func(s *store.Subscriber) { s.Realm = "" }, "realm: required"),
		Entry("unknown auth scheme", func(s *store.Subscriber) { s.AuthScheme = "Digest-MD6" }, `auth_scheme: unknown scheme "Digest-MD6"`),
		Entry("no credentials", func(s *store.Subscriber) { s.Password = "" }, "password: a password or ha1 is required"),
		Entry("short ha1", func(s *store.Subscriber) { s.Password, s.HA1 = "", "abc" }, "ha1: must be 32 hex digits"),
		Entry("non-hex ha1", func(s *store.Subscriber) { s.Password, s.HA1 = "", "zz9e7578ed9e3c518a452acee763bce9" }, "ha1: must be hex"),
		Entry("capability set with space", func(s *store.Subscriber) { s.CapabilitySet = "gold plus" }, "capability_set:"),
		Entry("empty visited network", func(s *store.Subscriber) { s.VisitedNetworks = []string{"ims.test", ""} }, "visited_networks[1]: required"),
		Entry("malformed iFC XML", func(s *store.Subscriber) { s.ServiceProfileXML = "<InitialFilterCriteria><Priority>0</Priority>" },
			"service_profile_xml: not well-formed XML"),
	)
})

var _ = Describe("DB", Label("unit"), func() {
	var (
		dir string
		db  *store.DB
		ctx context.Context
	)
	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		db = openDB(dir, store.Options{NoSync: true, Now: func() time.Time { return t0 }, Logger: newTestLogger()})
		ctx = context.Background()
	})

	Describe("subscribers", func() {
		It("stores, reads, looks up by IMPU and deletes", func() {
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())

			got, err := db.GetSubscriber("alice@ims.test")
			Expect(err).NotTo(HaveOccurred())
			Expect(got.IMPUs).To(Equal([]string{"sip:alice@ims.test", "tel:+15550001"}))
			Expect(got.Password).To(BeEmpty(), "the password is never stored")
			Expect(got.HA1).To(Equal(store.HA1("alice@ims.test", "ims.test", "secret")))
			Expect(got.AuthScheme).To(Equal(store.AuthSIPDigest))

			for _, impu := range got.IMPUs {
				byIMPU, err := db.LookupIMPU(impu)
				Expect(err).NotTo(HaveOccurred())
				Expect(byIMPU.IMPI).To(Equal("alice@ims.test"))
			}

			Expect(db.DeleteSubscriber(ctx, "alice@ims.test")).To(Succeed())
			_, err = db.GetSubscriber("alice@ims.test")
			Expect(err).To(MatchError(store.ErrNotFound))
			_, err = db.LookupIMPU("tel:+15550001")
			Expect(err).To(MatchError(store.ErrNotFound))
			_, err = db.GetRegistration("alice@ims.test")
			Expect(err).To(MatchError(store.ErrNotFound))
		})

		It("reports unknown identities as ErrNotFound", func() {
			_, err := db.GetSubscriber("nobody@ims.test")
			Expect(err).To(MatchError(store.ErrNotFound))
			_, err = db.LookupIMPU("sip:nobody@ims.test")
			Expect(err).To(MatchError(store.ErrNotFound))
			Expect(db.DeleteSubscriber(ctx, "nobody@ims.test")).To(MatchError(store.ErrNotFound))
			_, err = db.Update(ctx, "nobody@ims.test", func(store.Subscriber, *store.Registration) error {
				Fail("fn must not run for an unknown IMPI")
				return nil
			})
			Expect(err).To(MatchError(store.ErrNotFound))
		})

		It("rejects an invalid subscriber naming the field and writes nothing", func() {
			s := alice()
			s.IMPUs = []string{"sip:alice@ims.test", "mailto:alice@ims.test"}
			err := db.PutSubscriber(ctx, s)
			Expect(err).To(MatchError(store.ErrInvalid))
			Expect(err.Error()).To(ContainSubstring(`subscriber "alice@ims.test": impus[1]: must be a sip: or tel: URI`))
			Expect(db.CountSubscribers()).To(Equal(0))
		})

		It("keeps every IMPU unique across subscribers", func() {
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())
			thief := bob()
			thief.IMPUs = append(thief.IMPUs, "tel:+15550001")
			err := db.PutSubscriber(ctx, thief)
			Expect(err).To(MatchError(store.ErrIMPUTaken))
			Expect(err.Error()).To(ContainSubstring(`"tel:+15550001"`))
			_, err = db.GetSubscriber("bob@ims.test")
			Expect(err).To(MatchError(store.ErrNotFound), "a rejected put writes nothing")

			// Once alice releases it, bob may take it.
			a := alice()
			a.IMPUs = []string{"sip:alice@ims.test"}
			Expect(db.PutSubscriber(ctx, a)).To(Succeed())
			Expect(db.PutSubscriber(ctx, thief)).To(Succeed())
			owner, err := db.LookupIMPU("tel:+15550001")
			Expect(err).NotTo(HaveOccurred())
			Expect(owner.IMPI).To(Equal("bob@ims.test"))
		})

		It("releases public identities an upsert drops", func() {
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())
			a := alice()
			a.IMPUs = []string{"sip:alice@ims.test", "sip:alice.work@ims.test"}
			Expect(db.PutSubscriber(ctx, a)).To(Succeed())
			_, err := db.LookupIMPU("tel:+15550001")
			Expect(err).To(MatchError(store.ErrNotFound))
			owner, err := db.LookupIMPU("sip:alice.work@ims.test")
			Expect(err).NotTo(HaveOccurred())
			Expect(owner.IMPI).To(Equal("alice@ims.test"))
		})

		It("creates only new subscribers with CreateSubscriber", func() {
			Expect(db.CreateSubscriber(ctx, alice())).To(Succeed())
			Expect(db.CreateSubscriber(ctx, alice())).To(MatchError(store.ErrExists))
		})

		It("never touches the registration on upsert", func() {
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())
			_, err := db.Update(ctx, "alice@ims.test", register("sip:scscf1.ims.test"))
			Expect(err).NotTo(HaveOccurred())

			a := alice()
			a.Password = "changed"
			a.UnregisteredServices = true
			Expect(db.PutSubscriber(ctx, a)).To(Succeed())

			reg, err := db.GetRegistration("alice@ims.test")
			Expect(err).NotTo(HaveOccurred())
			Expect(reg.State).To(Equal(store.Registered))
			Expect(reg.ServerName).To(Equal("sip:scscf1.ims.test"))
		})

		It("pages through subscribers in IMPI order", func() {
			_, _, err := db.Import(ctx, store.Generate("u", 1, 25, 2, "ims.test", "p"))
			Expect(err).NotTo(HaveOccurred())
			Expect(db.CountSubscribers()).To(Equal(25))

			var seen []string
			after := ""
			pages := 0
			for {
				page, err := db.ListSubscribers(after, 10)
				Expect(err).NotTo(HaveOccurred())
				if len(page) == 0 {
					break
				}
				pages++
				Expect(len(page)).To(BeNumerically("<=", 10))
				for _, s := range page {
					seen = append(seen, s.IMPI)
				}
				after = page[len(page)-1].IMPI
			}
			Expect(pages).To(Equal(3))
			Expect(seen).To(HaveLen(25))
			Expect(seen[0]).To(Equal("u01@ims.test"))
			Expect(seen[24]).To(Equal("u25@ims.test"))
			Expect(seen).To(BeEquivalentTo(sortedCopy(seen)))

			all, err := db.ListSubscribers("", 0)
			Expect(err).NotTo(HaveOccurred())
			Expect(all).To(HaveLen(25))
			mid, err := db.ListSubscribers("u10@ims.tesa", 2) // after a key that does not exist
			Expect(err).NotTo(HaveOccurred())
			Expect(mid[0].IMPI).To(Equal("u10@ims.test"))
		})

		It("survives a reopen", func() {
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())
			_, err := db.Update(ctx, "alice@ims.test", register("sip:scscf2.ims.test"))
			Expect(err).NotTo(HaveOccurred())
			Expect(db.Close()).To(Succeed())

			db2 := openDB(dir, store.Options{})
			sub, reg, err := db2.LookupIMPURegistration("tel:+15550001")
			Expect(err).NotTo(HaveOccurred())
			Expect(sub.IMPI).To(Equal("alice@ims.test"))
			Expect(reg.ServerName).To(Equal("sip:scscf2.ims.test"))
			Expect(reg.Restoration).To(Equal([]byte{0x00, 0x01, 0xff}))
			Expect(reg.RegisteredAt.Equal(t0)).To(BeTrue())
		})
	})

	Describe("registrations", func() {
		BeforeEach(func() {
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())
		})

		It("reads as not registered until one is stored", func() {
			reg, err := db.GetRegistration("alice@ims.test")
			Expect(err).NotTo(HaveOccurred())
			Expect(reg).To(Equal(store.Registration{IMPI: "alice@ims.test", State: store.NotRegistered}))
		})

		It("persists what fn leaves and returns the stored result", func() {
			var seenSub store.Subscriber
			var seenReg store.Registration
			stored, err := db.Update(ctx, "alice@ims.test", func(sub store.Subscriber, reg *store.Registration) error {
				seenSub, seenReg = sub, *reg
				reg.State = store.Registered
				reg.ServerName = "sip:scscf1.ims.test"
				reg.OriginHost = "scscf1.ims.test"
				reg.IMPI = "someone-else@ims.test" // ignored: the key wins
				return nil
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(seenSub.IMPUs).To(ContainElement("tel:+15550001"))
			Expect(seenReg.State).To(Equal(store.NotRegistered))
			Expect(stored.IMPI).To(Equal("alice@ims.test"))
			Expect(stored.UpdatedAt).To(Equal(t0))

			got, err := db.GetRegistration("alice@ims.test")
			Expect(err).NotTo(HaveOccurred())
			Expect(got.State).To(Equal(store.Registered))
			Expect(got.OriginHost).To(Equal("scscf1.ims.test"))
			Expect(got.UpdatedAt.Equal(t0)).To(BeTrue())
		})

		It("writes nothing when fn fails and returns fn's error", func() {
			_, err := db.Update(ctx, "alice@ims.test", register("sip:scscf1.ims.test"))
			Expect(err).NotTo(HaveOccurred())

			errNo := errors.New("identities not matching")
			_, err = db.Update(ctx, "alice@ims.test", func(_ store.Subscriber, reg *store.Registration) error {
				reg.State = store.NotRegistered
				reg.ServerName = "sip:evil.ims.test"
				return errNo
			})
			Expect(err).To(MatchError(errNo))

			got, err := db.GetRegistration("alice@ims.test")
			Expect(err).NotTo(HaveOccurred())
			Expect(got.ServerName).To(Equal("sip:scscf1.ims.test"))
		})

		It("does not let fn change the stored subscriber", func() {
			_, err := db.Update(ctx, "alice@ims.test", func(sub store.Subscriber, _ *store.Registration) error {
				sub.IMPUs[0] = "sip:mallory@ims.test"
				return nil
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(db.GetSubscriber("alice@ims.test")).To(HaveField("IMPUs", ContainElement("sip:alice@ims.test")))
		})

		It("rejects an unknown state", func() {
			_, err := db.Update(ctx, "alice@ims.test", func(_ store.Subscriber, reg *store.Registration) error {
				reg.State = "zombie"
				return nil
			})
			Expect(err).To(MatchError(store.ErrInvalid))
			Expect(err.Error()).To(ContainSubstring("state"))
		})

		It("turns a panic in fn into an error and keeps working", func() {
			_, err := db.Update(ctx, "alice@ims.test", func(store.Subscriber, *store.Registration) error {
				panic("boom")
			})
			Expect(err).To(MatchError(ContainSubstring("panic: boom")))
			_, err = db.Update(ctx, "alice@ims.test", register("sip:scscf1.ims.test"))
			Expect(err).NotTo(HaveOccurred())
		})

		It("returns ctx.Err() and writes nothing for a cancelled context", func() {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := db.Update(cctx, "alice@ims.test", register("sip:scscf1.ims.test"))
			Expect(err).To(MatchError(context.Canceled))
			Expect(db.GetRegistration("alice@ims.test")).To(HaveField("State", store.NotRegistered))
		})

		It("is deleted with its subscriber", func() {
			_, err := db.Update(ctx, "alice@ims.test", register("sip:scscf1.ims.test"))
			Expect(err).NotTo(HaveOccurred())
			Expect(db.DeleteSubscriber(ctx, "alice@ims.test")).To(Succeed())
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())
			Expect(db.GetRegistration("alice@ims.test")).To(HaveField("State", store.NotRegistered))
		})

		It("applies the good ops of a batch and skips the failing ones", func() {
			// Concurrent ops land in shared transactions; a failing fn must not affect the others.
			subs := store.Generate("b", 1, 100, 3, "ims.test", "p")
			_, _, err := db.Import(ctx, subs)
			Expect(err).NotTo(HaveOccurred())
			errOdd := errors.New("odd")
			var wg sync.WaitGroup
			for i, s := range subs {
				wg.Go(func() {
					defer GinkgoRecover()
					_, err := db.Update(ctx, s.IMPI, func(_ store.Subscriber, reg *store.Registration) error {
						reg.State = store.Registered
						if i%2 == 1 {
							return errOdd
						}
						return nil
					})
					if i%2 == 1 {
						Expect(err).To(MatchError(errOdd))
					} else {
						Expect(err).NotTo(HaveOccurred())
					}
				})
			}
			wg.Wait()
			for i, s := range subs {
				want := store.Registered
				if i%2 == 1 {
					want = store.NotRegistered
				}
				Expect(db.GetRegistration(s.IMPI)).To(HaveField("State", want), s.IMPI)
			}
		})
	})

	Describe("import", func() {
		It("is idempotent and leaves registrations alone", func() {
			lab := store.DefaultLabSubscribers()
			added, updated, err := db.Import(ctx, lab)
			Expect(err).NotTo(HaveOccurred())
			Expect([]int{added, updated}).To(Equal([]int{1000, 0}))

			_, err = db.Update(ctx, "user0007@ims.test", register("sip:scscf3.ims.test"))
			Expect(err).NotTo(HaveOccurred())

			added, updated, err = db.Import(ctx, store.DefaultLabSubscribers())
			Expect(err).NotTo(HaveOccurred())
			Expect([]int{added, updated}).To(Equal([]int{0, 0}))
			Expect(db.GetRegistration("user0007@ims.test")).To(HaveField("ServerName", "sip:scscf3.ims.test"))

			lab[6].UnregisteredServices = true
			added, updated, err = db.Import(ctx, lab)
			Expect(err).NotTo(HaveOccurred())
			Expect([]int{added, updated}).To(Equal([]int{0, 1}))
			Expect(db.GetRegistration("user0007@ims.test")).To(HaveField("State", store.Registered))
			Expect(db.CountSubscribers()).To(Equal(1000))
		})

		It("moves an IMPU between subscribers of the same import, in any order", func() {
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())
			Expect(db.PutSubscriber(ctx, bob())).To(Succeed())
			a, b := alice(), bob()
			a.IMPUs = []string{"sip:alice@ims.test"}
			b.IMPUs = []string{"sip:bob@ims.test", "tel:+15550001"}
			_, updated, err := db.Import(ctx, []store.Subscriber{b, a}) // bob claims before alice releases
			Expect(err).NotTo(HaveOccurred())
			Expect(updated).To(Equal(2))
			Expect(db.LookupIMPU("tel:+15550001")).To(HaveField("IMPI", "bob@ims.test"))
		})

		It("is all or nothing", func() {
			Expect(db.PutSubscriber(ctx, alice())).To(Succeed())
			thief := bob()
			thief.IMPUs = []string{"tel:+15550001"}
			subs := append(store.Generate("x", 1, 10, 2, "ims.test", "p"), thief)
			_, _, err := db.Import(ctx, subs)
			Expect(err).To(MatchError(store.ErrIMPUTaken))
			Expect(db.CountSubscribers()).To(Equal(1))
		})

		It("rejects a list that repeats an identity, naming both entries", func() {
			dup := bob()
			dup.IMPUs = []string{"sip:alice@ims.test"}
			_, _, err := db.Import(ctx, []store.Subscriber{alice(), dup})
			Expect(err).To(MatchError(store.ErrInvalid))
			Expect(err.Error()).To(SatisfyAll(ContainSubstring("subscribers[1]"), ContainSubstring("subscribers[0]")))
		})
	})

	Describe("lifecycle", func() {
		It("refuses writes after Close and closes twice", func() {
			Expect(db.Close()).To(Succeed())
			Expect(db.PutSubscriber(ctx, alice())).To(MatchError(store.ErrClosed))
			Expect(db.Close()).To(Succeed())
		})

		It("commits every write acknowledged before Close", func() {
			_, _, err := db.Import(ctx, store.Generate("c", 1, 50, 2, "ims.test", "p"))
			Expect(err).NotTo(HaveOccurred())
			acked := make([]bool, 50)
			var wg sync.WaitGroup
			for i := range 50 {
				wg.Go(func() {
					defer GinkgoRecover()
					_, err := db.Update(ctx, fmt.Sprintf("c%02d@ims.test", i+1), register("sip:s.ims.test"))
					if err == nil {
						acked[i] = true
					} else {
						Expect(err).To(MatchError(store.ErrClosed))
					}
				})
			}
			Expect(db.Close()).To(Succeed()) // races with the writers on purpose
			wg.Wait()

			db2 := openDB(dir, store.Options{})
			for i, ok := range acked {
				if ok {
					Expect(db2.GetRegistration(fmt.Sprintf("c%02d@ims.test", i+1))).To(HaveField("State", store.Registered))
				}
			}
		})

		It("refuses a database with another schema version", func() {
			Expect(db.Close()).To(Succeed())
			raw, err := bolt.Open(filepath.Join(dir, store.FileName), 0o600, nil)
			Expect(err).NotTo(HaveOccurred())
			Expect(raw.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), []byte("99"))
			})).To(Succeed())
			Expect(raw.Close()).To(Succeed())

			_, err = store.Open(dir, store.Options{})
			Expect(err).To(MatchError(ContainSubstring("schema version 99")))
		})

		It("does not open a database another handle holds", func() {
			_, err := store.Open(dir, store.Options{LockTimeout: 50 * time.Millisecond})
			Expect(err).To(MatchError(bolt.ErrTimeout))
		})
	})
})

var _ = Describe("DB with fsync", Label("unit"), func() {
	It("persists every one of many concurrent updates, sharing commits", func() {
		dir := GinkgoT().TempDir()
		db := openDB(dir, store.Options{})
		ctx := context.Background()
		// 10 subscribers, 200 goroutines each incrementing one of them 5 times: lost updates would show.
		subs := store.Generate("hot", 1, 10, 2, "ims.test", "p")
		_, _, err := db.Import(ctx, subs)
		Expect(err).NotTo(HaveOccurred())
		before := db.Stats()

		const goroutines, rounds = 200, 5
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				defer GinkgoRecover()
				for range rounds {
					_, err := db.Update(ctx, subs[g%len(subs)].IMPI, increment)
					Expect(err).NotTo(HaveOccurred())
				}
			})
		}
		wg.Wait()

		st := db.Stats()
		ops, commits := st.Ops-before.Ops, st.Commits-before.Commits
		Expect(ops).To(BeEquivalentTo(goroutines * rounds))
		Expect(commits).To(BeNumerically("<", ops), "concurrent writers must share commits (group commit)")
		GinkgoWriter.Printf("%d updates in %d commits\n", ops, commits)

		Expect(db.Close()).To(Succeed())
		db2 := openDB(dir, store.Options{})
		total := 0
		for _, s := range subs {
			reg, err := db2.GetRegistration(s.IMPI)
			Expect(err).NotTo(HaveOccurred())
			Expect(counter(reg)).To(Equal(goroutines * rounds / len(subs)))
			total += counter(reg)
		}
		Expect(total).To(Equal(goroutines * rounds))
	})

	It("imports 10,000 subscribers in one commit", func() {
		db := openDB(GinkgoT().TempDir(), store.Options{})
		before := db.Stats()
		added, _, err := db.Import(context.Background(), store.Generate("big", 1, 10000, 5, "ims.test", "p"))
		Expect(err).NotTo(HaveOccurred())
		Expect(added).To(Equal(10000))
		Expect(db.Stats().Commits - before.Commits).To(BeEquivalentTo(1))
		Expect(db.CountSubscribers()).To(Equal(10000))
	})
})
