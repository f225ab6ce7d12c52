package results_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/results"
)

// published is the repository's committed results.
var published = filepath.Join("..", "..", "..", "docs", "results")

func needPublished(rel string) string {
	GinkgoHelper()
	p := filepath.Join(published, rel)
	if _, err := os.Stat(p); err != nil {
		Skip(rel + " is not in this checkout")
	}
	return p
}

func write(path, text string) {
	GinkgoHelper()
	Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	Expect(os.WriteFile(path, []byte(text), 0o644)).To(Succeed())
}

var _ = Describe("the tables of the committed runs", Label("unit"), func() {
	It("issue 11: a row per scenario with its fault, windows, interruptions, detection and expectations", func() {
		t, err := results.Issue11Table(needPublished("issue11"), false)
		Expect(err).NotTo(HaveOccurred())
		rows := strings.Split(strings.TrimSuffix(t, "\n"), "\n")
		Expect(rows).To(HaveLen(2 + len(results.Issue11Process)))
		Expect(rows[2]).To(HavePrefix("| hss-outage | hss-down hss at 15 s, healed 35.05 s (+ kill pcscf1 at 20 s) | 11 | 0 / 1238 |"))
		Expect(rows[2]).To(ContainSubstring(" (+ "), "hss-outage has a second fault")
		for _, r := range rows[2:] {
			Expect(strings.Count(r, " | ")).To(Equal(8), r)
		}
	})

	It("issue 11: a run that did not finish shows its error", func() {
		dir := GinkgoT().TempDir()
		src := needPublished("issue11")
		for _, s := range results.Issue11Process {
			if s == "site-loss" {
				write(filepath.Join(dir, s, "error.txt"), "lab: bind: address in use\n")
				continue
			}
			for _, f := range []string{"summary.json", "expectations.json"} {
				b, err := os.ReadFile(filepath.Join(src, s, f))
				Expect(err).NotTo(HaveOccurred())
				write(filepath.Join(dir, s, f), string(b))
			}
		}
		t, err := results.Issue11Table(dir, false)
		Expect(err).NotTo(HaveOccurred())
		Expect(t).To(ContainSubstring("| site-loss | the run did not finish: lab: bind: address in use ||||||||\n"))
	})

	It("the KPI regression: the change of the p95 in per cent, -0 when it shrank by less than 0.05 %", func() {
		t, err := results.KPIRegressionTable(published, needPublished("kpi-regression"))
		Expect(err).NotTo(HaveOccurred())
		Expect(t).To(ContainSubstring("| scscf-kill | 10 / 10 | 2.02 / 2.34 | 1.91 / 2.05 | -12.2 % | 1.75 / 2.04 | 1.75 / 2.04 | -0 % | 1 / 1 |"))
	})

	It("the overload benches: calls then registrations, by rate, no chain signal first", func() {
		t, err := results.OverloadTable(needPublished(filepath.Join("bench", "overload-2026-12-01", "f240e19")))
		Expect(err).NotTo(HaveOccurred())
		rows := strings.Split(strings.TrimSuffix(t, "\n"), "\n")[2:]
		Expect(rows[0]).To(HavePrefix("| calls | 200 | off (chain_target -1) |"))
		Expect(rows[1]).To(HavePrefix("| calls | 200 | cap (default) |"))
		Expect(rows[len(rows)-1]).To(HavePrefix("| registrations |"))
	})

	It("late users: every user restored after the bound or never, and how many of all", func() {
		dir := GinkgoT().TempDir()
		run := filepath.Join(dir, "kill", "quasi-pool", "rep1")
		write(filepath.Join(run, "summary.json"), `{"survival": {"bound_s": 2.5}}`)
		write(filepath.Join(run, "users.csv"), "impu,restore_s,mt_restore_s,mo_restore_s\n"+
			"sip:a,1.2,1.2,0.3\nsip:b,5.25,5.25,0.4\nsip:c,,,\nsip:d,2.5,2.5,2\n")
		write(filepath.Join(dir, "kill", "quasi-pool", "rep2", "summary.json"), `{}`) // no survival: not counted
		t, err := results.LateUsers(dir, "kill", "quasi-pool")
		Expect(err).NotTo(HaveOccurred())
		Expect(t).To(Equal("run\tuser\tbound_s\trestore_s\tmt_restore_s\tmo_restore_s\n" +
			"rep1\tsip:b\t2.50\t5.25\t5.25\t0.4\n" +
			"rep1\tsip:c\t2.50\t\t\t\n" +
			"# 2 of 4 users restored after the bound; their time to restore 5.25–5.25 s\n"))
	})
})

