package repl_test

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/imslab/quasipool/internal/runtime/repl"
)

// dialFrom connects to addr from the local IP src ("" = any).
func dialFrom(src, addr string) net.Conn {
	d := net.Dialer{Timeout: time.Second}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.Dial("tcp", addr)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = c.Close() })
	return c
}

func line(m repl.Message) []byte {
	b, err := json.Marshal(m)
	Expect(err).NotTo(HaveOccurred())
	return append(b, '\n')
}

func putFrom(from, k, v string) []byte {
	m := putMsg(k, v)
	m.From = from
	return line(m)
}

// readErr is what a read on c gives within 50 ms: nil (data), a timeout (still open) or the end.
func readErr(c net.Conn) func() error {
	return func() error {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 512))
		return err
	}
}

// beClosed matches the read error of a connection the other side has closed.
func beClosed() types.GomegaMatcher {
	return Satisfy(func(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) })
}

func beOpen() types.GomegaMatcher {
	return Satisfy(func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	})
}

// refusals returns the reasons of a member's repl_refused events.
func refusals(m *member) []string {
	var out []string
	for _, l := range strings.Split(m.events.String(), "\n") {
		if !strings.Contains(l, `"kind":"repl_refused"`) {
			continue
		}
		var e struct {
			Reason string `json:"reason"`
			Remote string `json:"remote"`
		}
		Expect(json.Unmarshal([]byte(l), &e)).To(Succeed())
		Expect(e.Remote).NotTo(BeEmpty())
		out = append(out, e.Reason)
	}
	return out
}

