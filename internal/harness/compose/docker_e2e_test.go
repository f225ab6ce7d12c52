package compose_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/testutil"
	"github.com/imslab/quasipool/internal/topology"
)

// record is the part of a phone's record line the spec reads.
type record struct {
	Type   string `json:"type"`
	Kind   string `json:"kind"`
	Result string `json:"result"`
}

var _ = Describe("docker compose up with the committed docker-compose.yml", Label("e2e", "docker"), Ordered, ContinueOnFailure, func() {
	var (
		repo, project string
		eng           *compose.Engine
	)
	dc := func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "docker", append([]string{"compose", "-p", project, "-f",
			filepath.Join(repo, compose.CommittedFile)}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	BeforeAll(func(ctx SpecContext) {
		testutil.RequireDocker(ctx)
		repo = repoRoot()
		var err error
		eng, err = compose.NewEngine()
		Expect(err).NotTo(HaveOccurred())
		Expect(compose.BuildImage(ctx, repo, compose.DefaultImage, nil)).To(Succeed())
		project = fmt.Sprintf("imslab-e2e-%d", GinkgoRandomSeed()%100000)
		// The committed file fixes its subnets, so a network an earlier run left behind (the engine's stale
		// endpoint, see compose.DownProject) would refuse this one: remove those with no container first.
		removeLeftE2ENetworks(ctx)
		DeferCleanup(func(ctx SpecContext) {
			res, err := compose.DownProject(ctx, project, filepath.Join(repo, compose.CommittedFile), 2*time.Second, nil)
			Expect(err).NotTo(HaveOccurred())
			if len(res.Left) > 0 {
				AddReportEntry("networks the engine kept with a stale endpoint", res.Left)
			}
		}, NodeTimeout(2*time.Minute))
		out, err := dc(ctx, "up", "-d", "--wait")
		Expect(err).NotTo(HaveOccurred(), out)
	}, NodeTimeout(5*time.Minute))

	// probeFrom runs imslab probe in the network namespace of a service's container (the image has no shell).
	probeFrom := func(ctx context.Context, service string, args ...string) (string, error) {
		cs, err := eng.Containers(ctx, project)
		Expect(err).NotTo(HaveOccurred())
		Expect(cs).To(HaveKey(service))
		full := append([]string{"run", "--rm", "--network", "container:" + cs[service].ID, compose.DefaultImage,
			"/bin/imslab", "probe"}, args...)
		out, err := exec.CommandContext(ctx, "docker", full...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}

	It("keeps the phones' network away from the CSCFs, dnsd and the HSS", func(ctx SpecContext) {
		t := compose.MustDefault().Topology
		node := func(name string) topology.Node {
			n, ok := t.Node(name)
			Expect(ok).To(BeTrue(), name)
			return n
		}
		// The probes work: inside the core and Cx networks every one of these answers.
		for _, p := range []struct{ from, kind, addr string }{
			{"pcscf1", "sip", node("scscf1").Listen()},
			{"bac", "sip", node("pcscf1").Listen()},
			{"icscf", "tcp", node("hss").Endpoint(topology.PortDiameter)},
			{"scscf1", "tcp", node("hss").Endpoint(topology.PortHTTP)},
		} {
			out, err := probeFrom(ctx, p.from, p.kind, p.addr)
			Expect(err).NotTo(HaveOccurred(), "%s reaches %s: %s", p.from, p.addr, out)
		}
		// From the traffic container (the access network) none of them does, at any of its addresses.
		for _, p := range []struct{ kind, addr string }{
			{"sip", node("pcscf1").Listen()},
			{"sip", node("icscf").Listen()},
			{"sip", node("scscf1").Listen()},
			{"sip", net.JoinHostPort(t.CxAddress(node("scscf1")), "5060")},
			{"sip", node("bac").Listen()}, // the BAC's core side
			{"tcp", node("hss").Endpoint(topology.PortDiameter)},
			{"tcp", node("hss").Endpoint(topology.PortHTTP)},
		} {
			out, err := probeFrom(ctx, compose.TrafficService, p.kind, p.addr, "--timeout", "1s")
			Expect(err).To(HaveOccurred(), "the traffic container reaches %s: %s", p.addr, out)
			Expect(out).To(MatchRegexp(`probe %s %s: .*i/o timeout`, p.kind, regexp.QuoteMeta(p.addr)),
				"the probe ran and nothing answered, not even with an error")
		}
		out, err := probeFrom(ctx, compose.TrafficService, "dns", node("dnsd").Listen(), t.Domain, "--timeout", "1s")
		Expect(err).To(HaveOccurred(), "the traffic container reaches dnsd: %s", out)
		Expect(out).To(MatchRegexp(`probe dns .*i/o timeout`), "the probe ran and nothing answered")
	}, NodeTimeout(2*time.Minute))

	It("brings every service to healthy; the phones register and call through the containers", func(ctx SpecContext) {
		// The phones' way in: the BAC's socket on the access network (access_listen in its configuration).
		// Any SIP answer will do (a BAC may refuse a phone's OPTIONS): only silence means nobody listens.
		out, _ := probeFrom(ctx, compose.TrafficService, "sip", compose.MustDefault().PhoneProxy())
		Expect(out).To(Or(HaveSuffix(" ok"), ContainSubstring("answered")), "the BAC answers on its access address: %s", out)
		cs, err := eng.Containers(ctx, project)
		Expect(err).NotTo(HaveOccurred())
		Expect(cs).To(HaveLen(11))
		for name, c := range cs {
			in, err := eng.Inspect(ctx, c.ID)
			Expect(err).NotTo(HaveOccurred())
			Expect(in.State).To(Equal("running"), name)
			if name != compose.TrafficService {
				Expect(in.Health).To(Equal("healthy"), name)
			}
		}

		// The phones' records land in the data volume.
		var vol struct{ Mountpoint string }
		vb, err := exec.CommandContext(ctx, "docker", "volume", "inspect", "--format", "{{json .}}", project+"_data").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(vb))
		Expect(json.Unmarshal(vb, &vol)).To(Succeed())
		records := filepath.Join(vol.Mountpoint, "records.jsonl")
		count := func() (regs, calls int) {
			f, err := os.Open(records)
			if err != nil {
				return 0, 0
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var r record
				if json.Unmarshal(sc.Bytes(), &r) != nil || r.Result != "ok" {
					continue
				}
				switch {
				case r.Type == "register" && r.Kind == "initial":
					regs++
				case r.Type == "call":
					calls++
				}
			}
			return regs, calls
		}
		Eventually(func() int { r, _ := count(); return r }).WithTimeout(60*time.Second).WithPolling(time.Second).
			Should(Equal(compose.DefaultOptions().Traffic.Phones), "every phone of the traffic service registers")
		Eventually(func() int { _, c := count(); return c }).WithTimeout(60*time.Second).WithPolling(time.Second).
			Should(BeNumerically(">=", 6), "answered calls (both ends record one)")

		// Every node wrote its events into the volume, and the HSS its database.
		for _, n := range compose.ServiceNames(compose.MustDefault().Topology) {
			Expect(filepath.Join(vol.Mountpoint, "events", n+".jsonl")).To(BeAnExistingFile())
		}
		Expect(filepath.Join(vol.Mountpoint, "data", "hss")).To(BeADirectory())
		logs, err := dc(ctx, "logs", "--no-color", "pcscf1")
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Contains(logs, "pcscf1 ready")).To(BeTrue(), logs)
	}, NodeTimeout(4*time.Minute))
})

// removeLeftE2ENetworks removes the networks of earlier runs of this spec that no container uses any more.
func removeLeftE2ENetworks(ctx context.Context) {
	out, err := exec.CommandContext(ctx, "docker", "network", "ls", "--filter", "label=com.docker.compose.project",
		"--format", `{{.Name}} {{.Label "com.docker.compose.project"}}`).Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[1], "imslab-e2e-") {
			continue
		}
		used, err := exec.CommandContext(ctx, "docker", "ps", "-a", "-q", "--filter", "label=com.docker.compose.project="+f[1]).Output()
		if err == nil && strings.TrimSpace(string(used)) == "" {
			if out, err := exec.CommandContext(ctx, "docker", "network", "rm", f[0]).CombinedOutput(); err != nil {
				GinkgoWriter.Printf("could not remove %s, left by an earlier run: %s\n", f[0], out)
			}
		}
	}
}
