package interop_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The capture's checks on made-up exchanges: each defect of issue 34 must show up as a problem.
var _ = Describe("The Cx capture checks", Label("unit"), func() {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	hbh := 0
	// ex returns a request and its answer on a connection.
	ex := func(s float64, stream, cmd int, from string, result int, tweak ...func(*diamMsg)) []diamMsg {
		hbh++
		id := fmt.Sprintf("0x%08x", hbh)
		req := diamMsg{At: at(s), Stream: stream, Cmd: cmd, Request: true, HopByHop: id, OriginHost: from, SARType: -1}
		for _, f := range tweak {
			f(&req)
		}
		ans := diamMsg{At: at(s + 0.001), Stream: stream, Cmd: cmd, HopByHop: id, OriginHost: "hss.ims.test", Result: result, SARType: -1}
		return []diamMsg{req, ans}
	}
	sar := func(t int) func(*diamMsg) { return func(m *diamMsg) { m.SARType = t } }
	scheme := func(s string) func(*diamMsg) { return func(m *diamMsg) { m.Schemes = []string{s} } }
	want := cxExpectations{sarTypes: []int{1, 2}, schemesSeen: []string{"unknown"}, schemesNever: []string{"Digest-MD5"},
		silenceFrom: at(10), silence: at(52)}
	good := func() []diamMsg {
		var m []diamMsg
		m = append(m, ex(0, 0, cmdCE, "scscf.ims.test", 2001)...)
		m = append(m, ex(0, 1, cmdCE, "icscf.ims.test", 2001)...)
		m = append(m, ex(1, 1, cmdUA, "icscf.ims.test", 2001)...)
		m = append(m, ex(1.1, 0, cmdMA, "scscf.ims.test", 2001, scheme("unknown"))...)
		m = append(m, ex(1.2, 0, cmdSA, "scscf.ims.test", 2001, sar(1))...)
		m = append(m, ex(2, 1, cmdLI, "icscf.ims.test", 2001)...)
		m = append(m, ex(38, 0, cmdDW, "hss.ims.test", 2001)...)
		m = append(m, ex(40, 1, cmdDW, "icscf.ims.test", 2001)...)
		m = append(m, ex(53, 0, cmdSA, "scscf.ims.test", 2001, sar(2))...)
		return m
	}

	It("finds nothing wrong with a clean exchange", func() {
		Expect(checkCx(good(), want)).To(BeEmpty())
	})

	It("reports a connection closed and reopened during the silence", func() {
		m := good()
		m = append(m, ex(45, 2, cmdCE, "icscf.ims.test", 2001)...)
		Expect(checkCx(m, want)).To(ContainElements(
			ContainSubstring("3 CER"), ContainSubstring("3 TCP connections"),
			ContainSubstring("connection 2: no DWR")))
	})

	It("reports an unanswered request, an error result and a missing watchdog", func() {
		m := good()
		m = m[:len(m)-1]                                          // the last SAR loses its answer
		m[7].Result = 5006                                        // the MAA
		m = append(m[:12], m[14:]...)                             // connection 0's DWR/DWA
		m = append(m, ex(5, 1, cmdDW, "icscf.ims.test", 2001)...) // before the silence: does not count
		Expect(checkCx(m, want)).To(ConsistOf(
			ContainSubstring("unanswered: "), ContainSubstring("result 5006"),
			ContainSubstring("SAR types [1] (want [1 2])"),
			ContainSubstring("connection 0: no DWR")))
	})

	It("reports a forbidden scheme, a missing one and a second LIR, which came during the silence", func() {
		m := good()
		m[6].Schemes = []string{"Digest-MD5"}
		m = append(m, ex(20, 1, cmdLI, "icscf.ims.test", 2001)...)
		Expect(checkCx(m, want)).To(ConsistOf(
			ContainSubstring(`no MAR with SIP-Authentication-Scheme "unknown"`),
			ContainSubstring(`a MAR with SIP-Authentication-Scheme "Digest-MD5"`),
			ContainSubstring("2 LIR"), ContainSubstring("Cx traffic during the silence: ")))
	})

	It("decodes every Diameter message of a frame that carries two", func() {
		pd := `<?xml version="1.0"?><pdml><packet>
<proto name="frame"><field name="frame.time_epoch" show="1796662460.902143150"/></proto>
<proto name="tcp"><field name="tcp.stream" show="3"/></proto>
<proto name="diameter"><field name="diameter.flags"><field name="diameter.flags.request" show="1"/></field>
 <field name="diameter.cmd.code" show="280"/><field name="diameter.hopbyhopid" show="0x01"/>
 <field name="diameter.avp"><field name="diameter.Origin-Host" show="hss.ims.test"/></field></proto>
<proto name="diameter"><field name="diameter.flags"><field name="diameter.flags.request" show="0"/></field>
 <field name="diameter.cmd.code" show="301"/><field name="diameter.hopbyhopid" show="0x02"/>
 <field name="diameter.avp"><field name="diameter.Experimental-Result"><field name="diameter.Experimental-Result-Code" show="2001"/></field></field>
 <field name="diameter.avp"><field name="diameter.Server-Assignment-Type" show="5"/></field></proto>
</packet></pdml>`
		msgs, err := decodePDML([]byte(pd))
		Expect(err).NotTo(HaveOccurred())
		Expect(msgs).To(HaveLen(2))
		Expect(msgs[0]).To(And(HaveField("Stream", 3), HaveField("Cmd", cmdDW), HaveField("Request", true),
			HaveField("OriginHost", "hss.ims.test")))
		Expect(msgs[0].At.UnixNano()).To(Equal(int64(1796662460902143150)))
		Expect(msgs[1]).To(And(HaveField("Cmd", cmdSA), HaveField("Request", false), HaveField("Result", 2001),
			HaveField("SARType", 5)))
	})

	It("refuses PDML without command codes", func() {
		_, err := decodePDML([]byte(`<pdml><packet><proto name="tcp"><field name="tcp.stream" show="0"/></proto><proto name="diameter"></proto></packet></pdml>`))
		Expect(err).To(MatchError(ContainSubstring("without command code")))
	})
})
