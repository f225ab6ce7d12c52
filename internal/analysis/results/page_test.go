package results_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/results"
)

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
		// Written before restoration was timed at the answer, and read at the answer (0.567245 s at the probes'
		// start, 1 at the bound).
		Expect(lines).To(ContainElement("| median time to the answer, probed users (s) | not reached | 2.850045 |"))
		Expect(lines).To(ContainElement("| probed users answered again by the last detection + one probe interval | 0 | 0.73 |"))
		Expect(lines).To(ContainElement("| load shed (overload events) | none | none |"))
	})

	It("is an error for a directory that is not a published run", func() {
		_, err := results.StormTable([]string{GinkgoT().TempDir()})
		Expect(err).To(MatchError(ContainSubstring("summary.json.gz")))
	})
})
