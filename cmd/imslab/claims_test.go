package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
)

var _ = Describe("imslab claims", Label("unit"), func() {
	repo, _ := filepath.Abs(filepath.Join("..", ".."))

	It("writes the overview of the committed studies' claims, linked relative to --base", func() {
		cmd := exec.Command(bin, "claims", "--base", "docs", "docs/results/study-published/study.json",
			"docs/results/study-risk/study.json")
		cmd.Dir = repo
		s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).WithTimeout(20 * time.Second).Should(gexec.Exit(0))
		Expect(s.Out).To(gbytes.Say(`claims from 2 studies: `))
		Expect(s.Out).To(gbytes.Say("\\| `no-timely-restore`: §2.2.1 .*\\[published\\]\\(results/study-published/study.md\\)"))
		Expect(s.Out).To(gbytes.Say("\\| `risk-quasi-pool-low`: Table 1 倒换风险.*\\[risk\\]\\(results/study-risk/study.md\\)"))
	})

	It("refuses a file that is not a study.json with exit status 2, naming it", func() {
		f := filepath.Join(GinkgoT().TempDir(), "study.json")
		Expect(os.WriteFile(f, []byte(`{"runs": 3}`), 0o644)).To(Succeed())
		for _, args := range [][]string{{"claims", f}, {"claims", f + ".missing"}, {"claims"}} {
			s, err := gexec.Start(exec.Command(bin, args...), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			Eventually(s).WithTimeout(20 * time.Second).Should(gexec.Exit(2))
			if len(args) > 1 {
				Expect(s.Err).To(gbytes.Say(`imslab claims: .*study.json`))
			}
		}
	})
})
