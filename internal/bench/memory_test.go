package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("imslab memory", Label("unit"), func() {
	const t0 = int64(1_000_000_000_000)
	sec := int64(1_000_000_000)
	runDir := func(events, records []string) string {
		dir := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(dir, "events"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "scenario.json"),
			[]byte(fmt.Sprintf(`{"start_ns": %d, "end_ns": %d, "duration_s": 10, "traffic": {"phones": 3}}`, t0, t0+15*sec)), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "events", "lab.jsonl"), []byte(strings.Join(events, "\n")+"\n"), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "records.jsonl"), []byte(strings.Join(records, "\n")+"\n"), 0o644)).To(Succeed())
		return dir
	}
	res := func(target string, t int64, rss int64) string {
		return fmt.Sprintf(`{"kind":"resource","t_ns":%d,"target":%q,"rss_bytes":%d,"cpu_s":1}`, t, target, rss)
	}
	reg := func(impu string, t int64, status int, kind string) string {
		return fmt.Sprintf(`{"type":"register","impu":%q,"t_ns":%d,"duration_ms":100,"status":%d,"kind":%q}`, impu, t, status, kind)
	}

	It("gives each node's memory before registration, at t0, at its peak and at the end, the sum, and the phones apart", func() {
		dir := runDir([]string{
			res("bac", t0-5*sec, 30e6), res("hss", t0-5*sec, 20e6), res("phones", t0-5*sec, 40e6),
			`{"kind":"node_ready","target":"bac"}`,
			res("bac", t0+sec, 80e6), res("hss", t0+sec, 25e6), res("phones", t0+sec, 90e6),
			res("bac", t0+5*sec, 100e6), res("hss", t0+5*sec, 24e6),
			res("bac", t0+9*sec, 70e6), res("hss", t0+9*sec, 24e6),
			res("bac", t0+12*sec, 400e6), // the phones de-registering after the traffic: not counted
			res("bac", t0+20*sec, 500e6), // after the end of the run
		}, []string{
			reg("sip:user0001@ims.test", t0-3*sec, 200, "initial"),
			reg("sip:user0002@ims.test", t0-3*sec, 200, "initial"),
			reg("sip:user0003@ims.test", t0-3*sec, 503, "initial"),
			reg("sip:user0003@ims.test", t0+2*sec, 200, "initial"), // the retry, after t0
			reg("sip:user0001@ims.test", t0+9*sec, 200, "deregister"),
		})
		mp, err := ReadMemoryPoint(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(mp.RegisteredT0).To(Equal(2))
		Expect(mp.RegisteredEnd).To(Equal(3))
		Expect(mp.Nodes).To(Equal([]MemTarget{
			{Target: "bac", FirstBytes: 30e6, T0Bytes: 80e6, PeakBytes: 100e6, LastBytes: 70e6, Samples: 6},
			{Target: "hss", FirstBytes: 20e6, T0Bytes: 25e6, PeakBytes: 25e6, LastBytes: 24e6, Samples: 4},
		}))
		Expect(mp.NodesFirstBytes).To(BeEquivalentTo(50e6))
		Expect(mp.NodesPeakBytes).To(BeEquivalentTo(125e6))
		Expect(mp.NodesLastBytes).To(BeEquivalentTo(94e6))
		Expect(mp.PerPhoneBytes).To(BeNumerically("~", 75e6/3.0))
		Expect(mp.PhonesProcess).To(Equal(&MemTarget{Target: "phones", FirstBytes: 40e6, T0Bytes: 90e6, PeakBytes: 90e6,
			LastBytes: 90e6, Samples: 2}))
		var out bytes.Buffer
		WriteMemoryTable(&out, mp)
		Expect(out.String()).To(MatchRegexp(`all nodes +50\.0 +105\.0 +125\.0 +94\.0`))
	})

	It("refuses a directory that is not a finished run, naming what is missing", func() {
		_, err := ReadMemoryPoint(GinkgoT().TempDir())
		Expect(err).To(MatchError(ContainSubstring("not a run directory")))
		dir := runDir([]string{`{"kind":"node_ready","target":"bac"}`}, nil)
		_, err = ReadMemoryPoint(dir)
		Expect(err).To(MatchError(ContainSubstring("no resource samples of any node")))
	})
})
