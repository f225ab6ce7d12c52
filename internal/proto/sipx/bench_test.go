package sipx_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// benchEndpoint binds and serves an endpoint until the benchmark ends.
func benchEndpoint(b *testing.B, host string, setup func(*sipx.Endpoint)) *sipx.Endpoint {
	b.Helper()
	ep, err := sipx.NewEndpoint(host, "127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	setup(ep)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ep.Serve(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	select {
	case <-ep.Listening():
	case <-time.After(5 * time.Second):
		b.Fatal("endpoint did not start")
	}
	return ep
}

// BenchmarkProxyRelay measures one stateful proxy hop the way every node of the lab relays a request: a client
// sends a MESSAGE to a sipx.Proxy, whose handler forwards it through the Forwarder (SRV lookup, health, client
// transaction, Via and Route handling) to a downstream peer that answers 200, and the proxy relays the answer
// back. One op is one whole transaction: the client's send and response parse, the proxy's two parses, two sends
// and its transactions, the peer's parse and answer — all in this process, so ns/op and allocs/op are an upper
// bound of the per-hop cost (the client and the peer are counted too).
//
// Sub-benchmarks: "bare" records nothing (the framework's own cost); "node" records what a lab node records by
// default, an event per finished client transaction (events.jsonl) and every datagram of the proxy in the
// pcapng trace (0 = the nodes' default size bound), both in files of the benchmark's temporary directory.
func BenchmarkProxyRelay(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchProxyRelay(b, false) })
	b.Run("node", func(b *testing.B) { benchProxyRelay(b, true) })
}

func benchProxyRelay(b *testing.B, record bool) {
	var rec *obs.Recorder
	var tracer *obs.Tracer
	if record {
		var err error
		dir := b.TempDir()
		if rec, err = obs.OpenRecorder(filepath.Join(dir, "events.jsonl"), "pcscf1"); err != nil {
			b.Fatal(err)
		}
		if tracer, err = obs.OpenTracer(filepath.Join(dir, "trace", "pcscf1.pcapng"), "pcscf1", 0); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tracer.Close(); _ = rec.Close() })
	}
	var answered atomic.Int64
	sink := benchEndpoint(b, "scscf2.ims.test", func(ep *sipx.Endpoint) {
		ep.Server.OnMessage(func(req *sip.Request, tx sip.ServerTransaction) {
			_ = tx.Respond(sip.NewResponseFromRequest(req, 200, "OK", nil))
			answered.Add(1)
		})
	})
	res := pool.NewStaticResolver().SetSRV("_sip._udp.scscf2.ims.test",
		pool.Target{Name: "scscf2.ims.test", Addr: sink.Addr, Priority: 1, Weight: 10})
	var px *sipx.Proxy
	proxy := benchEndpoint(b, "pcscf1.ims.test", func(ep *sipx.Endpoint) {
		if tracer != nil {
			ep.Trace(tracer)
		}
		px = sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Rec: rec, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1},
			sipx.ForwarderConfig{}, "pcscf1.ims.test")
		px.Serve(sipx.Handlers{Request: func(r *sipx.Request) {
			px.Finish(r.Tx, r.Req, px.Fwd.Forward(r.Ctx, r.Tx, r.Out, sipx.SRVHop("scscf2.ims.test")))
		}})
	})
	client := benchEndpoint(b, "ue.example", func(*sipx.Endpoint) {})

	send := func(i int) error {
		u := sip.Uri{Scheme: "sip", User: "user0002", Host: "ims.test"}
		req := sip.NewRequest(sip.MESSAGE, u)
		req.AppendHeader(sip.NewHeader("From", "<sip:user0001@ims.test>;tag=b"+strconv.Itoa(i)))
		req.AppendHeader(sip.NewHeader("To", "<sip:user0002@ims.test>"))
		req.AppendHeader(sip.NewHeader("Call-ID", fmt.Sprintf("bench-%d@ue", i)))
		req.AppendHeader(sip.NewHeader("CSeq", "1 MESSAGE"))
		req.AppendHeader(sip.NewHeader("Max-Forwards", "70"))
		req.PrependHeader(client.Via())
		client.Bind(req)
		req.SetDestination(proxy.Addr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tx, err := client.Client.TransactionRequest(ctx, req, func(*sipgo.Client, *sip.Request) error { return nil })
		if err != nil {
			return err
		}
		defer tx.Terminate()
		for {
			select {
			case r := <-tx.Responses():
				if r == nil || r.IsProvisional() {
					continue
				}
				if r.StatusCode != 200 {
					return fmt.Errorf("status %d", r.StatusCode)
				}
				return nil
			case <-tx.Done():
				return fmt.Errorf("transaction ended: %v", tx.Err())
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if err := send(-1); err != nil { // warm up (SRV, health)
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() {
		// The process's CPU time per op: unlike ns/op (wall time), it does not grow when other work shares the core.
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	}()
	var n atomic.Int64
	b.SetParallelism(8) // several transactions in flight, as in a loaded lab
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := send(int(n.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// processCPU is the user + system CPU time of this process (all threads) so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
