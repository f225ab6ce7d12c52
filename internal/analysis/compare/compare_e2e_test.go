package compare_test

import (
	"encoding/csv"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/compare"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/testutil"
)

// A shortened real comparison: compare-pcscf-kill with 12 phones for 16 s (the kill at 6 s), quasi-pool against
// load-sharing, on a free block of ports. The registration period stays long, so no affected user re-registers on
// its own during the run: quasi-pool must serve them all anyway, load-sharing none before they re-register.
var _ = Describe("a real comparison", Label("e2e", "full"), Ordered, func() {
	var (
		dir string
		res *compare.Result
	)

	BeforeAll(func(ctx SpecContext) {
		wd, err := os.Getwd()
		Expect(err).NotTo(HaveOccurred())
		repo, err := lab.FindRepo(wd)
		Expect(err).NotTo(HaveOccurred())
		bin, err := testutil.BinDir(ctx, false) // built once per test run
		Expect(err).NotTo(HaveOccurred())

		sc, err := scenario.Load(filepath.Join(repo, "scenarios", "compare-pcscf-kill.yaml"))
		Expect(err).NotTo(HaveOccurred())
		sc.Duration, sc.Faults[0].At = 16*time.Second, 6*time.Second
		sc.Traffic.Phones, sc.Traffic.RegisterRate = 12, 50
		sc.Topology.Registration.Expires = 300 * time.Second
		base, err := testutil.FreeBlock(11)
		Expect(err).NotTo(HaveOccurred())
		t := &sc.Topology
		t.DNS.Listen = fmt.Sprintf("127.0.0.1:%d", base)
		t.HSS.Address, t.HSS.DiameterPort, t.HSS.HTTPPort = "127.0.0.1", base+1, base+2
		t.BAC.Address, t.BAC.Port = "127.0.0.1", base+3
		t.ICSCF.Address, t.ICSCF.Port = "127.0.0.1", base+4
		t.Pools.PCSCF.Address, t.Pools.PCSCF.Addresses, t.Pools.PCSCF.BasePort, t.Pools.PCSCF.Port = "127.0.0.1", nil, base+5, 0
		t.Pools.SCSCF.Address, t.Pools.SCSCF.Addresses, t.Pools.SCSCF.BasePort, t.Pools.SCSCF.Port = "127.0.0.1", nil, base+8, 0
		Expect(sc.Validate()).To(Succeed())

		vs, err := compare.ParseVariants("quasi-pool,load-sharing")
		Expect(err).NotTo(HaveOccurred())
		dir = GinkgoT().TempDir()
		var log strings.Builder
		run := compare.LabRunner(scenario.RunConfig{BinDir: bin, Progress: 4 * time.Second, GracePeriod: 2 * time.Second},
			scenario.WithOutput(&log),
			scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		res, err = compare.Run(ctx, compare.Config{Scenario: sc, Variants: vs, OutDir: dir, Run: run, Out: &log})
		GinkgoWriter.Println(log.String())
		Expect(err).NotTo(HaveOccurred(), log.String())
	}, NodeTimeout(4*time.Minute))

	It("writes a table row per scheme and the report files", func() {
		b, err := os.ReadFile(filepath.Join(dir, compare.FileTable))
		Expect(err).NotTo(HaveOccurred())
		recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
		Expect(err).NotTo(HaveOccurred())
		Expect(recs).To(HaveLen(3))
		Expect(recs[1][0]).To(Equal("quasi-pool"))
		Expect(recs[2][0]).To(Equal("load-sharing"))
		for _, f := range res.Files {
			Expect(filepath.Join(dir, f)).To(BeAnExistingFile())
		}
		for _, v := range []string{"quasi-pool", "load-sharing"} {
			Expect(filepath.Join(dir, v, "summary.json")).To(BeAnExistingFile())
			Expect(filepath.Join(dir, v, "users.csv")).To(BeAnExistingFile())
		}
	})

	It("shows quasi-pool taking over every affected user before re-registration and load-sharing none", func() {
		qp, ls := res.Rows[0], res.Rows[1]
		Expect(qp.AffectedUsers).To(BeNumerically(">", 0))
		Expect(ls.AffectedUsers).To(BeNumerically(">", 0))
		for _, d := range []compare.Dir{qp.MO, qp.MT} {
			Expect(d.TakenOver).NotTo(BeNil())
			Expect(*d.TakenOver).To(BeNumerically(">=", 0.99), "quasi-pool: %s", qp.Line())
		}
		for _, d := range []compare.Dir{ls.MO, ls.MT} {
			Expect(d.TakenOver).NotTo(BeNil())
			Expect(*d.TakenOver).To(BeNumerically("<=", 0.05), "load-sharing: %s", ls.Line())
		}
		Expect(ls.ExpectationsMiss).To(ContainElement("MT takeover before re-registration"),
			"the scenario's quasi-pool expectations are reported as missed, not fatal")
	})
})
