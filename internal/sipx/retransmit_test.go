package sipx_test

import (
	"net"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/pool"
	"github.com/imslab/quasipool/internal/sipx"
	"github.com/imslab/quasipool/internal/sipx/sipxtest"
)

var _ = Describe("Forwarder (2xx retransmissions, RFC 6026)", Label("unit"), func() {
	It("forwards every retransmission of a 2xx to an INVITE upstream, so that a lost 200 OK does not lose the call", SpecTimeout(15e9), func(_ SpecContext) {
		// The callee answers 200 and retransmits it twice, as a UAS does until its ACK comes.
		callee := sipxtest.Bind("callee.example")
		callee.Server.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) {
			res := sip.NewResponseFromRequest(req, 200, "OK", nil)
			res.To().Params.Add("tag", "callee1")
			_ = tx.Respond(res)
			for range 2 {
				time.Sleep(300 * time.Millisecond)
				_ = tx.Respond(res)
			}
		})
		sipxtest.Serve(callee)
		res := pool.NewStaticResolver().SetSRV("_sip._udp.callee.example",
			pool.Target{Name: "callee.example", Addr: callee.Addr, Priority: 1, Weight: 10})
		ep := sipxtest.Bind("pcscf1.ims.test")
		px := sipx.NewProxy(sipx.Deps{EP: ep, Res: res, Rec: sipxtest.NewEvents("pcscf1").Rec, Log: sipxtest.Log(), Seed: 1},
			sipx.ForwarderConfig{}, "pcscf1.ims.test")
		px.Serve(sipx.Handlers{Request: func(r *sipx.Request) {
			px.Finish(r.Tx, r.Req, px.Fwd.Forward(r.Ctx, r.Tx, r.Out, sipx.SRVHop("callee.example")))
		}})
		sipxtest.Serve(ep)

		// The caller is a bare socket: it counts the 200s that reach it and never ACKs.
		conn, err := net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		invite := "INVITE sip:user0002@callee.example SIP/2.0\r\n" +
			"Via: SIP/2.0/UDP " + conn.LocalAddr().String() + ";branch=z9hG4bKretx1;rport\r\n" +
			"Max-Forwards: 70\r\nFrom: <sip:user0001@ims.test>;tag=a1\r\nTo: <sip:user0002@ims.test>\r\n" +
			"Call-ID: retx-1@test\r\nCSeq: 1 INVITE\r\nContact: <sip:user0001@" + conn.LocalAddr().String() + ">\r\n" +
			"Content-Length: 0\r\n\r\n"
		dst, err := net.ResolveUDPAddr("udp", ep.Addr)
		Expect(err).NotTo(HaveOccurred())
		_, err = conn.WriteTo([]byte(invite), dst)
		Expect(err).NotTo(HaveOccurred())
		oks := 0
		buf := make([]byte, 65535)
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			_ = conn.SetReadDeadline(deadline)
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				break
			}
			if strings.HasPrefix(string(buf[:n]), "SIP/2.0 200") {
				oks++
			}
		}
		Expect(oks).To(Equal(3), "the 200 and its two retransmissions")
	})
})
