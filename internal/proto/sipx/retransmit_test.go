package sipx_test

import (
	"net"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/sipxtest"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

var _ = Describe("Forwarder (2xx retransmissions, RFC 6026)", Label("unit"), func() {
	It("forwards every retransmission of a 2xx to an INVITE upstream, so that a lost 200 OK does not lose the call", SpecTimeout(15e9), func(_ SpecContext) {
		Expect(relayedOKs()).To(HaveLen(3), "the 200 and its two retransmissions")
	})

	It("edits the retransmissions with the response hook too, as the first 2xx (the BAC's Contact rewrite)", SpecTimeout(15e9), func(_ SpecContext) {
		// A 200 lost between the sites left the caller only a retransmission; relayed unedited, it carried the
		// callee phone's own address in its Contact into the core, the dialog's remote target became an address
		// the core cannot reach, and the call's ACK and BYE were lost (docs/sip-core.md, "2xx retransmissions").
		hook := func(res *sip.Response) {
			res.RemoveHeader("Contact")
			res.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "tok1", Host: "bac.ims.test"}})
		}
		oks := relayedOKs(sipx.WithResponseHook(hook))
		Expect(oks).To(HaveLen(3), "the 200 and its two retransmissions")
		for i, ok := range oks {
			Expect(ok).To(ContainSubstring("Contact: <sip:tok1@bac.ims.test>"), "200 number %d", i+1)
			Expect(ok).NotTo(ContainSubstring("callee-phone"), "200 number %d", i+1)
		}
	})
})

// relayedOKs runs a proxy (forwarding with opts) between a bare caller socket that never ACKs and a callee that
// answers 200 and retransmits it twice, as a UAS does until its ACK comes; it returns the 200s the caller received.
func relayedOKs(opts ...sipx.ForwardOption) []string {
	GinkgoHelper()
	callee := sipxtest.Bind("callee.example")
	callee.Server.OnInvite(func(req *sip.Request, tx sip.ServerTransaction) {
		res := sip.NewResponseFromRequest(req, 200, "OK", nil)
		res.To().Params.Add("tag", "callee1")
		res.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "user0002", Host: "callee-phone", Port: 5099}})
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
		px.Finish(r.Tx, r.Req, px.Fwd.Forward(r.Ctx, r.Tx, r.Out, sipx.SRVHop("callee.example"), opts...))
	}})
	sipxtest.Serve(ep)

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
	var oks []string
	buf := make([]byte, 65535)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		_ = conn.SetReadDeadline(deadline)
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			break
		}
		if s := string(buf[:n]); strings.HasPrefix(s, "SIP/2.0 200") {
			oks = append(oks, s)
		}
	}
	return oks
}
