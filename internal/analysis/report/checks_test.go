package report_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/scenario"
)

var _ = Describe("the expectations in the report", Label("unit"), func() {
	// A run of two successful calls: calls.total is 2, so "at least one call" holds and "at least 5" fails; the
	// third expectation names a metric the summary does not have.
	twoCalls := func() string {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "checked", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.register(2, -1, "initial", "pcscf2", "scscf2", "ok")
		r.call("c1", 1, 2, 1, "ok", 100, true)
		r.call("c2", 2, 1, 2, "ok", 100, true)
		r.write()
		return dir
	}
	one, five := 1.0, 5.0
	exps := []scenario.Expectation{
		{Name: "some calls", Metric: "calls.total", Op: ">=", Value: &one},
		{Name: "many calls", Metric: "calls.total", Op: ">=", Value: &five},
		{Name: "a metric nobody reports", Metric: "calls.imaginary", Op: ">", Value: &one},
	}
	read := func(dir, file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		Expect(err).NotTo(HaveOccurred())
		return string(b)
	}

	It("lists every expectation with its value, its comparison and whether it held, the failed ones marked", func() {
		dir := twoCalls()
		_, err := report.Build(dir, scenario.ReportChecks(func(m scenario.Metrics) []scenario.Result {
			return scenario.Evaluate(exps, m)
		}))
		Expect(err).NotTo(HaveOccurred())
		md := read(dir, report.FileMarkdown)
		Expect(md).To(ContainSubstring("## Expectations: 1 of 3 held (2 FAILED)"))
		Expect(md).To(ContainSubstring("| some calls | calls.total | 2 | >= 1 | yes |"))
		Expect(md).To(ContainSubstring("| many calls | calls.total | 2 | >= 5 | **NO** |"))
		Expect(md).To(ContainSubstring(`| a metric nobody reports | calls.imaginary | - | > 1 | **NO: the summary has no metric "calls.imaginary"** |`))
		html := read(dir, report.FileHTML)
		Expect(html).To(ContainSubstring(`<h2 id="expectations">Expectations: 1 of 3 held (2 FAILED)</h2>`))
		Expect(html).To(ContainSubstring(`<tr style="background:#fdd"><td>many calls</td><td>calls.total</td><td>2</td><td>&gt;= 5</td><td>NO</td></tr>`))
		Expect(html).To(ContainSubstring(`<tr><td>some calls</td><td>calls.total</td><td>2</td><td>&gt;= 1</td><td>yes</td></tr>`))
	})

	It("says all held when they did, and has no such section without expectations", func() {
		dir := twoCalls()
		_, err := report.Build(dir, scenario.ReportChecks(func(m scenario.Metrics) []scenario.Result {
			return scenario.Evaluate(exps[:1], m)
		}))
		Expect(err).NotTo(HaveOccurred())
		Expect(read(dir, report.FileMarkdown)).To(ContainSubstring("## Expectations: 1 of 1 held (all held)"))

		_, err = report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(read(dir, report.FileMarkdown)).NotTo(ContainSubstring("Expectations"))
		Expect(read(dir, report.FileHTML)).NotTo(ContainSubstring(`id="expectations"`))
	})
})
