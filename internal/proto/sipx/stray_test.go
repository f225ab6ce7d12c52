package sipx_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
)

var _ = Describe("Endpoint, stray responses", Label("integration"), func() {
	It("counts a response that matches no transaction, drops it, and does not log it at Info", SpecTimeout(10*time.Second), func(sctx SpecContext) {
		// sipgo logs what its transaction layer drops through slog's default logger: capture it and the node's own.
		var logs syncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		prev := slog.Default()
		slog.SetDefault(logger)
		DeferCleanup(func() { slog.SetDefault(prev) })
		ep, err := sipx.NewEndpoint("node.test", "127.0.0.1:0", logger)
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		go func() { _ = ep.Serve(ctx) }()
		Eventually(ep.Listening()).Should(BeClosed())
		Expect(ep.StrayResponses()).To(BeZero())

		c, err := net.Dial("udp", ep.Addr)
		Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		for i := range 3 { // a callee's 200 OK retransmitted after every transaction for it ended
			msg := fmt.Sprintf("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP %s;branch=z9hG4bK-stray-%d\r\n"+
				"From: <sip:a@ims.test>;tag=1\r\nTo: <sip:b@ims.test>;tag=2\r\nCall-ID: stray-%d\r\n"+
				"CSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n", ep.Addr, i, i)
			_, err = c.Write([]byte(msg))
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(ep.StrayResponses).WithContext(sctx).Should(BeNumerically("==", 3))
		Expect(logs.String()).NotTo(ContainSubstring("Unhandled sip response"))
	})
})

// syncBuffer is a bytes.Buffer safe for the log handler's goroutines and the spec's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
