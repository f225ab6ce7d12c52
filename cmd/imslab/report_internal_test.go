package main

import (
	"bytes"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("imslab report", Label("unit"), func() {
	It("says which event lines it could not read, and still rebuilds the report", func() {
		dir := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(dir, "events"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "scenario.json"),
			[]byte(`{"name": "x", "start_ns": 1000000000000, "duration_s": 10}`), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "events", "bac.jsonl"), []byte(
			`{"t_ns":1000000000000,"node":"bac","kind":"self_lag","lag_ms":3}`+"\n"+
				`{"t_ns":1000000000001,"node":"bac","kind":"self_lagg","lag_ms":3}`+"\n"), 0o644)).To(Succeed())
		var out, errOut bytes.Buffer
		Expect(rerender([]string{dir}, &out, &errOut)).To(Equal(0))
		Expect(out.String()).To(ContainSubstring("rebuilt"))
		Expect(errOut.String()).To(Equal("imslab report: 1 of 2 event lines could not be read (summary.json events, " +
			"report.md \"Event errors\"):\n  events/bac.jsonl:2: unknown event kind \"self_lagg\"\n"))
	})
})