var _ = Describe("Replicator, against anything that is not a peer", Label("unit"), func() {
	It("refuses a put from an unknown sender and closes its connection", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		a1, a2 := freeAddr(), freeAddr()
		m1 := start("m1", a1, "m2="+a2)
		c := dialFrom("", a1) // 127.0.0.1: a peer's IP in the local lab; only the name tells
		_, err := c.Write(putFrom("mallory", "user0001", "evil"))
		Expect(err).NotTo(HaveOccurred())
		Eventually(readErr(c)).Should(beClosed())
		Expect(m1.st.get()).To(BeEmpty())
		Expect(m1.r.Refused()).To(BeEquivalentTo(1))
		Eventually(func() []string { return refusals(m1) }).Should(Equal([]string{"not a peer"}))

		c = dialFrom("", a1) // no From at all
		_, err = c.Write([]byte(`{"op":"put","key":"user0001","data":"evil"}` + "\n"))
		Expect(err).NotTo(HaveOccurred())
		Eventually(readErr(c)).Should(beClosed())
		Expect(m1.st.get()).To(BeEmpty())
	})

	It("refuses a connection from an address that is no peer's, and a peer's name from another peer's address", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		// Loopback aliases stand in for hosts: the peer m2 is at 127.0.0.2, m3 at 127.0.0.1.
		a1 := freeAddr()
		_, port, _ := net.SplitHostPort(freeAddr())
		m1 := start("m1", a1, "m2=127.0.0.2:"+port, "m3=127.0.0.3:"+port)

		c := dialFrom("127.0.0.4", a1)
		Eventually(readErr(c)).Should(beClosed(), "closed before it says anything")
		Eventually(func() []string { return refusals(m1) }).Should(Equal([]string{"not a peer's address"}))

		c = dialFrom("127.0.0.3", a1) // m3's address, m2's name
		_, err := c.Write(putFrom("m2", "user0001", "evil"))
		Expect(err).NotTo(HaveOccurred())
		Eventually(readErr(c)).Should(beClosed())
		Eventually(func() []string { return refusals(m1) }).Should(Equal([]string{"not a peer's address", "not at the peer's address"}))

		c = dialFrom("127.0.0.2", a1) // m2 itself
		_, err = c.Write(putFrom("m2", "user0001", "scscf1"))
		Expect(err).NotTo(HaveOccurred())
		Eventually(m1.st.get).Should(Equal(map[string]string{"user0001": "scscf1"}))
		_, err = c.Write(putFrom("m3", "user0002", "evil")) // then a second name on the same connection
		Expect(err).NotTo(HaveOccurred())
		Eventually(readErr(c)).Should(beClosed())
		Expect(m1.st.get()).To(Equal(map[string]string{"user0001": "scscf1"}))
		Expect(m1.r.Refused()).To(BeEquivalentTo(3))
	})

	It("closes a connection that sends an over-long line, applies nothing of it, and still serves its peers", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		a1, a2 := freeAddr(), freeAddr()
		m1 := startCfg(repl.Config{Node: "m1", Listen: a1, Peers: []string{a2}, PeerNames: []string{"m2"}, MaxMessage: 1 << 10})
		c := dialFrom("", a1)
		_, err := c.Write(putFrom("m2", "user0001", strings.Repeat("x", 4<<10)))
		Expect(err).NotTo(HaveOccurred())
		Eventually(readErr(c)).Should(beClosed())
		Eventually(func() []string { return refusals(m1) }).Should(Equal([]string{"message too long"}))
		Expect(m1.st.get()).To(BeEmpty())

		m2 := startCfg(repl.Config{Node: "m2", Listen: a2, Peers: []string{a1}, PeerNames: []string{"m1"}, MaxMessage: 1 << 10})
		m2.put("user0002", "scscf2")
		Eventually(m1.st.get).Should(Equal(map[string]string{"user0002": "scscf2"}))
	})

	It("refuses connections beyond the cap, and takes new ones when a slot frees", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		a1, a2 := freeAddr(), freeAddr()
		m1 := startCfg(repl.Config{Node: "m1", Listen: a1, Peers: []string{a2}, PeerNames: []string{"m2"}, MaxConns: 2})
		first, second := dialFrom("", a1), dialFrom("", a1)
		third := dialFrom("", a1)
		Eventually(readErr(third)).Should(beClosed())
		Expect(readErr(first)()).To(beOpen())
		Expect(readErr(second)()).To(beOpen())
		Eventually(func() []string { return refusals(m1) }).Should(Equal([]string{"too many connections"}))

		Expect(first.Close()).To(Succeed())
		Eventually(func() error { return readErr(dialFrom("", a1))() }).Should(beOpen())
	})

	It("closes an incoming connection that stays silent for the idle timeout", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		a1, a2 := freeAddr(), freeAddr()
		startCfg(repl.Config{Node: "m1", Listen: a1, Peers: []string{a2}, PeerNames: []string{"m2"}, IdleTimeout: 300 * time.Millisecond})
		c := dialFrom("", a1)
		opened := time.Now()
		Eventually(readErr(c), 3*time.Second).Should(beClosed())
		Expect(time.Since(opened)).To(BeNumerically(">=", 250*time.Millisecond), "not before the idle timeout")
	})

	It("answers a storm of hellos with at most one full copy per interval", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		a1, a2 := freeAddr(), freeAddr()
		m1 := startCfg(repl.Config{Node: "m1", Listen: a1, Peers: []string{a2}, PeerNames: []string{"m2"},
			HelloInterval: 500 * time.Millisecond})
		m1.put("user0001", "scscf1")
		c := dialFrom("", a1)
		for range 500 {
			_, err := c.Write(line(repl.Message{Op: repl.OpHello, From: "m2", Key: a2}))
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() int { return strings.Count(m1.events.String(), `"op":"hello"`) }).
			Should(BeNumerically(">=", 500), "every hello read (repl_recv) and one sent")
		Eventually(m1.st.snaps.Load).Should(BeEquivalentTo(2), "one at once, one for the rest at the end of the interval")
		Consistently(m1.st.snaps.Load, 800*time.Millisecond).Should(BeEquivalentTo(2))
		Expect(readErr(c)()).To(beOpen(), "a peer's hello is not a refusal")
	})
})
