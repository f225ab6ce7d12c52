package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// linkRe finds a markdown link's target: ](target) or ](target#anchor).
var linkRe = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// schemeRe matches a link with a URL scheme (http:, https:, mailto:), which is not a file of the repository.
var schemeRe = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)

// brokenLinks lists the relative links of a markdown file whose target does not exist.
func brokenLinks(file string) []string {
	b, err := os.ReadFile(file)
	Expect(err).NotTo(HaveOccurred())
	var bad []string
	for _, m := range linkRe.FindAllStringSubmatch(string(b), -1) {
		target := m[1]
		if schemeRe.MatchString(target) {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(file), target)); err != nil {
			bad = append(bad, target)
		}
	}
	return bad
}

var _ = Describe("the documentation", Label("unit"), func() {
	root := filepath.Join("..", "..")
	// What a reader follows: the README, the docs, every published result's README, and the generated outputs
	// of the published studies (their tables link each run's files and the figures).
	var files []string
	for _, pattern := range []string{
		"README.md", "docs/*.md", "docs/results/*/README.md",
		"docs/results/study-published/*.md", "docs/results/study-risk/*.md", "docs/results/study-cost/*.md",
		"docs/results/study-table1/*.md",
	} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			panic(err)
		}
		files = append(files, m...)
	}

	It("has files to check", func() {
		Expect(len(files)).To(BeNumerically(">", 20))
	})

	It("has no relative link to a file that is not in the repository", func() {
		bad := map[string][]string{}
		for _, f := range files {
			if l := brokenLinks(f); len(l) > 0 {
				rel, _ := filepath.Rel(root, f)
				bad[rel] = l
			}
		}
		Expect(bad).To(BeEmpty(), "broken links by file: %s", func() string {
			var s []string
			for f, l := range bad {
				s = append(s, f+": "+strings.Join(l, ", "))
			}
			return strings.Join(s, "; ")
		}())
	})
})
