package compose_test

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/compose"
	"github.com/imslab/quasipool/internal/topology"
)

var _ = Describe("taking a compose lab down when the engine keeps a stale endpoint", Label("unit"), func() {
	// A stand-in docker: `compose … down` fails as the engine (20.10) does when its store still counts an
	// endpoint of a removed container; `compose … ps -a -q` prints the project's containers from $LEFT.
	down := func(containersLeft string) (error, string) {
		GinkgoHelper()
		bin := GinkgoT().TempDir()
		script := "#!/bin/sh\ncase \"$*\" in\n" +
			"*' down '*) echo ' Network imslab-x_core  Error'; echo 'failed to remove network imslab-x_core: Error response from daemon: error while removing network: network imslab-x_core id 669ec651 has active endpoints'; exit 1;;\n" +
			"*'ps -a -q'*) printf '%s' \"$LEFT\"; exit 0;;\n" +
			"*) exit 0;;\nesac\n"
		Expect(os.WriteFile(filepath.Join(bin, "docker"), []byte(script), 0o755)).To(Succeed())
		GinkgoT().Setenv("PATH", bin)
		GinkgoT().Setenv("LEFT", containersLeft)
		run := filepath.Join(GinkgoT().TempDir(), "run")
		l, err := compose.New(compose.Config{Topology: topology.Default(), RunDir: run})
		Expect(err).NotTo(HaveOccurred())
		compose.MarkUp(l)
		err = l.Down()
		Expect(l.Close()).To(Succeed())
		b, rerr := os.ReadFile(filepath.Join(run, "events", "lab.jsonl"))
		Expect(rerr).NotTo(HaveOccurred())
		return err, string(b)
	}

	It("lets the run stand when no container is left, and says which network the engine kept", func() {
		err, events := down("")
		Expect(err).NotTo(HaveOccurred())
		Expect(events).To(MatchRegexp(`"error":"[^\n]*has active endpoints[^\n]*"kind":"network_left"`))
	})

	It("fails when a container of the project is still there", func() {
		err, events := down("3f1c2a9b7d10\n")
		Expect(err).To(MatchError(ContainSubstring("active endpoints")))
		Expect(events).NotTo(ContainSubstring("network_left"))
	})
})
