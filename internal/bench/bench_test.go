package bench

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("bench arithmetic", Label("unit"), func() {
	It("pairs each lab step with the nearest Kamailio step at the same rate and takes medians", func() {
		rep := benchReport{Steps: []benchResult{
			{Proxy: benchKamailio, Rate: 100, Calls: 10, CPUMsCall: 1},
			{Proxy: benchLab, Rate: 100, Calls: 10, CPUMsCall: 2},
			{Proxy: benchLabBare, Rate: 100, Calls: 10, CPUMsCall: 1.5},
			{Proxy: benchKamailio, Rate: 100, Calls: 10, CPUMsCall: 0.5},
			{Proxy: benchLab, Rate: 100, Calls: 10, CPUMsCall: 2},
			// a new rate: its lab step must not be paired with the Kamailio step of the rate before
			{Proxy: benchLab, Rate: 300, Calls: 10, CPUMsCall: 3},
			{Proxy: benchKamailio, Rate: 300, Calls: 10, CPUMsCall: 1},
			{Proxy: benchLab, Rate: 300, Calls: 0, CPUMsCall: 0}, // no calls: no ratio
			// failed part-way: neither paired nor counted in the medians
			{Proxy: benchKamailio, Rate: 300, Calls: 5, CPUMsCall: 100, Error: "kamailio exited during the step"},
			{Proxy: benchLab, Rate: 300, Calls: 5, CPUMsCall: 100, Error: "sipp caller: signal: killed"},
		}}
		benchRatios(&rep)
		Expect(rep.Steps[1].Ratio).To(Equal(2.0))
		Expect(rep.Steps[2].Ratio).To(Equal(3.0)) // lab-bare: the Kamailio step right after it is nearer
		Expect(rep.Steps[4].Ratio).To(Equal(4.0))
		Expect(rep.Steps[5].Ratio).To(Equal(3.0))
		Expect(rep.Steps[7].Ratio).To(BeZero())
		Expect(rep.Steps[9].Ratio).To(BeZero())
		Expect(rep.MedianRatio).To(Equal(3.0)) // median of 2, 4, 3
		Expect(rep.ByRate).To(HaveLen(2))
		Expect(rep.ByRate[0].Rate).To(Equal(100.0))
		Expect(rep.ByRate[0].Pairs).To(Equal(2))
		Expect(rep.ByRate[0].MedianRatio).To(Equal(3.0))
		Expect(rep.ByRate[0].MedianCPUMsCall).To(HaveKeyWithValue(benchKamailio, 0.75))
		Expect(rep.ByRate[1].MedianRatios).To(HaveKeyWithValue(benchLab, 3.0))
		Expect(rep.ByRate[1].MedianCPUMsCall).To(Equal(map[string]float64{benchLab: 3, benchKamailio: 1}))
	})

	It("reads SIPp's cumulative counters from the last line of its statistics file", func() {
		p := filepath.Join(GinkgoT().TempDir(), "stat.csv")
		Expect(os.WriteFile(p, []byte("StartTime;SuccessfulCall(P);SuccessfulCall(C);FailedCall(C);Warnings(C);\n"+
			"t0;1;1;0;0;\nt1;5;1998;2;3;\n"), 0o644)).To(Succeed())
		ok, failed, warn, err := sippCounts(p)
		Expect(err).NotTo(HaveOccurred())
		Expect([]int{ok, failed, warn}).To(Equal([]int{1998, 2, 3}))

		Expect(os.WriteFile(p, []byte("StartTime;SuccessfulCall(C)\nt0;1\n"), 0o644)).To(Succeed())
		_, _, _, err = sippCounts(p)
		Expect(err).To(MatchError(ContainSubstring("no column FailedCall(C)")))
	})

	It("takes percentiles by rank", func() {
		v := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
		Expect(percentile(v, 0.5)).To(Equal(5.0))
		Expect(percentile(v, 0.95)).To(Equal(10.0))
		Expect(percentile(nil, 0.5)).To(BeZero())
		Expect(median([]float64{4, 1, 3, 2})).To(Equal(2.5))
	})
})

