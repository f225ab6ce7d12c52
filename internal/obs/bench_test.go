package obs_test

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/imslab/quasipool/internal/obs"
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
