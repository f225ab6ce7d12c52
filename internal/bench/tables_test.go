package bench

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("the bench's tables", Label("unit"), func() {
	It("gives the memory per extra registered phone from two points and a straight line beyond", func() {
		a := &MemoryPoint{RegisteredEnd: 10000, NodesPeakBytes: 500e6, NodesLastBytes: 480e6,
			PhonesProcess: &MemTarget{PeakBytes: 80e6}}
		b := &MemoryPoint{RegisteredEnd: 30000, NodesPeakBytes: 560e6, NodesLastBytes: 560e6,
			PhonesProcess: &MemTarget{PeakBytes: 100e6}}
		rows := strings.Split(strings.TrimSuffix(MemoryMarginal(a, b, 100000), "\n"), "\n")
		Expect(rows).To(HaveLen(4))
		Expect(strings.Fields(rows[1])).To(Equal([]string{"nodes_peak_rss_bytes", "500", "560", "3000", "770"}))
		Expect(strings.Fields(rows[2])).To(Equal([]string{"nodes_last_rss_bytes", "480", "560", "4000", "840"}))
		Expect(strings.Fields(rows[3])).To(Equal([]string{"phones_process.peak_rss_bytes", "80", "100", "1000", "170"}))
		Expect(strings.Index(rows[0], "10000 phones")).To(Equal(strings.Index(rows[1], "500")), "aligned in columns")
	})

	It("compares settings over their repetitions, leaving out steps that failed", func() {
		dir := GinkgoT().TempDir()
		step := func(name, body string) {
			Expect(os.MkdirAll(filepath.Join(dir, name), 0o755)).To(Succeed())
			Expect(os.WriteFile(filepath.Join(dir, name, "bench.json"), []byte(body), 0o644)).To(Succeed())
		}
		step("default-1", `{"capacity": [{"nodes_cpu_ms_per_call": 12.344, "answered_per_s": 119.5, "failure_share": 0, "setup_180_p95_ms": 100}]}`)
		step("default-2", `{"capacity": [{"nodes_cpu_ms_per_call": 11.9, "answered_per_s": 121, "failure_share": 0.001, "setup_180_p95_ms": 103}]}`)
		step("default-3", `{"capacity": [{"nodes_cpu_ms_per_call": 99, "error": "lab: timeout"}]}`)
		step("gogc200-1", `{"capacity": [{"nodes_cpu_ms_per_call": 10.5, "answered_per_s": 120, "failure_share": 0, "setup_180_p95_ms": 90}]}`)
		t, err := SettingsTable(dir, []Setting{{Name: "default"}, {Name: "gogc200", Env: "GOGC=200"}, {Name: "none", Env: "X=1"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(t).To(ContainSubstring("| default | (as it is) | 2 | 12.12 (11.9–12.34) | 120.25 (119.5–121) | 0.1 | 101.5 |\n"))
		Expect(t).To(ContainSubstring("| gogc200 | GOGC=200 | 1 | 10.5 (10.5–10.5) | 120 (120–120) | 0 | 90 |\n"))
		Expect(t).To(ContainSubstring("| none | X=1 | 0 | – | – | – | – |\n"))
		line, err := CapacityLine(filepath.Join(dir, "default-2"))
		Expect(err).NotTo(HaveOccurred())
		Expect(line).To(Equal("   11.9 ms/call, 121 answered/s, 0.001 failed\n"))
	})
})
