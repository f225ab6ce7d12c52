package udpbuf_test

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/imslab/quasipool/internal/runtime/udpbuf"
)

var _ = Describe("UDP receive buffers", Label("unit"), func() {
	listen := func() *net.UDPConn {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Close)
		return c
	}
	port := func(c *net.UDPConn) int { return c.LocalAddr().(*net.UDPAddr).Port }

	It("grows a socket's receive buffer beyond net.core.rmem_max when running as root", func() {
		if os.Geteuid() != 0 {
			Skip("SO_RCVBUFFORCE needs root (CI and the lab run as root)")
		}
		got, forced, err := udpbuf.Size(listen(), udpbuf.DefaultSize)
		Expect(err).NotTo(HaveOccurred())
		Expect(forced).To(BeTrue())
		Expect(got).To(BeNumerically(">=", udpbuf.DefaultSize)) // the kernel reports twice what it was given
	})

	It("refuses what is not a UDP socket", func() {
		ln, err := net.ListenPacket("unixgram", "")
		if err != nil {
			Skip("no unixgram sockets here: " + err.Error())
		}
		defer ln.Close()
		_, _, err = udpbuf.Size(ln, udpbuf.DefaultSize)
		Expect(err).To(MatchError(ContainSubstring("not a UDP socket")))
	})

	It("counts the datagrams the kernel dropped at a full socket, as the kernel's own table shows them", func() {
		c := listen()
		// The smallest buffer the kernel grants: a few datagrams fill it, and nobody reads.
		rc, err := c.SyscallConn()
		Expect(err).NotTo(HaveOccurred())
		Expect(rc.Control(func(fd uintptr) {
			Expect(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 1)).To(Succeed())
		})).To(Succeed())
		before, ok, err := udpbuf.Drops(port(c))
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeTrue())
		Expect(before).To(BeZero())

		var seen atomic.Uint64
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			udpbuf.Watch(ctx, port(c), 50*time.Millisecond, func(delta, total uint64) { seen.Store(total) })
		}()
		time.Sleep(100 * time.Millisecond) // Watch has read its base

		s, err := net.DialUDP("udp", nil, c.LocalAddr().(*net.UDPAddr))
		Expect(err).NotTo(HaveOccurred())
		defer s.Close()
		for range 200 {
			_, _ = s.Write(make([]byte, 500))
		}
		Eventually(func() uint64 { n, _, _ := udpbuf.Drops(port(c)); return n }).WithTimeout(2 * time.Second).
			Should(BeNumerically(">", 100))
		Eventually(seen.Load).WithTimeout(2 * time.Second).Should(BeNumerically(">", 100))
		cancel()
		Eventually(done).Should(BeClosed())
	})

	It("does not find a port nobody listens on", func() {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		Expect(err).NotTo(HaveOccurred())
		p := port(c)
		Expect(c.Close()).To(Succeed())
		_, ok, err := udpbuf.Drops(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(ok).To(BeFalse())
	})
})

var _ = Describe("the wanted buffer size", Label("unit"), func() {
	It("is DefaultSize unless IMSLAB_UDP_RCVBUF gives bytes (0: the kernel's default)", func() {
		GinkgoT().Setenv(udpbuf.EnvSize, "")
		Expect(udpbuf.Wanted()).To(Equal(udpbuf.DefaultSize))
		GinkgoT().Setenv(udpbuf.EnvSize, "0")
		Expect(udpbuf.Wanted()).To(Equal(0))
		GinkgoT().Setenv(udpbuf.EnvSize, "1048576")
		Expect(udpbuf.Wanted()).To(Equal(1 << 20))
		GinkgoT().Setenv(udpbuf.EnvSize, "lots")
		Expect(udpbuf.Wanted()).To(Equal(udpbuf.DefaultSize))
	})
})