var _ = Describe("publishing", Label("unit"), func() {
	It("a run: the summary gzipped, report links to what is kept, the probes counted by kind", func() {
		src, dst := GinkgoT().TempDir(), filepath.Join(GinkgoT().TempDir(), "pub")
		write(filepath.Join(src, "summary.json"), `{"scenario": "storm"}`)
		write(filepath.Join(src, "scenario.json"), `{}`)
		write(filepath.Join(src, "expectations.json"), `{"passed": true}`)
		write(filepath.Join(src, "report.md"), "[summary.json](summary.json), [calls.csv](calls.csv)\n")
		write(filepath.Join(src, "plots", "timeline.svg"), "<svg/>")
		write(filepath.Join(src, "plots", "restore.svg"), "<svg/>")
		write(filepath.Join(src, "plots", "restore.col.svg"), "<svg/>")
		write(filepath.Join(src, "plots", "restore.full.png"), "png")
		write(filepath.Join(src, "trace.pcap"), "not kept")
		write(filepath.Join(src, "records.jsonl"), strings.Join([]string{
			`{"type":"call","probe":"mt","result":"ok","t_ns":1764571234000000000}`,
			`{"type":"call","probe":"mt","result":"timeout","t_ns":1764571236500000000}`,
			`{"type":"call","probe":"mo","result":"ok","t_ns":1764571235000000000}`,
			`{"type":"call","result":"ok","t_ns":1764571299000000000}`,
			`{"type":"register","probe":"mt","result":"ok","t_ns":1764571299000000000}`,
		}, "\n")+"\n")
		scen := filepath.Join(src, "storm.yaml")
		write(scen, "name: storm\n")
		_, err := results.PublishRun(src, scen, dst)
		Expect(err).NotTo(HaveOccurred())

		f, err := os.Open(filepath.Join(dst, "summary.json.gz"))
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		z, err := gzip.NewReader(f)
		Expect(err).NotTo(HaveOccurred())
		b, err := io.ReadAll(z)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(Equal(`{"scenario": "storm"}`))
		md, err := os.ReadFile(filepath.Join(dst, "report.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).To(Equal("[summary.json.gz](summary.json.gz), calls.csv (not kept)\n"))
		Expect(filepath.Join(dst, "plots", "timeline.svg")).To(BeAnExistingFile())
		Expect(filepath.Join(dst, "plots", "restore.svg")).To(BeAnExistingFile())
		Expect(filepath.Join(dst, "plots", "restore.col.svg")).NotTo(BeAnExistingFile(), "print forms are drawn again")
		Expect(filepath.Join(dst, "plots", "restore.full.png")).NotTo(BeAnExistingFile())
		Expect(filepath.Join(dst, "scenario.yaml")).To(BeAnExistingFile())
		Expect(filepath.Join(dst, "trace.pcap")).NotTo(BeAnExistingFile())
		var probes map[string]results.ProbeCount
		p, err := os.ReadFile(filepath.Join(dst, "probes.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(p, &probes)).To(Succeed())
		Expect(probes).To(Equal(map[string]results.ProbeCount{"mo": {Attempts: 1, OK: 1, SpanS: 0}, "mt": {Attempts: 2, OK: 1, SpanS: 2.5}}))
	})

	It("a run directory that did not finish is refused", func() {
		_, err := results.PublishRun(GinkgoT().TempDir(), "x.yaml", GinkgoT().TempDir())
		Expect(err).To(MatchError(ContainSubstring("not a finished run directory")))
	})

	It("a study: the finished runs' result files, the example runs' plots and the outputs", func() {
		src, dst := GinkgoT().TempDir(), filepath.Join(GinkgoT().TempDir(), "pub")
		write(filepath.Join(src, "study.json"), `{"study": "s"}`)
		write(filepath.Join(src, "figures", "a.svg"), "<svg/>")
		for _, f := range []string{"a.col.pdf", "a.col.svg", "a.col.png", "a.full.pdf", "a.full.svg", "a.full.png"} {
			write(filepath.Join(src, "figures", f), "x")
		}
		for _, rep := range []string{"rep1", "rep2", "rep3"} {
			run := filepath.Join(src, "kill", "quasi-pool", rep)
			write(filepath.Join(run, "study-run.json"), `{}`)
			write(filepath.Join(run, "summary.json"), `{}`)
			write(filepath.Join(run, "trace.pcap"), "x")
			write(filepath.Join(run, "plots", "timeline.svg"), "<svg/>")
			if rep != "rep3" { // rep3 did not finish
				write(filepath.Join(run, "expectations.json"), `{}`)
			}
		}
		n, _, err := results.PublishStudy(src, dst, false)
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(2))
		Expect(filepath.Join(dst, "study.json")).To(BeAnExistingFile())
		Expect(filepath.Join(dst, "figures", "a.svg")).To(BeAnExistingFile())
		Expect(filepath.Join(dst, "figures", "a.col.pdf")).NotTo(BeAnExistingFile(), "print forms are drawn again, not kept")
		Expect(filepath.Join(dst, "figures", "a.full.png")).NotTo(BeAnExistingFile())
		Expect(filepath.Join(dst, "kill", "quasi-pool", "rep1", "plots", "timeline.svg")).To(BeAnExistingFile())
		Expect(filepath.Join(dst, "kill", "quasi-pool", "rep2", "summary.json")).To(BeAnExistingFile())
		Expect(filepath.Join(dst, "kill", "quasi-pool", "rep2", "plots")).NotTo(BeAnExistingFile())
		Expect(filepath.Join(dst, "kill", "quasi-pool", "rep1", "trace.pcap")).NotTo(BeAnExistingFile())
		Expect(filepath.Join(dst, "kill", "quasi-pool", "rep3")).NotTo(BeAnExistingFile())
	})
})

var _ = Describe("imslab table kpis", Label("unit"), func() {
	It("gives one row per run with the named metrics, a dash where a run has none", func() {
		dir := GinkgoT().TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		write(filepath.Join(a, "summary.json"), `{"affected_users": 7, "mo": {"interruption_s": {"p95": 2.5}}}`)
		Expect(os.MkdirAll(b, 0o755)).To(Succeed())
		f, err := os.Create(filepath.Join(b, "summary.json.gz"))
		Expect(err).NotTo(HaveOccurred())
		zw := gzip.NewWriter(f)
		_, err = zw.Write([]byte(`{"affected_users": 3}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(zw.Close()).To(Succeed())
		Expect(f.Close()).To(Succeed())

		t, err := results.KPITable([]string{a, b}, []string{"affected_users", "mo.interruption_s.p95"})
		Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimSpace(t), "\n")
		Expect(lines).To(HaveLen(4))
		Expect(lines[0]).To(Equal("| run | affected_users | mo.interruption_s.p95 |"))
		Expect(lines[2]).To(HaveSuffix("| 7 | 2.5 |"))
		Expect(lines[3]).To(HaveSuffix("| 3 | - |"))

		_, err = results.KPITable([]string{filepath.Join(dir, "none")}, nil)
		Expect(err).To(MatchError(ContainSubstring("kpi table")))
	})
})
