package report_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = Describe("the report's SVG figures", Label("unit"), func() {
	It("name generic fallbacks after the Liberation face they are drawn with, for viewers without it", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "fonts", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.register(2, -1, "initial", "pcscf2", "scscf2", "ok")
		r.call("c1", 1, 2, 1, "ok", 100, true)
		r.write()
		_, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		for _, f := range []string{"call_success.svg", "call_attempts.svg"} {
			b, err := os.ReadFile(filepath.Join(dir, report.DirPlots, f))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).To(ContainSubstring("font-family:Liberation Serif,Times New Roman,Times,serif;"), f)
			Expect(string(b)).NotTo(ContainSubstring("font-family:Liberation Serif;"), f)
		}
	})
})
