package obs_test

import (
	"encoding/json"
	"io"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// BenchmarkTraceRecord is the cost of recording one SIP datagram (what every node pays per message sent or
// received).
func BenchmarkTraceRecord(b *testing.B) {
	t, err := obs.OpenTracer(filepath.Join(b.TempDir(), "bac.pcapng"), "bac", -1)
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	src, dst := netip.MustParseAddrPort("127.0.0.1:5060"), netip.MustParseAddrPort("127.0.0.1:5061")
	msg := []byte(invite)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		t.RecordAddr("sip", "out", src, dst, msg)
	}
}

// BenchmarkTraceJSONLine is what the trace cost before it became pcapng: one JSON line with a base64 payload per
// message (encoding only, without the write), kept as the yardstick for BenchmarkTraceRecord.
func BenchmarkTraceJSONLine(b *testing.B) {
	msg := []byte(invite)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		_, _ = json.Marshal(obs.TraceLine{TNs: time.Now().UnixNano(), Node: "bac", Proto: "sip", Dir: "out",
			Src: "127.0.0.1:5060", Dst: "127.0.0.1:5061", Data: msg})
	}
}

// BenchmarkRecorderEmit is the cost of one event line as the forwarder records it per client transaction
// (sip_tx), written to a file.
func BenchmarkRecorderEmit(b *testing.B) {
	r, err := obs.OpenRecorder(filepath.Join(b.TempDir(), "events.jsonl"), "pcscf1")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ReportAllocs()
	for b.Loop() {
		r.Emit(obs.SIPTx{Method: "INVITE", CallID: "a84b4c76e66710@pc33.ims.test", Peer: "scscf1.ims.test",
			Addr: "127.0.0.1:5070", Status: 200, LatencyUs: 1234})
	}
}

// BenchmarkRecorderEmitDiscard is BenchmarkRecorderEmit without the write system call: the encoder alone.
func BenchmarkRecorderEmitDiscard(b *testing.B) {
	r := obs.NewRecorder(io.Discard, "pcscf1")
	b.ReportAllocs()
	for b.Loop() {
		r.Emit(obs.SIPTx{Method: "INVITE", CallID: "a84b4c76e66710@pc33.ims.test", Peer: "scscf1.ims.test",
			Addr: "127.0.0.1:5070", Status: 200, LatencyUs: 1234})
	}
}

// BenchmarkRecorderEmitVarying is BenchmarkRecorderEmitDiscard with values known only at run time, as a node has
// them (the event escapes to the heap once).
func BenchmarkRecorderEmitVarying(b *testing.B) {
	r := obs.NewRecorder(io.Discard, "pcscf1")
	ids := []string{"a84b4c76e66710@pc33.ims.test", "b84b4c76e66710@pc33.ims.test"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		r.Emit(obs.SIPTx{Method: "INVITE", CallID: ids[i&1], Peer: "scscf1.ims.test", Addr: "127.0.0.1:5070",
			Status: 200 + i&1, LatencyUs: int64(i)})
	}
}
