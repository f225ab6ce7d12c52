package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// withoutProvenance drops the lines that say when, where and by which commit a study was aggregated (they change
// with every regeneration); every other line of docs/results.md is a number or a word made from the runs.
func withoutProvenance(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "Provenance: aggregated at commit") {
			out = append(out, l)
		}
	}
	return out
}

var _ = Describe("docs/results.md", Label("integration"), func() {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())

	It("is what the committed runs give: `make results` on a copy of docs/ changes nothing but the provenance lines",
		func() {
			tmp := GinkgoT().TempDir()
			bin := filepath.Join(tmp, "imslab")
			build := exec.Command("go", "build", "-o", bin, "./cmd/imslab")
			build.Dir = root
			out, err := build.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))

			// The copy: the study files and the scenarios they name, docs/results.md, every published study's
			// runs and the storm runs.
			work := filepath.Join(tmp, "repo")
			for _, d := range []string{"studies", "scenarios", "topologies"} {
				Expect(os.CopyFS(filepath.Join(work, d), os.DirFS(filepath.Join(root, d)))).To(Succeed(), d)
			}
			studies, err := filepath.Glob(filepath.Join(root, "docs", "results", "study-*"))
			Expect(err).NotTo(HaveOccurred())
			Expect(studies).NotTo(BeEmpty())
			// and the 100k storm runs whose table `imslab results storms` writes
			storms, err := filepath.Glob(filepath.Join(root, "docs", "results", "issue13", "storm-100k-*"))
			Expect(err).NotTo(HaveOccurred())
			for _, d := range append(studies, storms...) {
				rel, err := filepath.Rel(root, d)
				Expect(err).NotTo(HaveOccurred())
				Expect(os.CopyFS(filepath.Join(work, rel), os.DirFS(d))).To(Succeed(), rel)
			}
			want, err := os.ReadFile(filepath.Join(root, "docs", "results.md"))
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(work, "docs", "results.md"), want, 0o644)).To(Succeed())

			cmd := exec.Command(bin, "results", "--repo", work, "all")
			out, err = cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			Expect(string(out)).To(ContainSubstring("claims overview updated"))

			got, err := os.ReadFile(filepath.Join(work, "docs", "results.md"))
			Expect(err).NotTo(HaveOccurred())
			g, w := withoutProvenance(string(got)), withoutProvenance(string(want))
			for i := range min(len(g), len(w)) {
				Expect(g[i]).To(Equal(w[i]), "docs/results.md line %d (provenance lines left out) is not what the "+
					"committed runs give: run `make results` and commit the result", i+1)
			}
			Expect(g).To(HaveLen(len(w)), "docs/results.md: regenerated, it has another number of lines")
		})
})
