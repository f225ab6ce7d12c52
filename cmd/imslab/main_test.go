package main_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
)

// topologyFile writes a topology on a free block of ports and returns its path.
func topologyFile() string {
	GinkgoHelper()
	var base int
	for try := 0; try < 100 && base == 0; try++ {
		b := 20000 + rand.IntN(40000)
		ok := true
		for p := b; p < b+10 && ok; p++ {
			u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				continue
			}
			t, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			u.Close()
			if err != nil {
				ok = false
				continue
			}
			t.Close()
		}
		if ok {
			base = b
		}
	}
	Expect(base).NotTo(BeZero())
	path := filepath.Join(GinkgoT().TempDir(), "topology.yaml")
	Expect(os.WriteFile(path, []byte(fmt.Sprintf(`
domain: ims.test
dns: {listen: 127.0.0.1:%d}
hss: {address: 127.0.0.1, diameter_port: %d, http_port: %d}
bac: {address: 127.0.0.1, port: %d}
icscf: {address: 127.0.0.1, port: %d}
pools:
  pcscf: {size: 2, address: 127.0.0.1, base_port: %d}
  scscf: {size: 2, address: 127.0.0.1, base_port: %d}
`, base, base+1, base+2, base+3, base+4, base+5, base+7)), 0o644)).To(Succeed())
	return path
}

// startedPIDs reads the pids of node_start events from the lab's events file.
func startedPIDs(runDir string) []int {
	b, err := os.ReadFile(filepath.Join(runDir, "events", "lab.jsonl"))
	Expect(err).NotTo(HaveOccurred())
	var pids []int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Kind string `json:"kind"`
			PID  int    `json:"pid"`
		}
		Expect(json.Unmarshal([]byte(line), &e)).To(Succeed())
		if e.Kind == "node_start" {
			pids = append(pids, e.PID)
		}
	}
	return pids
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

