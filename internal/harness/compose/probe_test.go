package compose_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/netns"
)

// answerOptions answers every OPTIONS on c with 200 OK (the Via, From, To, Call-ID and CSeq echoed), until c is
// closed.
func answerOptions(c net.PacketConn) {
	buf := make([]byte, 65535)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		var hdrs []string
		for _, l := range strings.Split(string(buf[:n]), "\r\n")[1:] {
			for _, h := range []string{"Via:", "From:", "To:", "Call-ID:", "CSeq:"} {
				if strings.HasPrefix(l, h) {
					hdrs = append(hdrs, l)
				}
			}
		}
		_, _ = c.WriteTo([]byte("SIP/2.0 200 OK\r\n"+strings.Join(hdrs, "\r\n")+"\r\nContent-Length: 0\r\n\r\n"), from)
	}
}

var _ = Describe("the lab's readiness probe", Label("netns"), func() {
	It("probes a SIP node from inside its network namespace, where the host cannot reach it", func() {
		if err := netns.Check(); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_NETNS") != "" {
				Fail("network namespaces are required (IMSLAB_REQUIRE_NETNS is set): " + err.Error())
			}
			Skip(err.Error())
		}
		ns := fmt.Sprintf("imslab-probetest-%d", os.Getpid())
		run := func(args ...string) {
			GinkgoHelper()
			out, err := exec.Command("ip", args...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "ip %s: %s", strings.Join(args, " "), out)
		}
		run("netns", "add", ns)
		DeferCleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		run("-n", ns, "link", "set", "lo", "up")

		// A SIP responder on the namespace's own loopback: a port the host's loopback does not have.
		var c net.PacketConn
		Expect(netns.Do(ns, func() (err error) {
			c, err = net.ListenPacket("udp", "127.0.0.1:0")
			return err
		})).To(Succeed())
		DeferCleanup(c.Close)
		go answerOptions(c)
		addr := c.LocalAddr().String()

		Expect(compose.ProbeIn("/run/netns/"+ns, compose.ProbeSIP, addr, "", time.Second)).To(Succeed())
		err := compose.Probe(compose.ProbeSIP, addr, "", 300*time.Millisecond)
		Expect(err).To(HaveOccurred(), "from the host's namespace the same address answers nothing")

		// A namespace that is gone (a container that exited) is an error naming it, not a hang.
		err = compose.ProbeIn("/proc/999999999/ns/net", compose.ProbeSIP, addr, "", time.Second)
		Expect(err).To(MatchError(ContainSubstring("/proc/999999999/ns/net")))
	})
})
