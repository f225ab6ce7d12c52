package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

// These specs never run the namespace part: netns.Clean removes every imslab namespace without a live record in
// the record directory, so with a test directory it would remove the live labs of other suites on the machine.
var _ = Describe("imslab clean", Label("unit"), func() {
	It("removes the empty cpu cgroups left behind, keeps a busy one, and skips compose without an engine", func() {
		root := GinkgoT().TempDir()
		stale := filepath.Join(root, "imslab.pcscf1.4242")
		busy := filepath.Join(root, "imslab.scscf1.4343")
		other := filepath.Join(root, "someone-else")
		for _, d := range []string{stale, busy, other} {
			Expect(os.Mkdir(d, 0o755)).To(Succeed())
		}
		Expect(os.WriteFile(filepath.Join(busy, "cgroup.procs"), []byte("4343\n"), 0o644)).To(Succeed()) // not empty
		sock := filepath.Join(GinkgoT().TempDir(), "no-docker.sock")
		s, err := gexec.Start(exec.Command(bin, "clean", "--parts", "cgroups,compose", "--cpu-cgroup-root", root,
			"--docker-socket", sock), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 30*time.Second).Should(gexec.Exit(0))
		out := string(s.Out.Contents())
		Expect(out).To(ContainSubstring("clean: namespaces: skipped (--parts)"))
		Expect(out).To(ContainSubstring("clean: cpu cgroups: removed 1 ([imslab.pcscf1.4242]) under " + root))
		Expect(out).To(MatchRegexp(`clean: compose: skipped: no Docker engine: .*no-docker\.sock`))
		Expect(stale).NotTo(BeADirectory())
		Expect(busy).To(BeADirectory())
		Expect(other).To(BeADirectory())

		s, err = gexec.Start(exec.Command(bin, "clean", "--parts", "cgroups", "--cpu-cgroup-root", root),
			GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 30*time.Second).Should(gexec.Exit(0))
		Expect(string(s.Out.Contents())).To(And(ContainSubstring("cpu cgroups: none left behind"),
			ContainSubstring("compose: skipped (--parts)")))
	})

	It("refuses a part it does not know", func() {
		s, err := gexec.Start(exec.Command(bin, "clean", "--parts", "cgroups,docker"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 30*time.Second).Should(gexec.Exit())
		Expect(s.ExitCode()).NotTo(BeZero())
		Expect(string(s.Err.Contents())).To(ContainSubstring(`--parts: "docker" is not a part (namespaces, cgroups, compose)`))
	})
})
