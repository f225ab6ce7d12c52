package obs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

var _ = Describe("the merged trace of a run", Label("unit"), func() {
	var dir, out string
	BeforeEach(func() {
		dir = filepath.Join(GinkgoT().TempDir(), "trace")
		out = filepath.Join(filepath.Dir(dir), obs.TraceFile)
	})

	It("holds every node's messages once each, in time order, with node and direction, compressed", func() {
		p, err := obs.OpenTracer(filepath.Join(dir, "pcscf1.pcapng"), "pcscf1", 0)
		Expect(err).NotTo(HaveOccurred())
		b, err := obs.OpenTracer(filepath.Join(dir, "bac.pcapng"), "bac", 0)
		Expect(err).NotTo(HaveOccurred())
		b.RecordAddr("sip", "out", bac, pcscf, []byte(invite))
		p.RecordAddr("sip", "in", bac, pcscf, []byte(invite))
		p.RecordAddr("diameter", "out", scscf, hss, diameterMsg(302))
		p.RecordAddr("sip", "out", pcscf, bac, []byte("SIP/2.0 100 Trying\r\n\r\n"))
		b.RecordAddr("sip", "in", pcscf, bac, []byte("SIP/2.0 100 Trying\r\n\r\n"))
		Expect(p.Close()).To(Succeed())
		Expect(b.Close()).To(Succeed())
		want, _, _, err := obs.ReadTraceDir(dir)
		Expect(err).NotTo(HaveOccurred())

		n, warnings, err := obs.MergeTrace(dir, out)
		Expect(err).NotTo(HaveOccurred())
		Expect(warnings).To(BeEmpty())
		Expect(n).To(Equal(5))
		raw, err := os.ReadFile(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(raw[:2]).To(Equal([]byte{0x1f, 0x8b}), "gzip")

		got, wrapped, skipped, err := obs.ReadTraceFile(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrapped).To(BeEmpty())
		Expect(skipped).To(BeZero())
		Expect(got).To(ConsistOf(want), "the same messages as the segments, nothing lost")
		for i := 1; i < len(got); i++ {
			Expect(got[i].TNs).To(BeNumerically(">=", got[i-1].TNs), "time order")
		}
		nodes := map[string]int{}
		for _, l := range got {
			nodes[l.Node+" "+l.Dir]++
		}
		Expect(nodes).To(Equal(map[string]int{"bac out": 1, "bac in": 1, "pcscf1 in": 1, "pcscf1 out": 2}))

		if tshark, err := exec.LookPath("tshark"); err == nil {
			o, err := exec.Command(tshark, "-n", "-r", out, "-d", "tcp.port==3868,diameter", "-T", "fields",
				"-e", "frame.interface_name", "-e", "_ws.col.Protocol").Output()
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.Count(string(o), "SIP")).To(Equal(4), string(o))
			Expect(string(o)).To(ContainSubstring("DIAMETER"))
			Expect(string(o)).To(ContainSubstring("bac"))
		} else if os.Getenv("IMSLAB_REQUIRE_TSHARK") != "" {
			Fail("tshark not found and IMSLAB_REQUIRE_TSHARK is set")
		}
	})

	It("keeps the note that a node's trace wrapped", func() {
		t, err := obs.OpenTracer(filepath.Join(dir, "bac.pcapng"), "bac", 64<<10)
		Expect(err).NotTo(HaveOccurred())
		for i := 0; i < 200; i++ {
			t.RecordAddr("sip", "out", bac, pcscf, []byte(invite+strings.Repeat("x", 900)))
		}
		Expect(t.Close()).To(Succeed())
		_, wrappedDir, _, err := obs.ReadTraceDir(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrappedDir).NotTo(BeEmpty(), "the budget made the trace wrap")

		_, _, err = obs.MergeTrace(dir, out)
		Expect(err).NotTo(HaveOccurred())
		_, wrapped, _, err := obs.ReadTraceFile(out)
		Expect(err).NotTo(HaveOccurred())
		Expect(wrapped).To(Equal([]string{"bac"}))
	})

	It("writes nothing for a run without a trace", func() {
		n, _, err := obs.MergeTrace(dir, out)
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(BeZero())
		Expect(out).NotTo(BeAnExistingFile())
	})
})