var _ = Describe("imslab bench lab kinds", Label("unit"), func() {
	It("generates a valid scenario on the asked ports, the trace off for registration steps", func() {
		sc, err := benchScenario("registration-20", 41000, 40, 20, 0, 0, 5*time.Second, true)
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Traffic.Phones).To(Equal(40))
		Expect(sc.Traffic.RegisterRate).To(Equal(20.0))
		Expect(sc.Traffic.CallRate).To(BeZero())
		Expect(sc.Duration).To(Equal(5 * time.Second))
		t := sc.Topology
		Expect(t.BAC.Port).To(Equal(41060))
		Expect(t.DNS.Listen).To(Equal("127.0.0.1:41053"))
		Expect(t.Trace.Off).To(BeTrue())

		sc, err = benchScenario("capacity-5", 0, 60, 50, 5, time.Second, 30*time.Second, false)
		Expect(err).NotTo(HaveOccurred())
		Expect(sc.Traffic.CallRate).To(Equal(5.0))
		Expect(sc.Traffic.Hold).To(Equal(time.Second))
		Expect(sc.Topology.Trace.Off).To(BeFalse())
	})

	It("gives a capacity step enough phones for its rate", func() {
		Expect(capacityPhones(1, time.Second)).To(Equal(20))
		// 500 calls/s of 1.5 s (hold + setup) keep 1,500 phones busy on average
		Expect(capacityPhones(500, time.Second)).To(BeNumerically(">=", 4*1500))
	})

	It("counts registrations per second from the phones' initial registrations only", func() {
		dir := GinkgoT().TempDir()
		lines := []string{
			`{"type":"register","kind":"initial","impu":"a","result":"ok","status":200,"t_ns":1000000000,"duration_ms":10}`,
			`{"type":"register","kind":"initial","impu":"b","result":"503","status":503,"t_ns":1100000000,"duration_ms":5}`,
			`{"type":"register","kind":"initial","impu":"b","result":"ok","status":200,"t_ns":1500000000,"duration_ms":10}`,
			`{"type":"register","kind":"initial","impu":"c","result":"ok","status":200,"t_ns":2990000000,"duration_ms":10}`,
			`{"type":"register","kind":"deregister","impu":"a","result":"ok","status":200,"t_ns":9000000000,"duration_ms":10}`,
			`{"type":"call","direction":"mo","impu":"a","result":"ok","t_ns":2000000000}`,
		}
		Expect(os.WriteFile(filepath.Join(dir, "records.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)).To(Succeed())
		// The nodes' CPU over the span (1.0 s → 3.0 s): hss 2 → 2.9 s, bac 5 → 5.3 s; the phones are left out.
		Expect(os.MkdirAll(filepath.Join(dir, "events"), 0o755)).To(Succeed())
		samples := []string{
			`{"kind":"resource","target":"hss","t_ns":1000000000,"cpu_s":2}`,
			`{"kind":"resource","target":"bac","t_ns":1000000000,"cpu_s":5}`,
			`{"kind":"resource","target":"phones","t_ns":1000000000,"cpu_s":1}`,
			`{"kind":"resource","target":"hss","t_ns":2900000000,"cpu_s":2.9}`,
			`{"kind":"resource","target":"bac","t_ns":2900000000,"cpu_s":5.3}`,
			`{"kind":"resource","target":"phones","t_ns":2900000000,"cpu_s":3}`,
		}
		Expect(os.WriteFile(filepath.Join(dir, "events", "lab.jsonl"), []byte(strings.Join(samples, "\n")+"\n"), 0o644)).To(Succeed())
		s := registrationStep{RunDir: dir}
		Expect(readRegistrations(&s)).To(Succeed())
		Expect(s.NodesCPUMsPerReg).To(BeNumerically("~", 1200.0/3, 1e-6)) // 1.2 CPU s for 3 registrations
		Expect(s.NodesCPUShare).To(BeNumerically("~", 1.2/1.9, 1e-9))
		Expect(s.Attempts).To(Equal(4))
		Expect(s.OK).To(Equal(3))
		Expect(s.Failed).To(Equal(1))
		Expect(s.Registered).To(Equal(3))
		Expect(s.ByCause).To(Equal(map[string]int{"503": 1}))
		Expect(s.SpanS).To(BeNumerically("~", 2.0, 1e-9)) // 1.0 s → 3.0 s
		Expect(s.RegsPerS).To(BeNumerically("~", 1.5, 1e-9))
		Expect(s.FailureShare).To(Equal(0.25))

		Expect(readRegistrations(&registrationStep{RunDir: GinkgoT().TempDir()})).To(MatchError(ContainSubstring("records.jsonl")))
	})

	It("takes the phones' CPU share from their resource samples within the window", func() {
		dir := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(dir, "events"), 0o755)).To(Succeed())
		lines := []string{
			`{"kind":"resource","target":"phones","t_ns":1000000000,"cpu_s":5}`, // before the window
			`{"kind":"resource","target":"phones","t_ns":2000000000,"cpu_s":6}`,
			`{"kind":"resource","target":"bac","t_ns":3000000000,"cpu_s":100}`,
			`{"kind":"resource","target":"phones","t_ns":4000000000,"cpu_s":7}`,
			`{"kind":"resource","target":"phones","t_ns":6000000000,"cpu_s":7.5}`,
			`{"kind":"resource","target":"phones","t_ns":9000000000,"cpu_s":50}`, // after it
		}
		Expect(os.WriteFile(filepath.Join(dir, "events", "lab.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)).To(Succeed())
		Expect(phonesCPUShare(dir, 2e9, 6e9)).To(BeNumerically("~", 0.375, 1e-9)) // 1.5 CPU s in 4 s
		Expect(phonesCPUShare(dir, 2e9, 3e9)).To(BeZero())                        // one sample: no share
		Expect(phonesCPUShare(GinkgoT().TempDir(), 0, 1)).To(BeZero())
	})

	It("sums the nodes' CPU over the window, each node from its first to its last sample, without the phones", func() {
		dir := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(dir, "events"), 0o755)).To(Succeed())
		lines := []string{
			`{"kind":"resource","target":"bac","t_ns":1000000000,"cpu_s":1}`, // before the window
			`{"kind":"resource","target":"bac","t_ns":2000000000,"cpu_s":3}`,
			`{"kind":"resource","target":"hss","t_ns":2500000000,"cpu_s":10}`,
			`{"kind":"resource","target":"phones","t_ns":3000000000,"cpu_s":100}`,
			`{"kind":"resource","target":"phones","t_ns":5000000000,"cpu_s":200}`,
			`{"kind":"resource","target":"bac","t_ns":6000000000,"cpu_s":5}`,
			`{"kind":"resource","target":"hss","t_ns":4500000000,"cpu_s":10.5}`,
			`{"kind":"resource","target":"icscf","t_ns":5000000000,"cpu_s":9}`, // one sample: counts nothing
			`{"kind":"resource","target":"bac","t_ns":9000000000,"cpu_s":50}`,  // after it
		}
		Expect(os.WriteFile(filepath.Join(dir, "events", "lab.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)).To(Succeed())
		cpu, wall := nodesCPU(dir, 2e9, 6e9)
		Expect(cpu).To(BeNumerically("~", 2.5, 1e-9)) // bac 3 → 5, hss 10 → 10.5
		Expect(wall).To(BeNumerically("~", 4, 1e-9))  // bac's span, the longest
		cpu, wall = nodesCPU(GinkgoT().TempDir(), 0, 1)
		Expect(cpu).To(BeZero())
		Expect(wall).To(BeZero())
	})

	It("compares each target with the best step that meets its conditions", func() {
		rep := benchReport{
			Capacity: []capacityStep{
				{AnsweredPerS: 100, FailureShare: 0, Setup180P95Ms: 20, Calls: 3000},
				{AnsweredPerS: 280, FailureShare: 0.0005, Setup180P95Ms: 250, Calls: 9000},
				{AnsweredPerS: 400, FailureShare: 0.03, Setup180P95Ms: 700, Calls: 15000}, // collapsed: not counted
				{Error: "lab did not start"},
			},
			Registration: []registrationStep{{RegsPerS: 1200, FailureShare: 0, Attempts: 12000}},
			Memory: []memoryStep{
				{Phones: 10000, Point: &MemoryPoint{RegisteredEnd: 10000, NodesPeakBytes: 500e6}},
				{Phones: 30000, Point: &MemoryPoint{RegisteredEnd: 30000, NodesPeakBytes: 600e6}},
			},
		}
		rows := benchTargets(&rep)
		Expect(rows).To(HaveLen(4))
		Expect(rows[0].Measured).To(Equal("280.0"))
		Expect(rows[0].N).To(Equal("9000 calls"))
		Expect(rows[0].Met).To(Equal("no"))
		Expect(rows[1].Met).To(Equal("yes"))
		// 600 MB + 5 KB × 70,000 = 0.95 GB, on a line
		Expect(rows[2].Measured).To(HavePrefix("0.95 GB on a straight line through 10000 and 30000 phones"))
		Expect(rows[2].Met).To(Equal("yes (extrapolated)"))
		Expect(rows[3].Met).To(Equal("not measured"))

		rep.Memory = append(rep.Memory, memoryStep{Phones: 100000, Point: &MemoryPoint{Phones: 100000, RegisteredEnd: 99990, NodesPeakBytes: 1.6e9}})
		rep.ByRate = []benchRateSummary{{Pairs: 3}}
		rep.MedianRatio = 1.4
		rep.Capacity = []capacityStep{{AnsweredPerS: 10, FailureShare: 0.5, Calls: 10}}
		rows = benchTargets(&rep)
		Expect(rows[0].Measured).To(Equal("no step within the conditions"))
		Expect(rows[0].Met).To(Equal("no"))
		Expect(rows[2].Measured).To(Equal("1.60 GB"))
		Expect(rows[2].Met).To(Equal("no"))
		Expect(rows[3].Measured).To(Equal("1.40×"))
		Expect(rows[3].N).To(Equal("3 pairs"))
		Expect(rows[3].Met).To(Equal("yes"))
	})
})
