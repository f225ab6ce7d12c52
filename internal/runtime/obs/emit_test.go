package obs_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

var _ = Describe("Recorder.Emit", Label("unit"), func() {
	// The recorder writes event lines with its own encoder; every line must be byte for byte what json.Marshal of
	// the Event writes, so readers (reports, checks, other tools) see no difference.
	emitted := func(kind string, fields map[string]any) string {
		var buf bytes.Buffer
		obs.NewRecorder(&buf, "pcscf1").Emit(kind, fields)
		return buf.String()
	}
	reference := func(line, kind string, fields map[string]any) string {
		var head struct {
			TNs int64 `json:"t_ns"`
		}
		Expect(json.Unmarshal([]byte(line), &head)).To(Succeed(), line)
		want, err := json.Marshal(obs.Event{Time: time.Unix(0, head.TNs), Node: "pcscf1", Kind: kind, Fields: fields})
		Expect(err).NotTo(HaveOccurred())
		return string(want) + "\n"
	}
	var control strings.Builder
	for c := range 0x20 {
		control.WriteByte(byte(c))
	}
	DescribeTable("writes what json.Marshal of the Event writes",
		func(fields map[string]any) {
			line := emitted("sip_tx", fields)
			Expect(line).To(Equal(reference(line, "sip_tx", fields)))
		},
		Entry("a forwarder's sip_tx", map[string]any{"method": "INVITE", "call_id": "a84b4c76e66710@pc33.ims.test",
			"peer": "scscf1.ims.test", "addr": "127.0.0.1:5070", "status": 200, "latency_us": int64(1234)}),
		Entry("no fields", map[string]any{}),
		Entry("nil fields", nil),
		Entry("HTML and quotes", map[string]any{"reason": `<sip:a@b;lr> & "x" \ y`, "k<&>": "v"}),
		Entry("control characters", map[string]any{"s": control.String() + "\x7f"}),
		Entry("line and paragraph separators, non-ASCII", map[string]any{"s": "a\u2028b\u2029c é ☎ 𝄞"}),
		Entry("invalid UTF-8", map[string]any{"s": "a\xffb\xc3", "\xfe": 1}),
		Entry("numbers of every kind", map[string]any{"i": -1, "i64": int64(math.MinInt64), "i32": int32(7),
			"u": uint(3), "u64": uint64(math.MaxUint64), "u32": uint32(9), "i8": int8(-8), "f": 1.5, "big": 1e21,
			"small": 1e-7, "f32": float32(0.1), "d": 1500 * time.Millisecond}),
		Entry("booleans and null", map[string]any{"t": true, "f": false, "n": nil}),
		Entry("nested values", map[string]any{"summary": map[string]any{"b": 1, "a": []string{"<x>"}},
			"list": []any{1, "two", nil}, "struct": struct {
				A string `json:"a"`
			}{"<"}, "err": errors.New("x"), "raw": json.RawMessage(`{"z": 1,  "y":[ 2 ]}`)}),
		Entry("fields named like the fixed keys", map[string]any{"kind": "other", "node": "x", "ts": 1, "t_ns": "y",
			"z": 1}),
	)
	It("writes nothing for an event json.Marshal cannot encode, as before", func() {
		Expect(emitted("x", map[string]any{"nan": math.NaN()})).To(BeEmpty())
		Expect(emitted("x", map[string]any{"ch": make(chan int)})).To(BeEmpty())
	})
	It("keeps lines apart when events are emitted concurrently", func() {
		var buf bytes.Buffer
		r := obs.NewRecorder(&buf, "bac")
		done := make(chan struct{})
		for g := range 4 {
			go func() {
				defer GinkgoRecover()
				for i := range 200 {
					r.Emit("e", map[string]any{"g": g, "i": i, "pad": strings.Repeat("x", i)})
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
			var m map[string]any
			Expect(json.Unmarshal([]byte(l), &m)).To(Succeed(), l)
		}
	})
})
