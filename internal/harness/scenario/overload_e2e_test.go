package scenario_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/topology"
)

// privateBlock returns the first of n consecutive free ports (UDP and TCP on 127.0.0.1) in 42000–42999, the block
// of ports this file's labs use, so that they never meet the labs of other suites (20000–31999, FreeBlock).
func privateBlock(n int) int {
	GinkgoHelper()
	free := func(p int) bool {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		defer u.Close()
		t, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		t.Close()
		return true
	}
	for base := 42000; base+n <= 43000; base += n {
		ok := true
		for p := base; p < base+n && ok; p++ {
			ok = free(p)
		}
		if ok {
			return base
		}
	}
	Fail("no block of free ports in 42000-42999")
	return 0
}

// relocate moves a scenario's lab to the 11 ports from base (DNS, HSS Diameter and HTTP, BAC, I-CSCF, 3 P-CSCF,
// 3 S-CSCF), as shorten does, without changing its times.
func relocate(sc *scenario.Scenario, base int) {
	GinkgoHelper()
	t := &sc.Topology
	t.DNS.Listen = fmt.Sprintf("127.0.0.1:%d", base)
	t.HSS.Address, t.HSS.DiameterPort, t.HSS.HTTPPort = "127.0.0.1", base+1, base+2
	t.BAC.Address, t.BAC.Port = "127.0.0.1", base+3
	t.ICSCF.Address, t.ICSCF.Port = "127.0.0.1", base+4
	Expect(t.Pools.PCSCF.Size).To(BeNumerically("<=", 3))
	Expect(t.Pools.SCSCF.Size).To(BeNumerically("<=", 3))
	t.Pools.PCSCF.Address, t.Pools.PCSCF.Addresses, t.Pools.PCSCF.BasePort, t.Pools.PCSCF.Port = "127.0.0.1", nil, base+5, 0
	t.Pools.SCSCF.Address, t.Pools.SCSCF.Addresses, t.Pools.SCSCF.BasePort, t.Pools.SCSCF.Port = "127.0.0.1", nil, base+8, 0
	Expect(sc.Validate()).To(Succeed())
}

// scraper fetches a Prometheus endpoint every 500 ms and keeps the last answer.
type scraper struct {
	mu   sync.Mutex
	last map[string]float64
	at   time.Time
	n    int
}

func (s *scraper) run(stop <-chan struct{}, url string) {
	c := &http.Client{Timeout: 2 * time.Second}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		res, err := c.Get(url)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			continue
		}
		m := parseProm(string(b))
		s.mu.Lock()
		s.last, s.at, s.n = m, time.Now(), s.n+1
		s.mu.Unlock()
	}
}

