package compose_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/netns"
	"github.com/imslab/quasipool/internal/harness/testutil"
)

// imslab clean against a real Docker engine: three compose projects made with the docker CLI (a network and a
// created container each, the labels the compose lab puts on them): one whose owner process has died, one whose
// owner runs (this test process) and one without owner labels (a `docker compose up` by hand). CleanProjects must
// remove the first whole and leave the other two as they are.
var _ = Describe("imslab clean against a real Docker engine", Label("e2e", "docker"), func() {
	It("removes the project of a dead owner and leaves a live run's and an unlabelled one", func(ctx SpecContext) {
		testutil.RequireDocker(ctx)
		docker := func(args ...string) string {
			GinkgoHelper()
			out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "docker %s: %s", strings.Join(args, " "), out)
			return strings.TrimSpace(string(out))
		}
		// An empty image, made offline (nothing is pulled): created containers need one, never run.
		tar := exec.CommandContext(ctx, "sh", "-c", "tar cf - --files-from /dev/null | docker import - imslab-clean-test:empty")
		out, err := tar.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))

		owner := exec.Command("sleep", "300")
		Expect(owner.Start()).To(Succeed())
		deadStart, err := netns.ProcessStart(owner.Process.Pid)
		Expect(err).NotTo(HaveOccurred())
		deadPID := owner.Process.Pid
		Expect(owner.Process.Kill()).To(Succeed())
		_ = owner.Wait()

		host, _ := os.Hostname()
		liveStart, err := netns.ProcessStart(os.Getpid())
		Expect(err).NotTo(HaveOccurred())
		suffix := strconv.FormatInt(GinkgoRandomSeed()%100000, 10)
		dead, live, bare := "imslab-clean-dead-"+suffix, "imslab-clean-live-"+suffix, "imslab-clean-bare-"+suffix
		labels := func(project string, pid int, start uint64) []string {
			l := []string{"--label", "com.docker.compose.project=" + project}
			if pid != 0 {
				l = append(l, "--label", fmt.Sprintf("%s=%d", compose.LabelOwnerPID, pid),
					"--label", fmt.Sprintf("%s=%d", compose.LabelOwnerStart, start),
					"--label", compose.LabelOwnerHost+"="+host)
			}
			return l
		}
		for _, p := range []struct {
			name  string
			pid   int
			start uint64
		}{{dead, deadPID, deadStart}, {live, os.Getpid(), liveStart}, {bare, 0, 0}} {
			DeferCleanup(func(ctx SpecContext) {
				_ = exec.CommandContext(ctx, "docker", "rm", "-f", p.name+"-c").Run()
				_ = exec.CommandContext(ctx, "docker", "network", "rm", p.name+"-n").Run()
			}, NodeTimeout(time.Minute))
			docker(append(append([]string{"network", "create"}, labels(p.name, p.pid, p.start)...), p.name+"-n")...)
			docker(append(append([]string{"create", "--name", p.name + "-c", "--network", p.name + "-n"},
				labels(p.name, p.pid, p.start)...), "imslab-clean-test:empty", "/none")...)
		}

		eng, err := compose.NewEngine()
		Expect(err).NotTo(HaveOccurred())
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		res, err := compose.CleanProjects(cctx, eng, nil)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println("clean:", res.String())
		Expect(res.Removed).To(ContainElement(dead))
		Expect(res.Removed).NotTo(ContainElement(live))
		Expect(res.Live).To(ContainElement(live))
		Expect(res.Containers).To(ContainElement(dead + "-c"))
		Expect(res.Networks).To(ContainElement(dead + "-n"))

		By("seen by the engine, not by CleanProjects' own word")
		names := docker("ps", "-a", "--format", "{{.Names}}")
		Expect(names).NotTo(ContainSubstring(dead+"-c"), "the dead owner's container is gone")
		Expect(names).To(ContainSubstring(live+"-c"), "the live run's container stays")
		Expect(names).To(ContainSubstring(bare+"-c"), "the unlabelled container stays")
		nets := docker("network", "ls", "--format", "{{.Name}}")
		Expect(nets).NotTo(ContainSubstring(dead+"-n"), "the dead owner's network is gone")
		Expect(nets).To(ContainSubstring(live + "-n"))
		Expect(nets).To(ContainSubstring(bare + "-n"))
	}, NodeTimeout(3*time.Minute))
})
