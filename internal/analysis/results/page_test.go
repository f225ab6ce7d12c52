package results_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/results"
)

var _ = Describe("numbers in the tables", Label("unit"), func() {
	DescribeTable("read as they always did (shortest digits, an exponent only for the very small or large)",
		func(x float64, want string) { Expect(results.Num(x)).To(Equal(want)) },
		Entry("an integer", 33570.0, "33570"),
		Entry("a million", 1e6, "1000000"),
		Entry("a rounded fraction", 2.31, "2.31"),
		Entry("microseconds", 0.567245, "0.567245"),
		Entry("a float sum's rounding error", 0.30000000000000004, "0.30000000000000004"),
		Entry("1e-4 is still a decimal", 0.0001, "0.0001"),
		Entry("below it, an exponent", 0.00001, "1e-05"),
		Entry("1e16 and above, an exponent", 1e16, "1e+16"),
		Entry("zero", 0.0, "0"),
		Entry("negative", -1.5, "-1.5"),
	)
})

var _ = Describe("a generated section of docs/results.md", Label("unit"), func() {
	doc := "# Results\n\nbefore\n<!-- claims:begin -->\nold 1\nold 2\n<!-- claims:end -->\nafter\n"

	It("replaces the lines between the markers and keeps everything else", func() {
		got, err := results.ReplaceSection(doc, "claims", "new 1\n\nnew 2\n")
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(Equal("# Results\n\nbefore\n<!-- claims:begin -->\nnew 1\n\nnew 2\n<!-- claims:end -->\nafter\n"))
	})

	It("is an error when the page has no markers for it", func() {
		_, err := results.ReplaceSection(doc, "storms", "x\n")
		Expect(err).To(MatchError(ContainSubstring("<!-- storms:begin -->")))
	})
})

var _ = Describe("the storm table", Label("unit"), func() {
	It("has a column per published run and its figures from summary.json.gz and probes.json", func() {
		root := filepath.Join("..", "..", "..", "docs", "results", "issue13")
		runs := []string{filepath.Join(root, "storm-100k-pcscf-loadsharing"), filepath.Join(root, "storm-100k-scscf-quasipool")}
		for _, r := range runs {
			if _, err := os.Stat(filepath.Join(r, "summary.json.gz")); err != nil {
				Skip("the published storm runs are not in this checkout")
			}
		}
		t, err := results.StormTable(runs)
		Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimSuffix(t, "\n"), "\n")
		Expect(lines[0]).To(Equal("| | `storm-100k-pcscf-loadsharing` | `storm-100k-scscf-quasipool` |"))
		Expect(lines[1]).To(Equal("|---|---|---|"))
		Expect(lines).To(ContainElement("| affected users | 33570 | 35217 |"))
		Expect(lines).To(ContainElement("| median time to restore, probed users (s) | not reached | 0.567245 |"))
		Expect(lines).To(ContainElement("| load shed (overload events) | none | none |"))
	})

	It("is an error for a directory that is not a published run", func() {
		_, err := results.StormTable([]string{GinkgoT().TempDir()})
		Expect(err).To(MatchError(ContainSubstring("summary.json.gz")))
	})
})