// parseProm reads the text exposition format into name{labels} → value (labels as written).
func parseProm(text string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// overloadEvent is an "overload" event of a node (nfrun.ReportOverload).
type overloadEvent struct {
	TNs       int64   `json:"t_ns"`
	Kind      string  `json:"kind"`
	Shed      int     `json:"shed"`
	Admitted  int     `json:"admitted"`
	ShedTotal int     `json:"shed_total"`
	ShedShare float64 `json:"shed_share"`
}

// The issue's acceptance test for overload control (issue 13): "an e2e spec drives a short overload (2× capacity
// for 10 s on a small lab) and asserts no collapse: failures are 503s with Retry-After, and success returns
// within 10 s". The lab's capacity is a configured one (overload.max_rate at the BAC), so that the spec does not
// depend on how busy the shared machine is: scenarios/overload-2x.yaml.
var _ = Describe("overload at 2× capacity", Label("e2e", "full"), Ordered, ContinueOnFailure, func() {
	const (
		warmup      = 2 * time.Second  // the token bucket starts full: the first seconds do not measure the rate
		overFrom    = 12 * time.Second // the scenario's steps
		overTo      = 22 * time.Second
		recoverBy   = 10 * time.Second // the issue: success returns within 10 s after the overload
		endMargin   = 2 * time.Second  // calls started this close to the end are ended by the shutdown
		otherShare  = 0.01             // failures that are not a 503 with Retry-After allowed (a loaded machine)
		goodputNeed = 0.9              // of the capacity measured at 1×
	)
	var (
		dir      string
		sc       *scenario.Scenario
		sum      *report.Summary
		records  []ue.Record
		bacEv    []overloadEvent
		metrics  *scraper
		t0Ns     int64
		duration time.Duration
		// writeFigures is set below, once the helpers it uses are.
		writeFigures func(runDir string)
	)

	BeforeAll(func(ctx SpecContext) {
		binDir := buildNodes(ctx)
		wd, err := os.Getwd()
		Expect(err).NotTo(HaveOccurred())
		repo, err := lab.FindRepo(wd)
		Expect(err).NotTo(HaveOccurred())
		file := filepath.Join(repo, "scenarios", "overload-2x.yaml")
		sc, err = scenario.Load(file)
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Traffic.Steps).To(HaveLen(2))
		Expect(sc.Traffic.Steps[0].At).To(Equal(overFrom))
		Expect(sc.Traffic.Steps[1].At).To(Equal(overTo))
		Expect(sc.Traffic.Steps[0].CallRate).To(Equal(2 * sc.Traffic.CallRate))
		Expect(sc.Topology.Overload.MaxRate).To(Equal(sc.Traffic.CallRate), "1× is the configured capacity")
		duration = sc.Duration
		base := privateBlock(12)
		relocate(sc, base)
		metricsAddr := fmt.Sprintf("127.0.0.1:%d", base+11)
		sc.Topology.Overrides = map[string]topology.Override{"bac": {Metrics: metricsAddr}}
		Expect(sc.Validate()).To(Succeed())

		// OVERLOAD_RUN_DIR keeps the run (and its overload-figures.json) there, e.g. to commit its figures.
		if keep := os.Getenv("OVERLOAD_RUN_DIR"); keep != "" {
			dir = keep
			Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
			Expect(filepath.Join(dir, "run")).NotTo(BeADirectory(), "OVERLOAD_RUN_DIR already holds a run")
		} else {
			dir, err = os.MkdirTemp("", "overload-2x-")
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() {
				if !CurrentSpecReport().Failed() {
					_ = os.RemoveAll(dir)
				}
			})
		}
		metrics = &scraper{}
		stop := make(chan struct{})
		go metrics.run(stop, "http://"+metricsAddr+"/metrics")
		var out strings.Builder
		began := time.Now()
		o, err := scenario.Run(ctx, scenario.RunConfig{Scenario: sc, ScenarioFile: file, RunDir: filepath.Join(dir, "run"),
			BinDir: binDir, Progress: 4 * time.Second, GracePeriod: 2 * time.Second,
			KeepGoing: true}, // a phone whose initial registration timed out on the busy machine tries again
			scenario.WithOutput(&out),
			scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
			scenario.WithReportBuilder(func(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
				s, err := report.Build(runDir, scenario.ReportChecks(eval))
				sum = s
				return s, err
			}))
		close(stop)
		GinkgoWriter.Printf("overload-2x (took %s):\n%s\n", time.Since(began).Round(time.Second), out.String())
		Expect(err).NotTo(HaveOccurred(), out.String())
		Expect(o.Passed).To(BeTrue(), out.String())
		runDir := o.RunDir
		var sj struct {
			StartNs int64 `json:"start_ns"`
		}
		b, err := os.ReadFile(filepath.Join(runDir, "scenario.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(b, &sj)).To(Succeed())
		t0Ns = sj.StartNs
		records = readJSONL[ue.Record](filepath.Join(runDir, "records.jsonl"))
		for _, e := range readJSONL[overloadEvent](filepath.Join(runDir, "events", "bac.jsonl")) {
			if e.Kind == "overload" {
				bacEv = append(bacEv, e)
			}
		}
		writeFigures(runDir)
	}, NodeTimeout(4*time.Minute))

	AfterEach(func() {
		if CurrentSpecReport().Failed() {
			AddReportEntry("run directory (kept)", filepath.Join(dir, "run"))
		}
	})

	// calls returns the caller's records of the calls started in [from, to) from t0.
	calls := func(from, to time.Duration) []ue.Record {
		var out []ue.Record
		for _, r := range records {
			if r.Type != "call" || r.Direction != "mo" {
				continue
			}
			at := time.Duration(r.TNs - t0Ns)
			if at >= from && at < to {
				out = append(out, r)
			}
		}
		return out
	}
	answered := func(rs []ue.Record) int {
		n := 0
		for _, r := range rs {
			if r.Result == "ok" {
				n++
			}
		}
		return n
	}
	// shed503 says whether a failed call is the network's 503 with Retry-After, or a call the phone held back
	// because of one (it did not send it: the Retry-After it was told had not run out).
	shed503 := func(r ue.Record) bool {
		return r.Status == 503 && (r.RetryAfterS > 0 || r.Result == ue.ResultHeldBack)
	}
	perSecond := func(n int, from, to time.Duration) float64 { return float64(n) / (to - from).Seconds() }

	// writeFigures writes the run's figures to <run>/overload-figures.json (what docs/performance.md quotes).
	writeFigures = func(runDir string) {
		one, two := calls(warmup, overFrom), calls(overFrom, overTo)
		all, after := calls(0, duration-endMargin), calls(overTo+recoverBy, duration-endMargin)
		fig := map[string]any{"max_rate": sc.Topology.Overload.MaxRate, "seed": sum.Seed,
			"window_1x_s": []float64{warmup.Seconds(), overFrom.Seconds()}, "window_2x_s": []float64{overFrom.Seconds(), overTo.Seconds()},
			"offered_1x_per_s": perSecond(len(one), warmup, overFrom), "answered_1x_per_s": perSecond(answered(one), warmup, overFrom),
			"offered_2x_per_s": perSecond(len(two), overFrom, overTo), "answered_2x_per_s": perSecond(answered(two), overFrom, overTo),
			"calls": len(all), "answered": answered(all), "after_recovery_calls": len(after), "after_recovery_answered": answered(after)}
		causes := map[string]int{}
		for _, r := range all {
			if r.Result != "ok" {
				k := fmt.Sprintf("%s/%d", r.Result, r.Status)
				if shed503(r) {
					k = "503+retry-after"
				}
				causes[k]++
			}
		}
		fig["failures"] = causes
		b, err := json.MarshalIndent(fig, "", "  ")
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(runDir, "overload-figures.json"), append(b, '\n'), 0o644)).To(Succeed())
		GinkgoWriter.Printf("overload figures: %s\n", b)
	}

	It("keeps the goodput during 2× at ≥ 90 % of the capacity measured at 1×", func() {
		one := calls(warmup, overFrom)
		two := calls(overFrom, overTo)
		capacity := perSecond(answered(one), warmup, overFrom)
		goodput := perSecond(answered(two), overFrom, overTo)
		offered1, offered2 := perSecond(len(one), warmup, overFrom), perSecond(len(two), overFrom, overTo)
		AddReportEntry("goodput", fmt.Sprintf("1×: offered %.1f/s, answered %.1f/s (the capacity); 2×: offered %.1f/s, "+
			"answered %.1f/s = %.0f %% of capacity; configured max_rate %g/s", offered1, capacity, offered2, goodput,
			100*goodput/capacity, sc.Topology.Overload.MaxRate))
		Expect(capacity).To(BeNumerically(">=", 0.7*sc.Topology.Overload.MaxRate),
			"the lab served about its configured capacity at 1×")
		Expect(offered2).To(BeNumerically(">=", 1.6*capacity), "the phones did offer about 2× (%.1f/s)", offered2)
		Expect(goodput).To(BeNumerically(">=", goodputNeed*capacity), "no collapse: goodput at 2× vs 1×")
	})

	It("fails calls only with 503 + Retry-After (or holds them back for it), beyond a tiny share", func() {
		all := calls(0, duration-endMargin)
		var failed, shed, other int
		causes := map[string]int{}
		for _, r := range all {
			if r.Result == "ok" {
				continue
			}
			failed++
			if shed503(r) {
				shed++
			} else {
				other++
				causes[fmt.Sprintf("%s/%d", r.Result, r.Status)]++
			}
		}
		AddReportEntry("failures", fmt.Sprintf("%d calls, %d failed: %d with 503 + Retry-After (or held back), %d other %v",
			len(all), failed, shed, other, causes))
		Expect(shed).To(BeNumerically(">", 0), "2× capacity must have been shed")
		Expect(float64(other)).To(BeNumerically("<=", otherShare*float64(len(all))),
			"failures other than 503 + Retry-After: %v", causes)
		for _, r := range all {
			if r.Status == 503 && r.Result != ue.ResultHeldBack {
				Expect(r.RetryAfterS).To(BeNumerically(">=", 1), "every 503 carries Retry-After: %+v", r)
			}
		}
	})

	It("succeeds on every call again within 10 s after the overload ends", func() {
		after := calls(overTo+recoverBy, duration-endMargin)
		Expect(len(after)).To(BeNumerically(">=", 20), "enough calls to tell")
		var lastFail time.Duration
		for _, r := range calls(overTo, duration-endMargin) {
			if r.Result != "ok" {
				lastFail = max(lastFail, time.Duration(r.TNs-t0Ns)-overTo)
			}
		}
		AddReportEntry("recovery", fmt.Sprintf("last failed call started %.1f s after the overload ended; %d calls in "+
			"[+10 s, end)", lastFail.Seconds(), len(after)))
		Expect(answered(after)).To(Equal(len(after)), "every call from 10 s after the overload on was answered")
	})

	It("shows the shed load in the BAC's overload events and in its Prometheus metrics", func() {
		n503 := 0
		for _, r := range calls(0, duration) {
			if r.Status == 503 && r.RetryAfterS > 0 {
				n503++
			}
		}
		Expect(bacEv).NotTo(BeEmpty(), "the BAC wrote overload events")
		shedInWindow, shedTotal := 0, 0
		for _, e := range bacEv {
			at := time.Duration(e.TNs - t0Ns)
			if at >= overFrom && at < overTo+2*time.Second { // an event covers the second before it
				shedInWindow += e.Shed
			}
			shedTotal = max(shedTotal, e.ShedTotal)
		}
		Expect(shedInWindow).To(BeNumerically(">", 0), "the BAC shed during the overload")
		Expect(shedTotal).To(BeNumerically(">=", n503), "the events count every 503 the phones got (%d)", n503)

		metrics.mu.Lock()
		m, scrapes, at := metrics.last, metrics.n, metrics.at
		metrics.mu.Unlock()
		Expect(scrapes).To(BeNumerically(">", 10), "the BAC's /metrics answered during the run")
		Expect(at.UnixNano()).To(BeNumerically(">", t0Ns+int64(overTo)+int64(2*time.Second)),
			"the last scrape came after the overload")
		rate := m[`overload_requests_shed_total{reason="rate"}`]
		AddReportEntry("bac metrics", fmt.Sprintf("shed by rate %g, by lag %g, admitted %g; events shed_total %d; "+
			"503s received by phones %d", rate, m[`overload_requests_shed_total{reason="lag"}`],
			m["overload_requests_admitted_total"], shedTotal, n503))
		Expect(rate).To(BeNumerically(">", 0), "shed on the configured rate")
		Expect(rate+m[`overload_requests_shed_total{reason="lag"}`]+m[`overload_requests_shed_total{reason="in_flight"}`]).
			To(BeNumerically(">=", float64(shedInWindow)), "the metrics count what the events counted")
		Expect(m).To(HaveKey("overload_lag_seconds"))
		Expect(m).To(HaveKey("pool_panic_requests_total"), "requests routed with every pool member down are counted")
	})

	It("writes the shed load into the run's report", func() {
		Expect(sum).NotTo(BeNil())
		v, ok := sum.Lookup("overload.bac.shed")
		Expect(ok).To(BeTrue(), "summary.json has overload.bac.shed")
		Expect(v).To(BeNumerically(">", 0))
	})
})
