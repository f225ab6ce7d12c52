package report_test

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/runtime/obs"
)

var _ = Describe("reading the events through the catalogue", Label("unit"), func() {
	It("reports an unknown kind and a malformed line with file and line, and leaves them out of the KPIs", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "x", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.event("bac", "udp_drops", 21, map[string]any{"drops": 300, "drops_total": 300})
		r.event("bac", "udp_dropz", 22, map[string]any{"drops": 12, "drops_total": 312})
		r.event("bac", "udp_drops", 23, map[string]any{"drops": "12", "drops_total": 312})
		r.write()
		f, err := os.OpenFile(filepath.Join(dir, "events", "bac.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		Expect(err).NotTo(HaveOccurred())
		_, err = f.WriteString("not json\n")
		Expect(err).NotTo(HaveOccurred())
		Expect(f.Close()).To(Succeed())

		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Events.Read).To(Equal(1))
		Expect(s.Events.Errors).To(Equal(3))
		Expect(s.Events.ErrorLines).To(Equal([]string{
			`events/bac.jsonl:2: unknown event kind "udp_dropz"`,
			`events/bac.jsonl:3: malformed event: kind udp_drops: json: cannot unmarshal string into Go struct field UDPDrops.drops of type uint64`,
			`events/bac.jsonl:4: malformed event: invalid character 'o' in literal null (expecting 'u')`,
		}))
		Expect(s.UDPDrops["bac"].Drops).To(Equal(300), "only the line that was read")
		n, ok := s.Lookup("events.errors") // a scenario can expect none
		Expect(ok).To(BeTrue())
		Expect(n).To(Equal(3.0))

		b, err := os.ReadFile(filepath.Join(dir, report.FileSummary))
		Expect(err).NotTo(HaveOccurred())
		var m map[string]any
		Expect(json.Unmarshal(b, &m)).To(Succeed())
		Expect(m).To(HaveKeyWithValue("events", HaveKeyWithValue("errors", 3.0)))
		for _, name := range []string{report.FileMarkdown, report.FileHTML} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).To(ContainSubstring("3 of 4 event lines could not be read"), name)
			Expect(string(b)).To(ContainSubstring("events/bac.jsonl:2: unknown event kind"), name)
		}
	})

	It("says nothing about event errors when every line was read", func() {
		dir := GinkgoT().TempDir()
		r := newRunDir(dir)
		r.file("scenario.json", `{"name": "x", "seed": 1, "start_ns": 1767000000000000000, "duration_s": 30, "faults": []}`)
		r.register(1, -1, "initial", "pcscf1", "scscf1", "ok")
		r.event("bac", "udp_drops", 21, map[string]any{"drops": 300, "drops_total": 300})
		r.write()
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Events).To(Equal(report.EventsRead{Read: 1}))
		md, err := os.ReadFile(filepath.Join(dir, report.FileMarkdown))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(md)).NotTo(ContainSubstring("Event errors"))
	})

	// The committed results (docs/results) keep event files of earlier runs, whole (events/lab.jsonl of the bench
	// runs) or as excerpts (peer-state.jsonl, bac-overload.jsonl, …): every event line in them must still read.
	It("reads every event line of the committed results", func() {
		root := filepath.Join("..", "..", "..", "docs", "results")
		var lines, files int
		var problems []string
		Expect(filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") && !strings.HasSuffix(path, ".jsonl.gz") {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			var rd io.Reader = f
			if strings.HasSuffix(path, ".gz") {
				if rd, err = gzip.NewReader(f); err != nil {
					return err
				}
			}
			sc := bufio.NewScanner(rd)
			sc.Buffer(nil, 16<<20)
			n, counted := 0, false
			for sc.Scan() {
				n++
				var head struct {
					TNs  *int64 `json:"t_ns"`
					Node *string
					Kind *string
				}
				if json.Unmarshal(sc.Bytes(), &head) != nil || head.TNs == nil || head.Node == nil || head.Kind == nil {
					continue // not an event: a record, a trace line, …
				}
				lines++
				if !counted {
					files, counted = files+1, true
				}
				if _, _, err := obs.DecodeEvent(sc.Bytes()); err != nil {
					problems = append(problems, path+":"+strconv.Itoa(n)+": "+err.Error())
				}
			}
			return sc.Err()
		})).To(Succeed())
		Expect(problems).To(BeEmpty())
		Expect(files).To(BeNumerically(">=", 30), "the committed event files were found")
		Expect(lines).To(BeNumerically(">=", 10000))
	})

	It("builds the report of a committed run directory with events/ without an event error", func() {
		src := filepath.Join("..", "..", "..", "docs", "results", "bench", "all-2026-12-02", "lab13-capacity-100")
		dir := GinkgoT().TempDir()
		Expect(os.CopyFS(dir, os.DirFS(src))).To(Succeed())
		s, err := report.Build(dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Events.Errors).To(BeZero(), "%v", s.Events.ErrorLines)
		Expect(s.Events.Read).To(BeNumerically(">", 100))
	})
})
