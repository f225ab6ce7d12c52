package ue_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/ue"
)

// slowConn is a UDP socket whose sends take perWrite each, one at a time: a socket on a machine too busy to keep
// up. Once closed, a send fails at once, as on a real socket.
type slowConn struct {
	net.PacketConn
	perWrite time.Duration
	mu       sync.Mutex
	closed   atomic.Bool
	writes   atomic.Int64
}

func (c *slowConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	time.Sleep(c.perWrite)
	c.writes.Add(1)
	return c.PacketConn.WriteTo(b, addr)
}

func (c *slowConn) Close() error {
	c.closed.Store(true)
	return c.PacketConn.Close()
}

var _ = Describe("Stopping the phones", Label("integration"), func() {
	It("is not held up by the answers still queued for a slow socket", func(ctx SpecContext) {
		fake := startFakeBAC(600)
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		conn := &slowConn{PacketConn: pc, perWrite: 20 * time.Millisecond}
		cfg := ue.DefaultConfig()
		cfg.Manual, cfg.Proxy, cfg.Users.Count = true, fake.addr, 2
		u, err := ue.New(cfg, ue.WithLogger(testLogger().With("node", "ue")), ue.WithPacketConn(conn))
		Expect(err).NotTo(HaveOccurred())
		runCtx, stop := context.WithCancel(context.Background())
		defer stop()
		errc := make(chan error, 1)
		go func() { errc <- u.Run(runCtx) }()
		Eventually(u.Ready()).WithTimeout(10 * time.Second).Should(BeClosed())

		// 300 BYEs for dialogs the phones do not have: 300 answers (481) of 20 ms each, 6 s of sending.
		peer, err := net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		defer peer.Close()
		to, err := net.ResolveUDPAddr("udp", u.Addr())
		Expect(err).NotTo(HaveOccurred())
		for i := range 300 {
			bye := fmt.Sprintf("BYE sip:user0001@%[1]s SIP/2.0\r\n"+
				"Via: SIP/2.0/UDP %[2]s;branch=z9hG4bK-stop-%[3]d\r\nMax-Forwards: 70\r\n"+
				"From: <sip:user0002@ims.test>;tag=a%[3]d\r\nTo: <sip:user0001@ims.test>;tag=b%[3]d\r\n"+
				"Call-ID: stop-%[3]d@test\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n", u.Addr(), peer.LocalAddr(), i)
			_, err := peer.WriteTo([]byte(bye), to)
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(conn.writes.Load).Should(BeNumerically(">=", 5), "the phones are answering the BYEs")

		start := time.Now()
		stop()
		Eventually(errc).WithTimeout(20 * time.Second).Should(Receive(BeNil()))
		Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second),
			"the phones stopped without sending the queued answers first (%d of 300 sent)", conn.writes.Load())
		Expect(conn.writes.Load()).To(BeNumerically("<", 250), "the answers still queued were dropped")
	}, SpecTimeout(40*time.Second))
})
