package compose_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/compose"
	"github.com/imslab/quasipool/internal/testutil"
)

// record is the part of a phone's record line the spec reads.
type record struct {
	Type   string `json:"type"`
	Kind   string `json:"kind"`
	Result string `json:"result"`
}

var _ = Describe("docker compose up with the committed docker-compose.yml", Label("e2e", "docker"), Ordered, func() {
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
		DeferCleanup(func(ctx SpecContext) {
			out, err := dc(ctx, "down", "-v", "-t", "2")
			Expect(err).NotTo(HaveOccurred(), out)
		}, NodeTimeout(time.Minute))
	}, NodeTimeout(5*time.Minute))

	It("brings every service to healthy; the phones register and call through the containers", func(ctx SpecContext) {
		out, err := dc(ctx, "up", "-d", "--wait")
		Expect(err).NotTo(HaveOccurred(), out)
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
