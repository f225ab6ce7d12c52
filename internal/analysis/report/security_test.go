package report_test

import (
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// attackRun writes a run in which a rogue phone at 127.0.0.1:6666 and a rogue Diameter client were refused: the
// BAC refused two INVITEs and a REGISTER, the I-CSCF an INVITE with orig from outside, the S-CSCF a BYE that was
// not its dialog and an INVITE without a reason, the HSS a CER from rogue.ims.test and a SAR naming another S-CSCF.
func attackRun(dir string) {
	r := newRunDir(dir)
	r.file("scenario.json", `{"name": "attacks", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
	rogue := map[string]any{"peer": "127.0.0.1:6666", "role": "untrusted"}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	r.event("bac", "refused", 5, with(rogue, "reason", "not_registered", "method", "INVITE", "call_id", "a1"))
	r.event("bac", "refused", 6, with(rogue, "reason", "not_registered", "method", "INVITE", "call_id", "a2"))
	r.event("bac", "refused", 7, with(rogue, "reason", "not_registered", "method", "REGISTER", "peer", "127.0.0.1:6667"))
	r.event("icscf", "refused", 8, with(rogue, "reason", "marker_from_untrusted", "method", "INVITE"))
	r.event("scscf2", "refused", 9, with(rogue, "reason", "not_our_dialog", "method", "BYE"))
	r.event("scscf2", "refused", 9.5, map[string]any{"direction": "mo", "method": "INVITE", "call_id": "a3"})
	r.event("hss", "cx_refused", 10, map[string]any{"peer": "rogue.ims.test", "remote": "127.0.0.1:40000", "reason": "unknown_peer", "result": 3010})
	r.event("hss", "cx_refused", 11, map[string]any{"peer": "scscf1.ims.test", "remote": "127.0.0.1:40001", "reason": "server_name",
		"cmd": "SAR", "result": 5003})
	// Not refusals: they must not be counted.
	r.event("bac", "peer_state", 3, map[string]any{"peer": "pcscf1", "state": "down", "reason": "timeout"})
	r.event("hss", "cx_answer", 4, map[string]any{"cmd": "MAR", "result": 2001})
	r.write()
}

var _ = Describe("Refused requests in the report", Label("unit"), func() {
	It("counts refused and cx_refused events by node and reason into summary.json and a table in report.md and report.html", func() {
		dir := GinkgoT().TempDir()
		attackRun(dir)
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())

		Expect(s.Security).NotTo(BeNil())
		Expect(s.Security.RefusedTotal).To(Equal(8))
		Expect(s.Security.Refused).To(Equal(map[string]map[string]int{
			"bac":    {"not_registered": 3},
			"icscf":  {"marker_from_untrusted": 1},
			"scscf2": {"not_our_dialog": 1, "unspecified": 1},
			"hss":    {"unknown_peer": 1, "server_name": 1},
		}))
		v, ok := s.Lookup("security.refused.bac.not_registered")
		Expect(ok).To(BeTrue())
		Expect(v).To(Equal(3.0))
		v, ok = s.Lookup("security.refused_total")
		Expect(ok).To(BeTrue())
		Expect(v).To(Equal(8.0))

		Expect(s.Security.Refusals).To(HaveLen(6))
		bac := s.Security.Refusals[0]
		Expect(bac.Node).To(Equal("bac"))
		Expect(bac.Kind).To(Equal("refused"))
		Expect(bac.Methods).To(Equal(map[string]int{"INVITE": 2, "REGISTER": 1}))
		Expect(bac.Roles).To(Equal(map[string]int{"untrusted": 3}))
		Expect(bac.Peers).To(Equal([]string{"127.0.0.1:6666", "127.0.0.1:6667"}))
		Expect(bac.FirstS).To(Equal(5.0))
		Expect(bac.LastS).To(Equal(7.0))
		var cer, sar report.RefusalGroup
		for _, g := range s.Security.Refusals {
			switch {
			case g.Node == "hss" && g.Reason == "unknown_peer":
				cer = g
			case g.Node == "hss" && g.Reason == "server_name":
				sar = g
			}
		}
		Expect(cer.Kind).To(Equal("cx_refused"))
		Expect(cer.Methods).To(Equal(map[string]int{"CER": 1}), "a refused connection is a refused CER")
		Expect(cer.Peers).To(Equal([]string{"rogue.ims.test 127.0.0.1:40000"}))
		Expect(sar.Methods).To(Equal(map[string]int{"SAR": 1}))

		b, err := os.ReadFile(filepath.Join(dir, report.FileSummary))
		Expect(err).NotTo(HaveOccurred())
		var raw map[string]any
		Expect(json.Unmarshal(b, &raw)).To(Succeed())
		Expect(raw).To(HaveKeyWithValue("security", HaveKeyWithValue("refused",
			HaveKeyWithValue("icscf", HaveKeyWithValue("marker_from_untrusted", 1.0)))))

		md, err := os.ReadFile(filepath.Join(dir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(ContainSubstring("## Refused requests"))
		Expect(string(md)).To(ContainSubstring("8 requests refused"))
		Expect(string(md)).To(ContainSubstring("| bac | not_registered | INVITE 2, REGISTER 1 | untrusted 3: 127.0.0.1:6666, 127.0.0.1:6667 | 3 | 5.000 s – 7.000 s |"))
		Expect(string(md)).To(ContainSubstring("| hss | unknown_peer | CER 1 | Diameter peer: rogue.ims.test 127.0.0.1:40000 | 1 | 10.000 s |"))
		h, err := os.ReadFile(filepath.Join(dir, report.FileHTML))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(h)).To(ContainSubstring(`<h2 id="refused">Refused requests</h2>`))
		Expect(string(h)).To(ContainSubstring("<td>scscf2</td><td>not_our_dialog</td><td>BYE 1</td>"))
	})

	It("leaves security out of summary.json and the table out of the report when nothing was refused", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.event("bac", "peer_state", 3, map[string]any{"peer": "pcscf1", "state": "down"})
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Security).To(BeNil())
		b, err := os.ReadFile(filepath.Join(dir, report.FileSummary))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).NotTo(ContainSubstring(`"security"`))
		md, err := os.ReadFile(filepath.Join(dir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).NotTo(ContainSubstring("Refused requests"))
	})
})
