package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	imslab "github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/testutil"
	"github.com/imslab/quasipool/internal/topology"
)

// testTopology is the default lab shape on its own ports, so it can run next to a lab on the default ones.
func testTopology(base int) string {
	return fmt.Sprintf(`
domain: ims.test
dns: {listen: 127.0.0.1:%d, ttl: 1s}
hss: {host: hss, address: 127.0.0.1, diameter_port: %d, http_port: %d, lab_subscribers: true}
bac: {host: bac, address: 127.0.0.1, port: %d}
icscf: {host: icscf, address: 127.0.0.1, port: %d}
pools:
  pcscf: {size: 3, address: 127.0.0.1, base_port: %d, weight: 10}
  scscf: {size: 3, address: 127.0.0.1, base_port: %d, weight: 10}
timers: {t1: 500ms, invite_no_answer: 2s, non_invite_no_answer: 2s}
probing: {interval: 1s, timeout: 500ms, failures_to_down: 2, successes_to_up: 1}
registration: {expires: 600s}
log: {format: text, level: info}
`, base, base+1, base+2, base+10, base+20, base+11, base+21)
}

// lab is a topology run as real processes on a free block of ports: dns base, hss diameter/http base+1/+2,
// bac base+10, pcscfK base+10+K, icscf base+20, scscfK base+20+K; base+24… are free for test clients.
type lab struct {
	base  int
	dir   string
	topo  *topology.Topology
	procs map[string]*gexec.Session
	// race runs the nodes built with the race detector; the lab fails the spec when a node reports a race.
	race bool
}

func (l *lab) start(name string) {
	cfg, err := l.topo.NodeConfig(name, topology.InRunDir(l.dir))
	Expect(err).NotTo(HaveOccurred())
	var cmd *exec.Cmd
	path := filepath.Join(l.dir, "config", name+".yaml")
	switch cfg.Kind {
	case topology.KindHSS:
		// The HSS's own format, as the lab writes it: Cx peers from the topology, token in <data_dir>/api-token.
		b, err := imslab.HSSConfigYAML(cfg)
		Expect(err).NotTo(HaveOccurred())
		path = filepath.Join(l.dir, "config", name+"-hss.yaml")
		Expect(os.WriteFile(path, b, 0o644)).To(Succeed())
		hssTokens.Store(cfg.HSS.HTTPListen, filepath.Join(cfg.HSS.DataDir, "api-token"))
		cmd = exec.Command(l.bin("hss"), "--config", path)
	default:
		cmd = exec.Command(l.bin(string(cfg.Kind)), "--config", path)
	}
	logf, err := os.Create(filepath.Join(l.dir, "logs", name+".log"))
	Expect(err).NotTo(HaveOccurred())
	s, err := gexec.Start(cmd, logf, logf)
	Expect(err).NotTo(HaveOccurred())
	l.procs[name] = s
	Eventually(func() string {
		b, _ := os.ReadFile(filepath.Join(l.dir, "logs", name+".log"))
		return string(b)
	}, 20*time.Second, 50*time.Millisecond).Should(Or(ContainSubstring(" ready"), ContainSubstring("msg=\"hss ready\"")), "node %s did not become ready", name)
}

func (l *lab) bin(kind string) string {
	if l.race {
		return raceBinaries[kind]
	}
	return binaries[kind]
}

// races returns the data races the nodes reported in their logs (race-detector builds print them as they happen).
func (l *lab) races() map[string]string {
	found := map[string]string{}
	logs, _ := filepath.Glob(filepath.Join(l.dir, "logs", "*.log"))
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		if i := strings.Index(string(b), "WARNING: DATA RACE"); i >= 0 {
			found[filepath.Base(p)] = string(b[i:min(len(b), i+4000)])
		}
	}
	return found
}

func (l *lab) stop(name string) {
	if s := l.procs[name]; s != nil {
		s.Terminate().Wait(5 * time.Second)
		s.Kill().Wait(2 * time.Second)
		delete(l.procs, name)
	}
}

func (l *lab) kill(name string) {
	if s := l.procs[name]; s != nil {
		s.Kill().Wait(5 * time.Second)
		delete(l.procs, name)
	}
}

func (l *lab) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(l.dir, "logs", name+".log"))
	lines := strings.Split(string(b), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

func (l *lab) port(off int) string { return fmt.Sprintf("127.0.0.1:%d", l.base+off) }
func (l *lab) dns() string         { return l.port(0) }
func (l *lab) hssHTTP() string     { return l.port(2) }
func (l *lab) bac() string         { return l.port(10) }
func (l *lab) icscf() string       { return l.port(20) }

// startLab runs every node of the topology; the lab is stopped when the spec ends. edits change the topology
// document first (e.g. a pool's scheme).
func startLab(edits ...func(doc string) string) *lab {
	return startLabOf(false, edits...)
}

// startRaceLab is startLab with every node built with the race detector: the spec fails when a node reports a
// data race.
func startRaceLab(edits ...func(doc string) string) *lab {
	return startLabOf(true, edits...)
}

func startLabOf(race bool, edits ...func(doc string) string) *lab {
	base, err := testutil.FreeBlock(30)
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	doc := testTopology(base)
	for _, e := range edits {
		doc = e(doc)
	}
	topo, err := topology.Parse([]byte(doc))
	Expect(err).NotTo(HaveOccurred())
	for _, d := range []string{"config", "logs", "events", "trace", "data"} {
		Expect(os.MkdirAll(filepath.Join(dir, d), 0o755)).To(Succeed())
	}
	Expect(topo.WriteFile(filepath.Join(dir, "topology.yaml"))).To(Succeed())
	Expect(topo.WriteNodeConfigs(filepath.Join(dir, "config"), topology.InRunDir(dir))).To(Succeed())
	l := &lab{base: base, dir: dir, topo: topo, procs: map[string]*gexec.Session{}, race: race}
	if race {
		DeferCleanup(func() {
			Expect(l.races()).To(BeEmpty(), "data races reported by the nodes")
		})
	}
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			for name := range l.procs {
				GinkgoWriter.Printf("---- %s ----\n%s\n", name, l.logTail(name))
			}
		}
		for name := range l.procs {
			l.stop(name)
		}
	})
	for _, n := range topo.Nodes() {
		l.start(n.Name)
	}
	return l
}
