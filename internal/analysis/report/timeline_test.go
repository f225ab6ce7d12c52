package report_test

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("Timeline around the fault", Label("unit"), func() {
	It("bins the requests per pool member, the HSS's Cx/s and call outcomes per second, with the detections, and draws them", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "tl", "seed": 1, "start_ns": 1767000000000000000,
			"end_ns": 1767000060000000000, "duration_s": 60,
			"faults": [{"kind": "kill", "target": "pcscf1", "at_s": 20, "for_s": 0}],
			"traffic": {"phones": 4}}`)
		r.register(1, 0.1, "initial", "pcscf1", "scscf1", "ok")
		r.register(2, 0.2, "initial", "pcscf2", "scscf2", "ok")
		// The BAC routes 2 requests/s to pcscf1 until the kill at 20 s, then 3/s to pcscf2; the P-CSCFs 1/s to scscf1.
		for t := 5.0; t < 20; t += 0.5 {
			r.event("bac", "sip_tx", t, map[string]any{"method": "INVITE", "peer": "pcscf1.ims.test", "status": 200})
		}
		// A request sent to pcscf1 just after the kill times out 2 s later: it counts when it was sent (20 s).
		r.event("bac", "sip_tx", 22.25, map[string]any{"method": "INVITE", "peer": "pcscf1.ims.test", "status": 0,
			"failure": "timeout", "latency_us": 2_000_000})
		for t := 20.1; t < 30; t += 1.0 / 3 {
			r.event("bac", "sip_tx", t, map[string]any{"method": "INVITE", "peer": "pcscf2.ims.test", "status": 200})
		}
		for t := 5.0; t < 30; t++ {
			r.event("pcscf2", "sip_tx", t+0.2, map[string]any{"method": "INVITE", "peer": "scscf1.ims.test", "status": 200})
			r.event("bac", "sip_tx", t+0.3, map[string]any{"method": "OPTIONS", "peer": "icscf.ims.test", "status": 200})
		}
		r.event("lab", "fault", 20, map[string]any{"fault": "kill", "target": "pcscf1"})
		r.event("bac", "peer_state", 21.5, map[string]any{"peer": "pcscf1.ims.test", "state": "down"})
		r.event("scscf1", "peer_state", 21.8, map[string]any{"peer": "pcscf1.ims.test", "state": "down"})
		// The takeover's Cx: 4 LIR in the second after detection, one SAR before the fault.
		for i := range 4 {
			r.event("hss", "cx_answer", 21.6+float64(i)/10, map[string]any{"cmd": "LIR", "uat": 2, "result": 2001})
		}
		r.event("hss", "cx_answer", 12.5, map[string]any{"cmd": "SAR", "sat": 1, "result": 2001})
		r.call("c1", 1, 2, 15.2, "ok", 100, true)
		r.call("c2", 1, 2, 20.5, "408", 0, false)
		r.call("c3", 1, 2, 20.7, "408", 0, false)
		r.call("c4", 1, 2, 23.1, "ok", 120, true)
		r.write()

		from, to, se, det, err := report.TimelineOf(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect([]float64{from, to}).To(Equal([]float64{10, 50}), "10 s before the fault to 30 s after")
		Expect(se).To(HaveKey("pcscf1"))
		Expect(se).To(HaveKey("pcscf2"))
		Expect(se).To(HaveKey("scscf1"))
		Expect(se).NotTo(HaveKey("icscf"), "only the pools' members")
		Expect(se["pcscf1"]).To(HaveLen(40))
		Expect(se["pcscf1"][:10]).To(HaveEach(2.0), "10–20 s: 2 requests/s")
		Expect(se["pcscf1"][10]).To(Equal(1.0), "the request that timed out, at its sending time")
		Expect(se["pcscf1"][11:]).To(HaveEach(0.0))
		Expect(se["pcscf2"][0]).To(Equal(0.0))
		Expect(se["pcscf2"][10] + se["pcscf2"][11] + se["pcscf2"][12]).To(BeNumerically("~", 9, 1))
		Expect(se["scscf1"][5]).To(Equal(1.0))
		Expect(se["LIR"][11]).To(Equal(4.0), "the second after detection (21–22 s)")
		Expect(se["SAR"][2]).To(Equal(1.0))
		Expect(se["all Cx"][11]).To(Equal(4.0))
		Expect(se["calls answered"][5]).To(Equal(1.0))
		Expect(se["calls failed"][10]).To(Equal(2.0))
		Expect(se["calls answered"][13]).To(Equal(1.0))
		Expect(se).NotTo(HaveKey("probes answered"), "no probes in this run")
		Expect(det).To(HaveKeyWithValue("bac", BeNumerically("~", 21.5, 1e-6)))
		Expect(det).To(HaveKeyWithValue("scscf1", BeNumerically("~", 21.8, 1e-6)))

		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Files).To(ContainElements("plots/timeline.svg", "plots/timeline.png", "plots/timeline.csv"))
		cb, err := os.ReadFile(filepath.Join(dir, "plots", "timeline.csv"))
		Expect(err).NotTo(HaveOccurred())
		rows, err := csv.NewReader(bytes.NewReader(cb)).ReadAll()
		Expect(err).NotTo(HaveOccurred())
		Expect(rows).To(HaveLen(41), "a header and 40 one-second bins")
		Expect(rows[0]).To(Equal([]string{"start_s", "requests_to_pcscf1", "requests_to_pcscf2", "requests_to_scscf1",
			"cx_all_Cx", "cx_LIR", "cx_SAR", "calls_answered", "calls_failed"}))
		Expect(rows[1][:2]).To(Equal([]string{"10", "2"}), "10–11 s: 2 requests to pcscf1")
		Expect(rows[12][0]).To(Equal("21"))
		Expect(rows[12][5]).To(Equal("4"), "4 LIR in 21–22 s")
		b, err := os.ReadFile(filepath.Join(dir, "plots", "timeline.svg"))
		Expect(err).NotTo(HaveOccurred())
		var text strings.Builder
		d := xml.NewDecoder(bytes.NewReader(b))
		for {
			tok, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			Expect(err).NotTo(HaveOccurred())
			if c, ok := tok.(xml.CharData); ok {
				text.Write(c)
				text.WriteByte('\n')
			}
		}
		for _, want := range []string{"pcscf1", "pcscf2", "scscf1", "all Cx", "LIR", "calls answered", "calls failed",
			"fault: kill pcscf1", "detected down: bac +1.50 s, scscf1 +1.80 s", "requests/s", "Cx/s", "calls/s"} {
			Expect(text.String()).To(ContainSubstring(want))
		}
		fh, err := os.Open(filepath.Join(dir, "plots", "timeline.png"))
		Expect(err).NotTo(HaveOccurred())
		defer fh.Close()
		_, err = png.Decode(fh)
		Expect(err).NotTo(HaveOccurred())
		md, err := os.ReadFile(filepath.Join(dir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("](plots/timeline.svg)"))
		html, err := os.ReadFile(filepath.Join(dir, report.FileHTML))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(html)).To(ContainSubstring(`<figure id="plots/timeline">`))
	})
})