var _ = Describe("imslab up", Label("e2e"), func() {
	It("starts dnsd and hss, prints the table and stops everything on SIGTERM", SpecTimeout(4*time.Minute), func(ctx SpecContext) {
		run := filepath.Join(GinkgoT().TempDir(), "run")
		s, err := gexec.Start(exec.Command(bin, "up", "--topology", topologyFile(), "--run-dir", run, "--only", "dnsd,hss"),
			GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { s.Kill().Wait(5 * time.Second) })
		Eventually(s.Out, 3*time.Minute).Should(gbytes.Say(`Ctrl-C stops the lab`))
		out := string(s.Out.Contents())
		Expect(out).To(MatchRegexp(`NODE\s+KIND\s+ADDRESSES\s+PID\s+STATE`))
		Expect(out).To(MatchRegexp(`dnsd\s+dnsd\s+dns 127\.0\.0\.1:\d+/udp\+tcp\s+\d+\s+ready`))
		Expect(out).To(MatchRegexp(`hss\s+hss\s+diameter 127\.0\.0\.1:\d+/tcp, http 127\.0\.0\.1:\d+/tcp\s+\d+\s+ready`))
		Expect(out).To(MatchRegexp(`pcscf1\s+pcscf\s+sip 127\.0\.0\.1:\d+/udp\s+-\s+(not selected|not built yet)`))
		tokenFile := filepath.Join(run, "hss-api-token")
		Expect(out).To(ContainSubstring("HSS API token: " + tokenFile))
		Expect(out).To(MatchRegexp(`curl -H "Authorization: Bearer \$\(cat .*hss-api-token\)" http://127\.0\.0\.1:\d+/api/v1/subscribers`))
		Expect(tokenFile).To(BeAnExistingFile())
		pids := startedPIDs(run)
		Expect(pids).To(HaveLen(2))

		s.Signal(syscall.SIGTERM)
		Eventually(s, 30*time.Second).Should(gexec.Exit(0))
		for _, p := range pids {
			Eventually(func() bool { return alive(p) }).Should(BeFalse())
		}
	})

	It("exits non-zero naming the node that failed, with its log, and leaves nothing running", SpecTimeout(4*time.Minute), func(ctx SpecContext) {
		run := filepath.Join(GinkgoT().TempDir(), "run")
		Expect(os.MkdirAll(filepath.Join(run, "data"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(run, "data", "hss"), []byte("not a directory"), 0o644)).To(Succeed())
		s, err := gexec.Start(exec.Command(bin, "up", "--topology", topologyFile(), "--run-dir", run, "--only", "dnsd,hss"),
			GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 3*time.Minute).Should(gexec.Exit(1))
		Expect(s.Err).To(gbytes.Say(`imslab: lab: node hss did not start: exited before it was ready \(exit status 1\)`))
		Expect(s.Err).To(gbytes.Say(`--- last lines of .*/logs/hss.log ---`))
		Expect(s.Err).To(gbytes.Say(`not a directory`))
		for _, p := range startedPIDs(run) {
			Eventually(func() bool { return alive(p) }).Should(BeFalse())
		}
	})

	It("explains its usage", func() {
		s, err := gexec.Start(exec.Command(bin), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(2))
		Expect(s.Err).To(gbytes.Say("usage: imslab <command>"))
		s, err = gexec.Start(exec.Command(bin, "up", "--only", "pcscf9"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(1))
		Expect(s.Err).To(gbytes.Say(`lab config: only: "pcscf9" is not a node of the topology`))
	})

	It("takes a scenario file between flags, and names a missing one", func() {
		for _, args := range [][]string{
			{"run", "--backend", "compose", "missing.yaml", "--out", "x"},
			{"compare", "--seed", "7", "missing.yaml", "--schemes", "quasi-pool"},
			{"run", "missing.yaml", "--seed", "3"},
		} {
			s, err := gexec.Start(exec.Command(bin, args...), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			Eventually(s).Should(gexec.Exit(2))
			Expect(s.Err).To(gbytes.Say(`missing.yaml`), "%v", args)
			Expect(string(s.Err.Contents())).NotTo(ContainSubstring("give exactly one scenario file"), "%v", args)
		}
		s, err := gexec.Start(exec.Command(bin, "run", "--backend", "podman", "missing.yaml"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(2))
	})

	It("overrides a scenario's phones with --phones, and refuses a count the lab cannot provision", func() {
		s, err := gexec.Start(exec.Command(bin, "run", "../../scenarios/storm-pcscf-loadsharing.yaml", "--phones", "1000000",
			"--out", filepath.Join(GinkgoT().TempDir(), "x")), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(2))
		Expect(s.Err).To(gbytes.Say(`--phones: .*traffic.phones: users 1..1000000 go beyond user999999, the largest population the lab provisions`))
	})

	It("refuses a port offset that takes the lab's ports out of range, from the flag or the environment", func() {
		for _, env := range []string{"", "IMSLAB_PORT_OFFSET=70000"} {
			out := filepath.Join(GinkgoT().TempDir(), "run")
			args := []string{"run", "../../scenarios/baseline.yaml", "--out", out}
			if env == "" {
				args = append(args, "--port-offset", "70000")
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), env)
			s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			Eventually(s).Should(gexec.Exit(2))
			Expect(s.Err).To(gbytes.Say(`port offset 70000: must be from 0 to 50000`), env)
			Expect(out).NotTo(BeAnExistingFile())
		}
	})

	It("refuses mutual with an odd number of active members before running anything, and says how to fix it", func() {
		out := filepath.Join(GinkgoT().TempDir(), "cmp")
		s, err := gexec.Start(exec.Command(bin, "compare", "../../scenarios/compare-pcscf-kill.yaml", "--schemes",
			"quasi-pool,mutual", "--out", out), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(2))
		Expect(s.Err).To(gbytes.Say(`mutual: 3 active members per pool: mutual pairs them .*--pool-size 4`))
		Expect(out).NotTo(BeAnExistingFile())
	})

	It("checks that the committed compose lab is current and probes services", func() {
		s, err := gexec.Start(exec.Command(bin, "compose", "--check", "--file", "../../docker-compose.yml",
			"--config-dir", "../../deploy/compose"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(0))
		Expect(s.Out).To(gbytes.Say("up to date"))
		dir := GinkgoT().TempDir()
		s, err = gexec.Start(exec.Command(bin, "compose", "--check", "--file", filepath.Join(dir, "dc.yml"),
			"--config-dir", filepath.Join(dir, "cfg")), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(1))
		Expect(s.Err).To(gbytes.Say("stale"))

		// Nothing listens on this UDP port: the SIP probe fails after its timeout; a bad kind is an error.
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		defer c.Close()
		s, err = gexec.Start(exec.Command(bin, "probe", "sip", c.LocalAddr().String(), "--timeout", "200ms"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(1))
		Expect(s.Err).To(gbytes.Say("no answer"))
		s, err = gexec.Start(exec.Command(bin, "probe", "http", "127.0.0.1:1"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s).Should(gexec.Exit(1))
		Expect(s.Err).To(gbytes.Say(`unknown kind "http"`))
	})
})
