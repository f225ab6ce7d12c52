package obs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// at is the instant the recorders of these specs write.
var at = time.Date(2026, 12, 7, 8, 0, 1, 120_000_000, time.UTC)

// emitted is the line a recorder of node pcscf1 writes for ev at the instant at.
func emitted(ev obs.Event) string {
	var buf bytes.Buffer
	obs.NewRecorderAt(&buf, "pcscf1", func() time.Time { return at }).Emit(ev)
	return buf.String()
}

// reference is what the recorder wrote for ev when events were maps: json.Marshal of a map holding the event's
// fields (as encoding/json writes the struct, so omitempty applies) and the envelope keys, at the line's t_ns.
func reference(line string, ev obs.Event) string {
	GinkgoHelper()
	var head struct {
		TNs int64 `json:"t_ns"`
	}
	Expect(json.Unmarshal([]byte(line), &head)).To(Succeed(), line)
	b, err := json.Marshal(ev)
	Expect(err).NotTo(HaveOccurred())
	fields := map[string]json.RawMessage{}
	Expect(json.Unmarshal(b, &fields)).To(Succeed())
	m := map[string]any{}
	for k, v := range fields {
		m[k] = v
	}
	t := time.Unix(0, head.TNs)
	m["ts"], m["t_ns"], m["node"], m["kind"] = t.UTC().Format(time.RFC3339Nano), t.UnixNano(), "pcscf1", ev.Kind()
	want, err := json.Marshal(m)
	Expect(err).NotTo(HaveOccurred())
	return string(want) + "\n"
}

// filled returns a value of the event type t with every field set (strings s, numbers n, booleans true, one
// element in slices), as a pointer to it.
func filled(t reflect.Type, s string, n float64) reflect.Value {
	p := reflect.New(t)
	fill(p.Elem(), s, n)
	return p
}

