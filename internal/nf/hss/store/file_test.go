package store_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/hss/store"
)

const exampleFile = `
subscribers:            # explicit list
  - impi: alice@ims.test
    impus: [sip:alice@ims.test, tel:+15550001]
    password: secret
    realm: ims.test
    capability_set: gold
generate:               # ranges of test subscribers for load labs
  - prefix: user
    from: 1
    count: 1000
    digits: 4
    domain: ims.test
    password_prefix: pass
`

func parse(text string) ([]store.Subscriber, error) {
	f, err := store.ParseFile(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	return f.Subscribers()
}

var _ = Describe("provisioning file", Label("unit"), func() {
	It("expands listed and generated subscribers in order", func() {
		path := filepath.Join(GinkgoT().TempDir(), "subscribers.yaml")
		Expect(os.WriteFile(path, []byte(exampleFile), 0o600)).To(Succeed())
		f, err := store.LoadFile(path)
		Expect(err).NotTo(HaveOccurred())
		subs, err := f.Subscribers()
		Expect(err).NotTo(HaveOccurred())

		Expect(subs).To(HaveLen(1001))
		Expect(subs[0].IMPI).To(Equal("alice@ims.test"))
		Expect(subs[0].CapabilitySet).To(Equal("gold"))
		Expect(subs[0].HA1).To(Equal(store.HA1("alice@ims.test", "ims.test", "secret")))
		Expect(subs[0].Password).To(BeEmpty())
		Expect(subs[1:]).To(Equal(store.DefaultLabSubscribers()))
	})

	It("describes the default lab subscribers", func() {
		lab := store.DefaultLabSubscribers()
		Expect(lab).To(HaveLen(1000))
		Expect(lab[0]).To(Equal(store.Subscriber{
			IMPI:       "user0001@ims.test",
			IMPUs:      []string{"sip:user0001@ims.test"},
			Realm:      "ims.test",
			HA1:        store.HA1("user0001@ims.test", "ims.test", "pass0001"),
			AuthScheme: store.AuthSIPDigest,
		}))
		Expect(lab[999].IMPI).To(Equal("user1000@ims.test"))
		for _, s := range lab {
			Expect(s.Validate()).To(Succeed())
		}
	})

	It("treats an empty file as no subscribers", func() {
		Expect(parse("# nothing yet\n")).To(BeEmpty())
	})

	It("imports twice without changes", func(ctx SpecContext) {
		subs, err := parse(exampleFile)
		Expect(err).NotTo(HaveOccurred())
		db := openDB(GinkgoT().TempDir(), store.Options{NoSync: true})
		Expect(db.Import(ctx, subs)).Error().NotTo(HaveOccurred())
		added, updated, err := db.Import(ctx, subs)
		Expect(err).NotTo(HaveOccurred())
		Expect(added + updated).To(BeZero())
	})

	It("reports a missing file", func() {
		_, err := store.LoadFile(filepath.Join(GinkgoT().TempDir(), "nope.yaml"))
		Expect(err).To(MatchError(os.ErrNotExist))
	})

	DescribeTable("errors name what is wrong and where",
		func(text string, wants ...string) {
			_, err := parse(text)
			Expect(err).To(MatchError(store.ErrInvalid))
			for _, w := range wants {
				Expect(err.Error()).To(ContainSubstring(w))
			}
		},
		Entry("unknown top-level field", "subscriber:\n  - impi: a@ims.test\n", "line 1", "field subscriber not found"),
		Entry("unknown subscriber field",
			"subscribers:\n  - impi: a@ims.test\n    impus: [sip:a@ims.test]\n    pasword: x\n    realm: ims.test\n",
			"line 4", "field pasword not found"),
		Entry("unknown range field", "generate:\n  - prefix: u\n    count: 1\n    domain: ims.test\n    password: p\n",
			"line 5", "field password not found"),
		Entry("wrong type", "generate:\n  - prefix: u\n    count: many\n", "line 3", "many"),
		Entry("two documents", "subscribers: []\n---\nsubscribers: []\n", "one YAML document"),
		Entry("invalid subscriber", "subscribers:\n  - impi: a@ims.test\n    impus: [a@ims.test]\n    password: x\n    realm: ims.test\n",
			`subscribers[0]: subscriber "a@ims.test": impus[0]: must be a sip: or tel: URI`),
		Entry("range generating invalid identities", "generate:\n  - {prefix: u, count: 3, domain: ims test, password_prefix: p}\n",
			`generate[0]: subscriber "u0@ims test": impi: must not contain whitespace`),
		Entry("range without count", "generate:\n  - {prefix: u, domain: ims.test, password_prefix: p}\n", "generate[0]: count:"),
		Entry("range without domain", "generate:\n  - {prefix: u, count: 3, password_prefix: p}\n", "generate[0]: domain: required"),
		Entry("range without passwords", "generate:\n  - {prefix: u, count: 3, domain: ims.test}\n", "generate[0]: password_prefix: required"),
		Entry("duplicate IMPI across list and range",
			"subscribers:\n  - {impi: u1@ims.test, impus: [sip:x@ims.test], password: x, realm: ims.test}\n"+
				"generate:\n  - {prefix: u, count: 3, domain: ims.test, password_prefix: p}\n",
			`generate[0]: impi "u1@ims.test" is also defined by subscribers[0]`),
		Entry("duplicate IMPU across subscribers",
			"subscribers:\n  - {impi: a@ims.test, impus: [sip:a@ims.test], password: x, realm: ims.test}\n"+
				"  - {impi: b@ims.test, impus: ['tel:+1', sip:a@ims.test], password: x, realm: ims.test}\n",
			`subscribers[1]: subscriber "b@ims.test": impus[1] "sip:a@ims.test" is also used by subscribers[0] (impi "a@ims.test")`),
		Entry("overlapping ranges",
			"generate:\n  - {prefix: u, count: 3, domain: ims.test, password_prefix: p}\n"+
				"  - {prefix: u, from: 2, count: 3, domain: ims.test, password_prefix: q}\n",
			`generate[1]: impi "u2@ims.test" is also defined by generate[0]`),
	)

	It("pads generated numbers to digits", func() {
		Expect(store.Generate("u", 9, 2, 3, "lab.test", "p")).To(HaveEach(HaveField("Realm", "lab.test")))
		subs := store.Generate("u", 9, 2, 3, "lab.test", "p")
		Expect([]string{subs[0].IMPI, subs[1].IMPUs[0]}).To(Equal([]string{"u009@lab.test", "sip:u010@lab.test"}))
		Expect(subs[1].HA1).To(Equal(store.HA1("u010@lab.test", "lab.test", "p010")))
		Expect(store.Generate("u", 1, 0, 3, "lab.test", "p")).To(BeNil())
	})
})
