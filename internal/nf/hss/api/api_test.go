package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/hss/api"
	"github.com/imslab/quasipool/internal/nf/hss/store"
)

const testToken = "0123456789abcdef"

const aliceJSON = `{"impi":"alice@ims.test","impus":["sip:alice@ims.test","tel:+15550001"],"realm":"ims.test","password":"secret"}`

// syncBuffer collects log output written from server goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var m map[string]any
		Expect(json.Unmarshal([]byte(line), &m)).To(Succeed())
		out = append(out, m)
	}
	return out
}

// reply is a decoded response.
type reply struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// testDecoder decodes restoration blobs that start with 0x01 and fails on anything else.
func testDecoder(raw []byte) (any, error) {
	if len(raw) == 0 || raw[0] != 0x01 {
		return nil, errors.New("not a restoration AVP")
	}
	return map[string]any{"path": "<sip:pcscf1.ims.test;lr>", "length": len(raw)}, nil
}

var _ = Describe("API", Label("unit"), func() {
	var (
		db     *store.DB
		srv    *httptest.Server
		logs   *syncBuffer
		decode api.RestorationDecoder
	)

	BeforeEach(func() {
		var err error
		db, err = store.Open(GinkgoT().TempDir(), store.Options{NoSync: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(db.Close)
		logs = &syncBuffer{}
		decode = testDecoder
	})

	// The server starts in JustBeforeEach so specs can swap the decoder first.
	JustBeforeEach(func() {
		logger := slog.New(slog.NewJSONHandler(logs, nil))
		guard := api.Guard{Token: testToken, Hosts: []string{"127.0.0.1"}, Log: logger}
		srv = httptest.NewServer(guard.Protect(api.NewHandler(db, decode, logger)))
		DeferCleanup(srv.Close)
	})

	do := func(method, path, body string) reply {
		GinkgoHelper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+path, r)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+testToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		client := &http.Client{Timeout: 10 * time.Second}
		resp, err := client.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		out := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
		if len(raw) > 0 {
			Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"))
			Expect(json.Unmarshal(raw, &out.body)).To(Succeed(), string(raw))
		}
		Expect(out.raw).NotTo(SatisfyAny(
			ContainSubstring(`"ha1"`), ContainSubstring(`"password"`),
			ContainSubstring(store.HA1("alice@ims.test", "ims.test", "secret")),
		), "credentials never leave the API")
		return out
	}

	expectError := func(r reply, status int, msg string) {
		GinkgoHelper()
		Expect(r.status).To(Equal(status), r.raw)
		Expect(r.body).To(HaveKeyWithValue("error", ContainSubstring(msg)))
	}

	Describe("subscribers", func() {
		It("creates, reads, replaces and deletes", func() {
			r := do("POST", "/api/v1/subscribers", aliceJSON)
			Expect(r.status).To(Equal(http.StatusCreated), r.raw)
			Expect(r.header.Get("Location")).To(Equal("/api/v1/subscribers/alice@ims.test"))
			Expect(r.body).To(HaveKeyWithValue("has_password", true))
			Expect(r.body).To(HaveKeyWithValue("auth_scheme", "SIP Digest"))

			r = do("GET", "/api/v1/subscribers/alice@ims.test", "")
			Expect(r.status).To(Equal(http.StatusOK))
			Expect(r.body).To(HaveKeyWithValue("impus", ConsistOf("sip:alice@ims.test", "tel:+15550001")))

			r = do("PUT", "/api/v1/subscribers/alice@ims.test",
				`{"impus":["sip:alice@ims.test"],"realm":"ims.test","unregistered_services":true}`)
			Expect(r.status).To(Equal(http.StatusOK), r.raw)
			Expect(r.body).To(HaveKeyWithValue("unregistered_services", true))
			stored, err := db.GetSubscriber("alice@ims.test")
			Expect(err).NotTo(HaveOccurred())
			Expect(stored.HA1).To(Equal(store.HA1("alice@ims.test", "ims.test", "secret")), "PUT without credentials keeps HA1")
			_, err = db.LookupIMPU("tel:+15550001")
			Expect(err).To(MatchError(store.ErrNotFound))

			Expect(do("DELETE", "/api/v1/subscribers/alice@ims.test", "").status).To(Equal(http.StatusNoContent))
			expectError(do("GET", "/api/v1/subscribers/alice@ims.test", ""), http.StatusNotFound, "not found")
			expectError(do("DELETE", "/api/v1/subscribers/alice@ims.test", ""), http.StatusNotFound, "not found")
		})

		It("creates with PUT and changes the password", func() {
			r := do("PUT", "/api/v1/subscribers/bob@ims.test", `{"impus":["sip:bob@ims.test"],"realm":"ims.test","password":"a"}`)
			Expect(r.status).To(Equal(http.StatusCreated), r.raw)
			Expect(r.body).To(HaveKeyWithValue("impi", "bob@ims.test"))

			r = do("PUT", "/api/v1/subscribers/bob@ims.test", `{"impi":"bob@ims.test","impus":["sip:bob@ims.test"],"realm":"ims.test","password":"b"}`)
			Expect(r.status).To(Equal(http.StatusOK), r.raw)
			Expect(db.GetSubscriber("bob@ims.test")).To(HaveField("HA1", store.HA1("bob@ims.test", "ims.test", "b")))
		})

		It("pages through subscribers", func() {
			_, _, err := db.Import(context.Background(), store.Generate("u", 1, 5, 1, "ims.test", "p"))
			Expect(err).NotTo(HaveOccurred())

			var impis []string
			next := ""
			for page := 0; ; page++ {
				Expect(page).To(BeNumerically("<", 5), "pagination must end")
				r := do("GET", "/api/v1/subscribers?limit=2&after="+next, "")
				Expect(r.status).To(Equal(http.StatusOK))
				Expect(r.body).To(HaveKeyWithValue("total", BeEquivalentTo(5)))
				for _, s := range r.body["subscribers"].([]any) {
					sub := s.(map[string]any)
					Expect(sub).To(HaveKeyWithValue("has_password", true))
					impis = append(impis, sub["impi"].(string))
				}
				next = r.body["next"].(string)
				if next == "" {
					break
				}
			}
			Expect(impis).To(Equal([]string{"u1@ims.test", "u2@ims.test", "u3@ims.test", "u4@ims.test", "u5@ims.test"}))

			r := do("GET", "/api/v1/subscribers?limit=5000", "")
			Expect(r.status).To(Equal(http.StatusOK))
			Expect(r.body["subscribers"]).To(HaveLen(5))
			Expect(r.body).To(HaveKeyWithValue("next", ""))
		})

		It("lists an empty database as an empty array", func() {
			r := do("GET", "/api/v1/subscribers", "")
			Expect(r.status).To(Equal(http.StatusOK))
			Expect(r.raw).To(ContainSubstring(`"subscribers":[]`))
			Expect(r.body).To(HaveKeyWithValue("total", BeEquivalentTo(0)))
		})

		DescribeTable("rejects bad list parameters",
			func(query string) {
				expectError(do("GET", "/api/v1/subscribers?"+query, ""), http.StatusBadRequest, "limit:")
			},
			Entry("not a number", "limit=ten"),
			Entry("zero", "limit=0"),
			Entry("negative", "limit=-3"),
		)

		DescribeTable("rejects bad subscribers on POST",
			func(body string, status int, msg string) {
				expectError(do("POST", "/api/v1/subscribers", body), status, msg)
				Expect(db.CountSubscribers()).To(Equal(0))
			},
			Entry("empty body", "", http.StatusBadRequest, "a JSON subscriber object is required"),
			Entry("broken JSON", `{"impi":`, http.StatusBadRequest, "request body:"),
			Entry("unknown field", `{"impi":"a@ims.test","impus":["sip:a@ims.test"],"realm":"ims.test","pasword":"x"}`,
				http.StatusBadRequest, `unknown field "pasword"`),
			Entry("wrong type", `{"impi":"a@ims.test","impus":"sip:a@ims.test"}`, http.StatusBadRequest, "impus"),
			Entry("trailing data", aliceJSON+`{}`, http.StatusBadRequest, "unexpected data after the JSON object"),
			Entry("missing impi", `{"impus":["sip:a@ims.test"],"realm":"ims.test","password":"x"}`, http.StatusBadRequest, "impi: required"),
			Entry("bad impu", `{"impi":"a@ims.test","impus":["a@ims.test"],"realm":"ims.test","password":"x"}`,
				http.StatusBadRequest, "impus[0]: must be a sip: or tel: URI"),
			Entry("no credentials", `{"impi":"a@ims.test","impus":["sip:a@ims.test"],"realm":"ims.test"}`,
				http.StatusBadRequest, "password:"),
			Entry("body over 1 MiB", `{"impi":"a@ims.test","service_profile_xml":"`+strings.Repeat("x", 1<<20)+`"}`,
				http.StatusRequestEntityTooLarge, "request body larger than 1048576 bytes"),
		)

		It("answers 409 for an existing IMPI or a taken IMPU", func() {
			Expect(do("POST", "/api/v1/subscribers", aliceJSON).status).To(Equal(http.StatusCreated))
			expectError(do("POST", "/api/v1/subscribers", aliceJSON), http.StatusConflict, "already exists")
			expectError(do("POST", "/api/v1/subscribers", `{"impi":"bob@ims.test","impus":["tel:+15550001"],"realm":"ims.test","password":"x"}`),
				http.StatusConflict, `"tel:+15550001"`)
			expectError(do("PUT", "/api/v1/subscribers/bob@ims.test", `{"impus":["tel:+15550001"],"realm":"ims.test","password":"x"}`),
				http.StatusConflict, "belongs to another subscriber")
		})

		DescribeTable("rejects bad PUTs",
			func(path, body string, status int, msg string) {
				Expect(do("POST", "/api/v1/subscribers", aliceJSON).status).To(Equal(http.StatusCreated))
				expectError(do("PUT", path, body), status, msg)
				Expect(db.GetSubscriber("alice@ims.test")).To(HaveField("Realm", "ims.test"))
			},
			Entry("IMPI mismatch", "/api/v1/subscribers/alice@ims.test",
				`{"impi":"bob@ims.test","impus":["sip:bob@ims.test"],"realm":"ims.test","password":"x"}`,
				http.StatusBadRequest, `impi: "bob@ims.test" in the body does not match "alice@ims.test"`),
			Entry("realm change without password", "/api/v1/subscribers/alice@ims.test",
				`{"impus":["sip:alice@ims.test"],"realm":"other.test"}`, http.StatusBadRequest, "password: required when the realm changes"),
			Entry("invalid subscriber", "/api/v1/subscribers/alice@ims.test",
				`{"impus":["sip:alice@ims.test"],"realm":"ims.test","visited_networks":[""]}`, http.StatusBadRequest, "visited_networks[0]"),
			Entry("unknown field", "/api/v1/subscribers/alice@ims.test", `{"realm":"other.test","x":1}`, http.StatusBadRequest, `unknown field "x"`),
		)
	})

	Describe("registrations", func() {
		BeforeEach(func() {
			Expect(db.PutSubscriber(context.Background(), store.Subscriber{
				IMPI: "alice@ims.test", IMPUs: []string{"sip:alice@ims.test", "tel:+15550001"}, Realm: "ims.test", Password: "secret",
			})).To(Succeed())
		})

		setRestoration := func(blob []byte) {
			_, err := db.Update(context.Background(), "alice@ims.test", func(_ store.Subscriber, reg *store.Registration) error {
				reg.State = store.Registered
				reg.ServerName = "sip:scscf1.ims.test:5060"
				reg.OriginHost = "scscf1.ims.test"
				reg.Restoration = blob
				reg.RestorationAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
				return nil
			})
			Expect(err).NotTo(HaveOccurred())
		}

		It("shows a user that never registered", func() {
			r := do("GET", "/api/v1/subscribers/alice@ims.test/registration", "")
			Expect(r.status).To(Equal(http.StatusOK))
			Expect(r.body).To(SatisfyAll(
				HaveKeyWithValue("impi", "alice@ims.test"),
				HaveKeyWithValue("state", "not_registered"),
				HaveKeyWithValue("server_name", ""),
				HaveKeyWithValue("restoration", BeNil()),
				HaveKeyWithValue("impus", ConsistOf("sip:alice@ims.test", "tel:+15550001")),
			))
		})

		DescribeTable("finds the registration by IMPI and by escaped IMPU",
			func(path string) {
				setRestoration([]byte{0x01, 0x02, 0x03})
				r := do("GET", path, "")
				Expect(r.status).To(Equal(http.StatusOK), r.raw)
				Expect(r.body).To(SatisfyAll(
					HaveKeyWithValue("impi", "alice@ims.test"),
					HaveKeyWithValue("state", "registered"),
					HaveKeyWithValue("server_name", "sip:scscf1.ims.test:5060"),
					HaveKeyWithValue("origin_host", "scscf1.ims.test"),
					HaveKeyWithValue("restoration", HaveKeyWithValue("length", BeEquivalentTo(3))),
					HaveKeyWithValue("restoration_at", "2026-03-01T12:00:00Z"),
					HaveKey("updated_at"),
					Not(HaveKey("restoration_error")),
				))
			},
			Entry("IMPI", "/api/v1/subscribers/alice@ims.test/registration"),
			Entry("IMPI escaped", "/api/v1/subscribers/alice%40ims.test/registration"),
			Entry("SIP IMPU escaped", "/api/v1/impus/sip%3Aalice%40ims.test/registration"),
			Entry("tel IMPU escaped", "/api/v1/impus/tel%3A%2B15550001/registration"),
			Entry("SIP IMPU as is", "/api/v1/impus/sip:alice@ims.test/registration"),
		)

		It("shows the raw bytes in base64 when the decoder fails", func() {
			setRestoration([]byte{0x09, 0x08})
			r := do("GET", "/api/v1/impus/sip%3Aalice%40ims.test/registration", "")
			Expect(r.status).To(Equal(http.StatusOK))
			Expect(r.body).To(HaveKeyWithValue("restoration", base64.StdEncoding.EncodeToString([]byte{0x09, 0x08})))
			Expect(r.body).To(HaveKeyWithValue("restoration_error", "not a restoration AVP"))
		})

		Context("without a decoder", func() {
			BeforeEach(func() { decode = nil })

			It("shows the raw bytes in base64", func() {
				setRestoration([]byte{0x01, 0x02})
				r := do("GET", "/api/v1/subscribers/alice@ims.test/registration", "")
				Expect(r.body).To(HaveKeyWithValue("restoration", "AQI="))
				Expect(r.body).NotTo(HaveKey("restoration_error"))
			})
		})

		It("answers 404 for unknown identities", func() {
			expectError(do("GET", "/api/v1/subscribers/bob@ims.test/registration", ""), http.StatusNotFound, "not found")
			expectError(do("GET", "/api/v1/impus/sip%3Abob%40ims.test/registration", ""), http.StatusNotFound, `"sip:bob@ims.test"`)
		})
	})

	Describe("HTTP plumbing", func() {
		It("answers unknown paths with a JSON 404", func() {
			expectError(do("GET", "/api/v2/subscribers", ""), http.StatusNotFound, "no such endpoint")
			expectError(do("GET", "/api/v1/subscribers/a@ims.test/registration/extra", ""), http.StatusNotFound, "no such endpoint")
		})

		DescribeTable("answers other methods with a JSON 405 and Allow",
			func(method, path, allow string) {
				r := do(method, path, "")
				expectError(r, http.StatusMethodNotAllowed, "method "+method+" not allowed")
				Expect(r.header.Get("Allow")).To(Equal(allow))
			},
			Entry(nil, "DELETE", "/api/v1/subscribers", "GET, HEAD, POST"),
			Entry(nil, "POST", "/api/v1/subscribers/a@ims.test", "GET, HEAD, PUT, DELETE"),
			Entry(nil, "PUT", "/api/v1/impus/sip:a@ims.test/registration", "GET, HEAD"),
		)

		It("logs one line per request", func() {
			do("POST", "/api/v1/subscribers", aliceJSON)
			do("GET", "/api/v1/impus/sip%3Aalice%40ims.test/registration", "")
			do("GET", "/api/v1/subscribers/nobody@ims.test", "")
			lines := logs.lines()
			Expect(lines).To(HaveLen(3))
			Expect(lines[0]).To(SatisfyAll(HaveKeyWithValue("method", "POST"), HaveKeyWithValue("status", BeEquivalentTo(201))))
			Expect(lines[1]).To(HaveKeyWithValue("impu", "sip:alice@ims.test"))
			Expect(lines[2]).To(SatisfyAll(
				HaveKeyWithValue("status", BeEquivalentTo(404)),
				HaveKeyWithValue("impi", "nobody@ims.test"),
				HaveKeyWithValue("err", ContainSubstring("not found")),
			))
		})
	})
})

var _ = Describe("Config and Serve", Label("unit"), func() {
	DescribeTable("Validate names the field",
		func(addr, want string) {
			c := api.Config{Addr: addr}
			c.SetDefaults()
			err := c.Validate()
			if want == "" {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry("default", "", ""),
		Entry("any interface", ":8090", ""),
		Entry("no port", "127.0.0.1", "addr:"),
		Entry("bad port", "127.0.0.1:http8", "addr: invalid port"),
	)

	It("defaults to loopback port 8090", func() {
		var c api.Config
		c.SetDefaults()
		Expect(c.Addr).To(Equal("127.0.0.1:8090"))
	})

	It("serves until the context ends", func(ctx SpecContext) {
		db, err := store.Open(GinkgoT().TempDir(), store.Options{NoSync: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(db.Close)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())

		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- api.Serve(sctx, ln, api.NewHandler(db, nil, nil), nil) }()

		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/api/v1/subscribers", nil)
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(resp.Body.Close()).To(Succeed())

		stop()
		Eventually(done).WithContext(ctx).Should(Receive(BeNil()))
	}, SpecTimeout(10*time.Second))
})