func fill(v reflect.Value, s string, n float64) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint(uint64(n))
	case reflect.Float64, reflect.Float32:
		v.SetFloat(n + 0.25)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), s, n)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"phones":4,"cpu_share":0.5}`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), s, n)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), s, n)
		}
	default:
		Fail("fill: no value for " + v.Type().String())
	}
}

var _ = Describe("Recorder.Emit", Label("unit"), func() {
	// Every line must be byte for byte what json.Marshal of the event's map wrote before events were typed, so
	// readers (reports, checks, scripts, old tools) see no difference.
	It("writes every kind of the catalogue as json.Marshal of its map did, zero and filled", func() {
		for _, k := range obs.Kinds() {
			zero := reflect.New(k.Type).Elem().Interface().(obs.Event)
			line := emitted(zero)
			Expect(line).To(Equal(reference(line, zero)), k.Kind)
			for _, x := range []struct {
				s string
				n float64
			}{{"scscf1.ims.test", 1234}, {`<sip:a@b;lr> & "x" \ y`, -7}, {"a\u2028b\u2029c é ☎ 𝄞", 1e21}} {
				ev := filled(k.Type, x.s, x.n).Elem().Interface().(obs.Event)
				line := emitted(ev)
				Expect(line).To(Equal(reference(line, ev)), k.Kind)
			}
		}
	})
	DescribeTable("writes strings and numbers as encoding/json does",
		func(ev obs.Event) {
			line := emitted(ev)
			Expect(line).To(Equal(reference(line, ev)))
		},
		Entry("a forwarder's sip_tx", obs.SIPTx{Method: "INVITE", CallID: "a84b4c76e66710@pc33.ims.test",
			Peer: "scscf1.ims.test", Addr: "127.0.0.1:5070", Status: 200, LatencyUs: 1234}),
		Entry("control characters", obs.SIPPanic{Panic: func() string {
			var b strings.Builder
			for c := range 0x20 {
				b.WriteByte(byte(c))
			}
			return b.String() + "\x7f"
		}()}),
		Entry("invalid UTF-8", obs.SIPPanic{Panic: "a\xffb\xc3"}),
		Entry("extreme integers", obs.Overload{Shed: math.MaxUint64, InFlight: math.MinInt64}),
		Entry("floats", obs.PeerRTT{MinMs: 1e-7, P50Ms: 0.1, MaxMs: 1e21}),
		Entry("more floats", obs.PeerRTT{MinMs: 5e-324, P50Ms: 123456789.125, MaxMs: -1.5e-6}),
		Entry("a pointer to zero", obs.CxAnswer{Cmd: "UAR", UAT: new(int)}),
		Entry("nested values", obs.Links{Links: []obs.SiteLink{{Link: "north–south", Nodes: 3, DelayMs: 20}}}),
	)
	It("writes nothing for an event json.Marshal cannot encode, as before", func() {
		Expect(emitted(obs.PeerRTT{MinMs: math.NaN()})).To(BeEmpty())
		Expect(emitted(obs.Resource{CPUS: math.Inf(1)})).To(BeEmpty())
	})
	It("keeps lines apart when events are emitted concurrently", func() {
		var buf bytes.Buffer
		r := obs.NewRecorder(&buf, "bac")
		done := make(chan struct{})
		for g := range 4 {
			go func() {
				defer GinkgoRecover()
				for i := range 200 {
					r.Emit(obs.SIPTx{Status: g, LatencyUs: int64(i), CallID: strings.Repeat("x", i)})
				}
				done <- struct{}{}
			}()
		}
		for range 4 {
			<-done
		}
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		Expect(lines).To(HaveLen(800))
		for _, l := range lines {
			_, _, err := obs.DecodeEvent([]byte(l))
			Expect(err).NotTo(HaveOccurred(), l)
		}
	})
})

var _ = Describe("DecodeEvent", Label("unit"), func() {
	It("reads back every kind of the catalogue as the value written", func() {
		for _, k := range obs.Kinds() {
			for _, ev := range []obs.Event{reflect.New(k.Type).Elem().Interface().(obs.Event),
				filled(k.Type, "x<y>", 42).Elem().Interface().(obs.Event)} {
				line := emitted(ev)
				env, got, err := obs.DecodeEvent([]byte(line))
				Expect(err).NotTo(HaveOccurred(), line)
				Expect(env.Kind).To(Equal(k.Kind))
				Expect(env.Node).To(Equal("pcscf1"))
				Expect(env.TNs).To(Equal(at.UnixNano()))
				Expect(env.TS).To(Equal("2026-12-07T08:00:01.12Z"))
				Expect(got).To(BeAssignableToTypeOf(ev))
				// Slices and pointers that omitempty left out come back nil: compare the lines they write.
				Expect(emitted(got)).To(Equal(line), k.Kind)
				if reflect.DeepEqual(ev, reflect.New(k.Type).Elem().Interface()) {
					continue
				}
				Expect(got).To(Equal(ev), k.Kind)
			}
		}
	})
	It("rejects an unknown kind, naming it", func() {
		_, _, err := obs.DecodeEvent([]byte(`{"ts":"2026-12-07T08:00:00Z","t_ns":1,"node":"pcscf1","kind":"sip_txx"}`))
		Expect(err).To(MatchError(ContainSubstring(`unknown event kind "sip_txx"`)))
		Expect(errors.Is(err, obs.ErrUnknownKind)).To(BeTrue())
	})
	DescribeTable("rejects a malformed line, saying why",
		func(line, why string) {
			_, _, err := obs.DecodeEvent([]byte(line))
			Expect(errors.Is(err, obs.ErrMalformed)).To(BeTrue(), "%v", err)
			Expect(err).To(MatchError(ContainSubstring(why)))
		},
		Entry("torn by a kill", `{"ts":"2026-12-07T08:00:00Z","t_ns":1,"node":"pcscf1","kind":"sip_tx","met`, "unexpected end"),
		Entry("not JSON", `hello`, "invalid character"),
		Entry("no kind", `{"t_ns":1,"node":"pcscf1"}`, "no kind"),
		Entry("a field of the wrong type", `{"t_ns":1,"node":"pcscf1","kind":"sip_tx","status":"200"}`,
			"kind sip_tx: json: cannot unmarshal string into Go struct field SIPTx.status of type int"),
	)
})
