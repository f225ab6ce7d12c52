package obs_test

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/dict"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

var (
	pcscf = netip.MustParseAddrPort("127.0.0.1:5061")
	bac   = netip.MustParseAddrPort("127.0.0.1:5060")
	scscf = netip.MustParseAddrPort("[fd00::5]:3868")
	hss   = netip.MustParseAddrPort("[fd00::9]:3868")
)

const invite = "INVITE sip:user0002@ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK1\r\n" +
	"From: <sip:user0001@ims.test>;tag=1\r\nTo: <sip:user0002@ims.test>\r\nCall-ID: c1\r\nCSeq: 1 INVITE\r\n" +
	"Content-Length: 0\r\n\r\n"

// diameterMsg is a request with command code cmd and an Origin-Host.
func diameterMsg(cmd uint32) []byte {
	m := diam.NewRequest(cmd, 0, dict.Default)
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity("scscf1.ims.test"))
	b, err := m.Serialize()
	Expect(err).NotTo(HaveOccurred())
	return b
}

var _ = Describe("the message trace", func() {
	var dir string
	BeforeEach(func() { dir = GinkgoT().TempDir() })

	It("reads back every message with its node, direction, protocol, addresses and bytes", func() {
		t, err := obs.OpenTracer(filepath.Join(dir, "pcscf1.pcapng"), "pcscf1", 0)
		Expect(err).NotTo(HaveOccurred())
		t.Record("sip", "in", bac.String(), pcscf.String(), []byte(invite))
		t.RecordAddr("sip", "out", pcscf, bac, []byte("SIP/2.0 100 Trying\r\n\r\n"))
		lir := diameterMsg(302)
		t.RecordAddr("diameter", "out", scscf, hss, lir)
		t.RecordAddr("diameter", "in", hss, scscf, lir)
		Expect(t.Close()).To(Succeed())

		lines, wrapped, warnings, err := obs.ReadTraceDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrapped).To(BeEmpty())
		Expect(warnings).To(BeEmpty())
		Expect(lines).To(HaveLen(4))
		Expect(lines[0]).To(MatchFields(IgnoreExtras, Fields{"Node": Equal("pcscf1"), "Proto": Equal("sip"), "Dir": Equal("in"),
			"Src": Equal("127.0.0.1:5060"), "Dst": Equal("127.0.0.1:5061"), "Data": Equal([]byte(invite))}))
		Expect(lines[1].Dir).To(Equal("out"))
		Expect(lines[2]).To(MatchFields(IgnoreExtras, Fields{"Proto": Equal("diameter"), "Dir": Equal("out"),
			"Src": Equal("[fd00::5]:3868"), "Dst": Equal("[fd00::9]:3868"), "Data": Equal(lir)}))
		Expect(lines[3].Dir).To(Equal("in"))
		Expect(lines[0].TNs).To(BeNumerically("<=", lines[3].TNs))
	})

	It("keeps a node's files within its budget, newest messages kept, and says the trace wrapped", func() {
		const budget = 64 << 10
		t, err := obs.OpenTracer(filepath.Join(dir, "bac.pcapng"), "bac", budget)
		Expect(err).NotTo(HaveOccurred())
		payload := strings.Repeat("x", 900)
		for i := range 1000 {
			t.RecordAddr("sip", "out", bac, pcscf, []byte(fmt.Sprintf("MESSAGE %04d %s", i, payload)))
		}
		Expect(t.Close()).To(Succeed())

		segs, err := obs.TraceSegments(filepath.Join(dir, "bac"))
		Expect(err).NotTo(HaveOccurred())
		var total int64
		for _, s := range segs {
			total += s.Size
		}
		Expect(total).To(BeNumerically("<=", budget+2<<10), "the files stay within the budget (plus one message)")
		Expect(segs[0].N).To(BeNumerically(">", 1), "the oldest segments were deleted")

		lines, wrapped, _, err := obs.ReadTraceDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrapped).To(ConsistOf("bac"))
		Expect(string(lines[len(lines)-1].Data)).To(HavePrefix("MESSAGE 0999 "), "the newest message is kept")
		Expect(len(lines)).To(BeNumerically("<", 1000))
	})

	It("keeps every message of a node that writes less than its budget, across several segments", func() {
		const budget = 64 << 10
		t, err := obs.OpenTracer(filepath.Join(dir, "bac.pcapng"), "bac", budget)
		Expect(err).NotTo(HaveOccurred())
		payload := strings.Repeat("x", 900)
		for i := range 50 { // about 50 KiB: more than half the budget, less than all of it
			t.RecordAddr("sip", "out", bac, pcscf, []byte(fmt.Sprintf("MESSAGE %04d %s", i, payload)))
		}
		Expect(t.Close()).To(Succeed())
		lines, wrapped, _, err := obs.ReadTraceDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrapped).To(BeEmpty())
		Expect(lines).To(HaveLen(50))
	})

	It("starts a new segment when the node starts again, and keeps what the first run wrote", func() {
		for run := range 2 {
			t, err := obs.OpenTracer(filepath.Join(dir, "scscf1.pcapng"), "scscf1", 0)
			Expect(err).NotTo(HaveOccurred())
			t.RecordAddr("sip", "in", pcscf, bac, []byte(fmt.Sprintf("run %d", run)))
			Expect(t.Close()).To(Succeed())
		}
		Expect(filepath.Join(dir, "scscf1.001.pcapng")).To(BeAnExistingFile())
		Expect(filepath.Join(dir, "scscf1.002.pcapng")).To(BeAnExistingFile())
		lines, wrapped, _, err := obs.ReadTraceDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrapped).To(BeEmpty())
		Expect(lines).To(HaveLen(2))
	})

	It("reads a segment torn by a kill up to the torn block", func() {
		t, err := obs.OpenTracer(filepath.Join(dir, "pcscf2.pcapng"), "pcscf2", 0)
		Expect(err).NotTo(HaveOccurred())
		for range 3 {
			t.RecordAddr("sip", "in", bac, pcscf, []byte(invite))
		}
		Expect(t.Close()).To(Succeed())
		p := filepath.Join(dir, "pcscf2.001.pcapng")
		st, err := os.Stat(p)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.Truncate(p, st.Size()-10)).To(Succeed())

		lines, _, _, err := obs.ReadTraceDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(lines).To(HaveLen(2))
	})

	It("writes files tshark decodes as SIP and Diameter with the direction", func() {
		if _, err := exec.LookPath("tshark"); err != nil {
			if os.Getenv("IMSLAB_REQUIRE_TSHARK") != "" {
				Fail("tshark not found and IMSLAB_REQUIRE_TSHARK is set")
			}
			Skip("tshark not installed")
		}
		t, err := obs.OpenTracer(filepath.Join(dir, "pcscf1.pcapng"), "pcscf1", 0)
		Expect(err).NotTo(HaveOccurred())
		t.RecordAddr("sip", "in", bac, pcscf, []byte(invite))
		t.RecordAddr("diameter", "out", netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.1:3868"), diameterMsg(diam.CapabilitiesExchange))
		Expect(t.Close()).To(Succeed())
		out, err := exec.Command("tshark", "-r", filepath.Join(dir, "pcscf1.001.pcapng"), "-T", "fields",
			"-e", "frame.interface_name", "-e", "sll.pkttype", "-e", "sip.Method", "-e", "diameter.cmd.code").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("pcscf1\t0\tINVITE"))
		Expect(string(out)).To(ContainSubstring("pcscf1\t4\t\t257"))
	})
})
