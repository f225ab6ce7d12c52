package hss_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/sm"

	"github.com/imslab/quasipool/internal/nf/hss"
	"github.com/imslab/quasipool/internal/proto/cx"
)

// The HSS benchmark answers the issue's question "how many Cx answers per second, with persistence on, and how
// does that compare with go-diameter doing nothing": the same client load (64 requests in flight, over 1 or 4
// connections) goes to a bare go-diameter echo server and to the real HSS with fsync on, in one run.
//
//	go test -run '^$' -bench BenchmarkCx -benchtime 3s ./internal/nf/hss/

const benchUsers = 1000

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startEcho serves a bare go-diameter state machine that answers every Cx request with Result-Code 2001.
func startEcho(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	mux := sm.New(&sm.Settings{OriginHost: "echo.ims.test", OriginRealm: "ims.test", VendorID: 10415,
		ProductName: "echo", Dict: cx.Dict()})
	echo := diam.HandlerFunc(func(c diam.Conn, m *diam.Message) {
		a := m.Answer(2001)
		if sid, err := m.FindAVP(avp.SessionID, 0); err == nil {
			a.InsertAVP(sid)
		}
		a.NewAVP(avp.AuthSessionState, avp.Mbit, 0, datatype.Enumerated(1))
		a.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity("echo.ims.test"))
		a.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
		_, _ = a.WriteTo(c)
	})
	for _, code := range []uint32{cx.CmdUA, cx.CmdSA, cx.CmdLI, cx.CmdMA} {
		mux.HandleIdx(diam.CommandIndex{AppID: cx.AppID, Code: code, Request: true}, echo)
	}
	go func() {
		for range mux.ErrorReports() {
		}
	}()
	srv := &diam.Server{Handler: mux, Dict: cx.Dict(), MaxConcurrentHandlers: 256}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close(); _ = ln.Close() })
	return ln.Addr().String()
}

// startBenchHSS runs the real HSS (fsync on) with the lab's subscribers, benchUsers of them registered.
func startBenchHSS(b *testing.B) string {
	dir := b.TempDir()
	cfg := hss.DefaultConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.LabSubscribers = true
	cfg.AllowAnyPeer = true // the load client is one unlisted host sending every command
	dl, _ := net.Listen("tcp", "127.0.0.1:0")
	hl, _ := net.Listen("tcp", "127.0.0.1:0")
	node, err := hss.New(cfg, hss.WithListeners(dl, hl), hss.WithLogger(quiet()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	select {
	case <-node.Ready():
	case err := <-done:
		b.Fatal(err)
	}
	c := benchClient(b, node.DiameterAddr(), 0)
	for i := 1; i <= benchUsers; i++ {
		if _, err := c.ServerAssignment(context.Background(), benchSAR(i, cx.SATRegistration)); err != nil {
			b.Fatal(err)
		}
	}
	return node.DiameterAddr()
}

func benchClient(b *testing.B, addr string, i int) *cx.Client {
	c, err := cx.NewClient(cx.ClientConfig{Addr: addr, OriginHost: fmt.Sprintf("scscf%d.ims.test", i), OriginRealm: "ims.test",
		DestinationRealm: "ims.test", RequestTimeout: 10 * time.Second}, cx.WithClientLogger(quiet()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = c.Run(ctx) }()
	b.Cleanup(cancel)
	select {
	case <-c.Connected():
	case <-time.After(5 * time.Second):
		b.Fatal("client did not connect")
	}
	// Bare go-diameter with concurrent handlers silently drops a request that races the CER handler (the HSS
	// guards against it); one answered request per connection before timing keeps the echo baseline honest.
	for i := 0; ; i++ {
		wctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := c.LocationInfo(wctx, &cx.LIR{PublicIdentity: "sip:user0001@ims.test"})
		cancel()
		if _, ok := cx.ResultOf(err); err == nil || ok {
			break
		}
		if i == 10 {
			b.Fatalf("warm-up: %v", err)
		}
	}
	return c
}

func benchSAR(i int, sat cx.ServerAssignmentType) *cx.SAR {
	impi := fmt.Sprintf("user%04d@ims.test", i)
	return &cx.SAR{UserName: impi, PublicIdentities: []string{"sip:" + impi}, ServerName: "sip:scscf1.ims.test",
		AssignmentType: sat, UserDataAlreadyAvailable: true,
		Restoration: &cx.SCSCFRestorationInfo{UserName: impi, AuthScheme: cx.SchemeSIPDigest,
			RegistrationTimeOut: time.Now().Add(time.Hour),
			Registrations: []cx.RestorationInfo{{Path: "<sip:term@pcscf1.ims.test;lr>",
				Contact: fmt.Sprintf("<sip:ue%d@bac.ims.test>;expires=3600", i), CallID: fmt.Sprintf("reg-%d", i), InitialCSeq: 1}}}}
}

type benchOp func(ctx context.Context, c *cx.Client, i int) error

var benchOps = []struct {
	name string
	op   benchOp
}{
	{"UAR", func(ctx context.Context, c *cx.Client, i int) error {
		impi := fmt.Sprintf("user%04d@ims.test", i)
		_, err := c.UserAuthorization(ctx, &cx.UAR{UserName: impi, PublicIdentity: "sip:" + impi, VisitedNetworkIdentifier: "ims.test"})
		return err
	}},
	{"LIR-UAT2", func(ctx context.Context, c *cx.Client, i int) error {
		t := cx.UATRegistrationAndCapabilities
		_, err := c.LocationInfo(ctx, &cx.LIR{PublicIdentity: fmt.Sprintf("sip:user%04d@ims.test", i), AuthorizationType: &t})
		return err
	}},
	{"SAR-RE_REGISTRATION", func(ctx context.Context, c *cx.Client, i int) error {
		_, err := c.ServerAssignment(ctx, benchSAR(i, cx.SATReRegistration))
		return err
	}},
}

func BenchmarkCx(b *testing.B) {
	for _, target := range []string{"echo", "hss"} {
		for _, conns := range []int{1, 4} {
			for _, op := range benchOps {
				b.Run(fmt.Sprintf("%s/%s/conns=%d", target, op.name, conns), func(b *testing.B) {
					var addr string
					if target == "echo" {
						addr = startEcho(b)
					} else {
						addr = startBenchHSS(b)
					}
					clients := make([]*cx.Client, conns)
					for i := range clients {
						clients[i] = benchClient(b, addr, i+1)
					}
					var seq, failed atomic.Int64
					var firstErr atomic.Value
					b.SetParallelism(32) // 64 requests in flight on 2 cores
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						ctx := context.Background()
						for pb.Next() {
							n := seq.Add(1)
							c := clients[int(n)%len(clients)]
							if err := op.op(ctx, c, int(n%benchUsers)+1); err != nil {
								if _, ok := cx.ResultOf(err); !ok || target == "hss" {
									failed.Add(1)
									firstErr.CompareAndSwap(nil, err.Error())
								}
							}
						}
					})
					b.StopTimer()
					if f := failed.Load(); f > 0 {
						b.Fatalf("%d requests failed, first: %v", f, firstErr.Load())
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "answers/s")
				})
			}
		}
	}
}
