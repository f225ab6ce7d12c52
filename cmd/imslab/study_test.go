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

var _ = Describe("imslab study", Label("unit"), func() {
	repo, _ := filepath.Abs(filepath.Join("..", ".."))

	It("refuses a bad study file with exit status 2, naming the field", func() {
		f := filepath.Join(GinkgoT().TempDir(), "bad.yaml")
		Expect(os.WriteFile(f, []byte("name: t\nout: o\nexperiments: [{name: a, scenario: x.yaml, seed: 0, repeat: 1}]\n"), 0o644)).To(Succeed())
		s, err := gexec.Start(exec.Command(bin, "study", f), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).WithTimeout(20 * time.Second).Should(gexec.Exit(2))
		Expect(s.Err).To(gbytes.Say(`experiments\[0\]\.seed`))
	})

	It("prints the interleaved plan of the shipped quick study with --dry-run", func() {
		out := GinkgoT().TempDir()
		cmd := exec.Command(bin, "study", filepath.Join(repo, "studies", "quick.yaml"), "--quick", "--dry-run", "--out", out)
		s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).WithTimeout(20 * time.Second).Should(gexec.Exit(0))
		Expect(s.Out).To(gbytes.Say(`pcscf-kill/quasi-pool/rep1\s+seed 1201\s+to run`))
		Expect(s.Out).To(gbytes.Say(`pcscf-kill/load-sharing\+ignore-504/rep1\s+seed 1201\s+to run`))
		Expect(s.Out).To(gbytes.Say(`pcscf-kill/quasi-pool/rep2\s+seed 1202\s+to run`))
		Expect(s.Out).To(gbytes.Say(`4 runs, 4 to run`))
	})

	It("lists every expanded run of the shipped sweeps study with --dry-run, full and quick", func() {
		out := GinkgoT().TempDir()
		cmd := exec.Command(bin, "study", filepath.Join(repo, "studies", "sweeps.yaml"), "--dry-run", "--out", out)
		s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).WithTimeout(20 * time.Second).Should(gexec.Exit(0))
		Expect(s.Out).To(gbytes.Say(`probe-interval@probing.interval=0.5s/quasi-pool/rep1\s+seed 130001\s+to run`))
		Expect(s.Out).To(gbytes.Say(`probe-interval@probing.interval=1s/quasi-pool/rep1\s+seed 130001\s+to run`))
		Expect(s.Out).To(gbytes.Say(`pool-size-mutual@pool_size=6/mutual/rep5\s+seed 130505\s+to run`))
		Expect(s.Out).To(gbytes.Say(`380 runs, 380 to run`))

		cmd = exec.Command(bin, "study", filepath.Join(repo, "studies", "sweeps.yaml"), "--quick", "--dry-run", "--out", out)
		s, err = gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).WithTimeout(20 * time.Second).Should(gexec.Exit(0))
		Expect(s.Out).To(gbytes.Say(`12 runs, 12 to run`))
	})

	It("--results-only runs nothing, writes the outputs from the runs done and exits 1 while runs are pending", func() {
		out := GinkgoT().TempDir()
		cmd := exec.Command(bin, "study", filepath.Join(repo, "studies", "quick.yaml"), "--quick", "--results-only", "--out", out)
		s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).WithTimeout(30 * time.Second).Should(gexec.Exit(1))
		Expect(s.Out).To(gbytes.Say(`pcscf-kill/quasi-pool rep 1 \(seed 1201\): not run yet, pending \(results only: nothing is run\)`))
		Expect(s.Out).To(gbytes.Say(`0 of 4 runs done; wrote`))
		Expect(s.Err).To(gbytes.Say(`4 of 4 runs: some runs are not done`))
		for _, f := range []string{"study.json", "study.md", "results.md"} {
			Expect(filepath.Join(out, f)).To(BeAnExistingFile())
		}
		Expect(filepath.Join(out, "pcscf-kill")).NotTo(BeADirectory(), "no run was started")
	})
})
