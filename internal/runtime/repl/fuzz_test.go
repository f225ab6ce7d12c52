package repl

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

type fuzzState struct {
	mu  sync.Mutex
	got []Message
}

func (s *fuzzState) Apply(m Message) { s.mu.Lock(); s.got = append(s.got, m); s.mu.Unlock() }
func (s *fuzzState) Snapshot() []Message {
	return []Message{{Op: OpPut, Key: "user0001@ims.test", Data: []byte(`{}`)}}
}

// FuzzServe feeds arbitrary bytes to a member's replication listener, as a peer (or anything else that connects)
// could: it must neither panic nor hang, and apply only well-formed put and delete messages from its peer.
func FuzzServe(f *testing.F) {
	f.Add([]byte(`{"op":"put","from":"pcscf2","key":"sip:user0001@ims.test","data":{"impu":"x"}}` + "\n"))
	f.Add([]byte(`{"op":"hello","from":"pcscf2","key":"127.0.0.1:1"}` + "\n" + `{"op":"delete","key":"k"}` + "\n"))
	f.Add([]byte("not json\n{\"op\":\n\x00\xff"))
	f.Add([]byte(`{"op":"put","data":[1,2,3]}`))
	f.Add([]byte(`{"op":"put","from":"mallory","key":"k","data":1}` + "\n"))
	f.Add([]byte(`{"op":"put","from":"pcscf2","key":"k"}` + "\n" + `{"op":"put","from":"pcscf3","key":"k"}` + "\n"))
	// Longer than MaxMessage, with and without a newline (seeded, so the fuzzer need not minimise a huge input
	// to reach it).
	f.Add([]byte(`{"op":"put","from":"pcscf2","key":"` + strings.Repeat("k", 2<<10) + `"}` + "\n"))
	f.Add([]byte(strings.Repeat("<", 2<<10)))
	f.Fuzz(func(t *testing.T, in []byte) {
		st := &fuzzState{}
		r, err := New(Config{Node: "pcscf1", Listen: "127.0.0.1:0", Peers: []string{"127.0.0.1:1"},
			PeerNames: []string{"pcscf2"}, MaxMessage: 1 << 10, IdleTimeout: time.Second,
			// No deferred full copies: each would keep this replicator (its 1 MiB queue) alive for a second after
			// the input, thousands of them a second. Hello storms have their own spec.
			HelloInterval: time.Nanosecond}, st, nil,
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		a, b := net.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() { r.serve(ctx, a, netip.MustParseAddr("127.0.0.1")); close(done) }()
		_, _ = b.Write(in)
		b.Close()
		<-done
		for _, m := range st.got {
			if m.Op != OpPut && m.Op != OpDelete {
				t.Fatalf("a %q reached the state: %+v", m.Op, m)
			}
			if m.From != "pcscf2" {
				t.Fatalf("a message from %q reached the state: %+v", m.From, m)
			}
		}
	})
}
