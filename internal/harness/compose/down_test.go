package compose_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/topology"
)

var _ = Describe("taking a compose lab down when the engine keeps a stale endpoint", Label("unit"), func() {
	// A stand-in docker. `compose … down` fails as the engine (20.10) does when its store still counts an
	// endpoint of a removed container, $REFUSALS times (all of them when unset) or until a forced disconnect
	// worked; `network disconnect -f` works when $FORCE_WORKS=1; `ps -a --filter …` prints the project's
	// container names from $NAMES (read before the removal), `compose … ps -a -q` the containers left from $LEFT.
	// Every call is recorded in $STATE/calls.
	type rig struct {
		err           error
		events, calls string
	}
	down := func(env map[string]string) rig {
		GinkgoHelper()
		DeferCleanup(compose.SetDownRetryWait(10 * time.Millisecond))
		bin, state := GinkgoT().TempDir(), GinkgoT().TempDir()
		script := "#!/bin/sh\necho \"$*\" >> \"$STATE/calls\"\ncase \"$*\" in\n" +
			"'ps -a --filter'*) printf '%s' \"$NAMES\"; exit 0;;\n" +
			"'network ls'*) echo imslab-x_core; exit 0;;\n" +
			"'network disconnect -f '*) if [ \"$FORCE_WORKS\" = 1 ]; then touch \"$STATE/forced\"; exit 0; fi; " +
			"echo 'Error response from daemon: endpoint not found' >&2; exit 1;;\n" +
			"*' down '*) [ -e \"$STATE/forced\" ] && exit 0; n=$(grep -c ' down ' \"$STATE/calls\"); " +
			"if [ -n \"$REFUSALS\" ] && [ \"$n\" -gt \"$REFUSALS\" ]; then exit 0; fi; " +
			"echo ' Network imslab-x_core  Error'; echo 'failed to remove network imslab-x_core: Error response from daemon: " +
			"error while removing network: network imslab-x_core id 669ec651 has active endpoints'; exit 1;;\n" +
			"*'ps -a -q'*) printf '%s' \"$LEFT\"; exit 0;;\n" +
			"*) exit 0;;\nesac\n"
		Expect(os.WriteFile(filepath.Join(bin, "docker"), []byte(script), 0o755)).To(Succeed())
		GinkgoT().Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		GinkgoT().Setenv("STATE", state)
		for _, k := range []string{"NAMES", "LEFT", "FORCE_WORKS", "REFUSALS"} {
			GinkgoT().Setenv(k, env[k])
		}
		run := filepath.Join(GinkgoT().TempDir(), "run")
		l, err := compose.New(compose.Config{Topology: topology.Default(), RunDir: run})
		Expect(err).NotTo(HaveOccurred())
		compose.MarkUp(l)
		var r rig
		r.err = l.Down()
		Expect(l.Close()).To(Succeed())
		b, rerr := os.ReadFile(filepath.Join(run, "events", "lab.jsonl"))
		Expect(rerr).NotTo(HaveOccurred())
		r.events = string(b)
		c, _ := os.ReadFile(filepath.Join(state, "calls"))
		r.calls = string(c)
		return r
	}
	downs := func(calls string) int { return strings.Count(calls, " down ") }

	It("removes the project again when the engine refuses it once, and says nothing is left", func() {
		r := down(map[string]string{"REFUSALS": "1"})
		Expect(r.err).NotTo(HaveOccurred())
		Expect(downs(r.calls)).To(Equal(2))
		Expect(r.events).NotTo(ContainSubstring("network_left"))
	})

	It("deletes the stale endpoint by its container's name when the engine keeps refusing, and the network goes", func() {
		r := down(map[string]string{"NAMES": "imslab-x-pcscf1-1\nimslab-x-hss-1\n", "FORCE_WORKS": "1"})
		Expect(r.err).NotTo(HaveOccurred())
		Expect(r.calls).To(ContainSubstring("network disconnect -f imslab-x_core imslab-x-pcscf1-1\n"),
			"by name: the engine does not find a removed container's endpoint by its ID")
		Expect(r.calls).To(ContainSubstring("network disconnect -f imslab-x_core imslab-x-hss-1\n"))
		Expect(downs(r.calls)).To(Equal(4), "three refused tries, then one after the forced disconnect")
		Expect(r.events).To(MatchRegexp(`"endpoints":\["imslab-x_core/imslab-x-pcscf1-1","imslab-x_core/imslab-x-hss-1"\],"kind":"network_endpoint_forced"`))
		Expect(r.events).NotTo(ContainSubstring("network_left"))
	})

	It("lets the run stand when no container is left and even the forced disconnect fails, and says which network the engine kept", func() {
		r := down(map[string]string{"NAMES": "imslab-x-pcscf1-1\n"})
		Expect(r.err).NotTo(HaveOccurred())
		Expect(r.events).To(MatchRegexp(`"kind":"network_left","networks":\["imslab-x_core"\]`))
	})

	It("fails when a container of the project is still there", func() {
		r := down(map[string]string{"LEFT": "3f1c2a9b7d10\n"})
		Expect(r.err).To(MatchError(ContainSubstring("active endpoints")))
		Expect(r.events).NotTo(ContainSubstring("network_left"))
	})
})
