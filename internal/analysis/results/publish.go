package results

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/figure"
	"github.com/imslab/quasipool/internal/analysis/study"
)

// PublishRun copies what a large run's results come from into dst, a directory that can be committed (issue 13's
// 100k storms): summary.json gzipped (its per-user arrays make it megabytes), scenario.json, expectations.json,
// report.md (its links to the files not kept rewritten), the plots, the scenario file it ran (scenario.yaml)
// and probes.json, the reachability probes counted from records.jsonl by kind and outcome. Not the traces, logs,
// events, records, calls.csv or users.csv. It returns the bytes published.
func PublishRun(src, scenarioFile, dst string) (int64, error) {
	for _, f := range []string{"summary.json", "scenario.json", "expectations.json", "report.md", "records.jsonl"} {
		if !exists(filepath.Join(src, f)) {
			return 0, fmt.Errorf("publish run: %s not found: not a finished run directory", filepath.Join(src, f))
		}
	}
	if !exists(scenarioFile) {
		return 0, fmt.Errorf("publish run: %s not found", scenarioFile)
	}
	if err := os.MkdirAll(filepath.Join(dst, "plots"), 0o755); err != nil {
		return 0, err
	}
	summary, err := os.ReadFile(filepath.Join(src, "summary.json"))
	if err != nil {
		return 0, err
	}
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression) // no name, no time: the same bytes for the same summary
	if _, err := zw.Write(summary); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dst, "summary.json.gz"), z.Bytes(), 0o644); err != nil {
		return 0, err
	}
	for _, f := range []string{"scenario.json", "expectations.json"} {
		if err := copyFile(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
			return 0, err
		}
	}
	md, err := os.ReadFile(filepath.Join(src, "report.md"))
	if err != nil {
		return 0, err
	}
	r := strings.NewReplacer("[summary.json](summary.json)", "[summary.json.gz](summary.json.gz)",
		"[calls.csv](calls.csv)", "calls.csv (not kept)")
	if err := os.WriteFile(filepath.Join(dst, "report.md"), []byte(r.Replace(string(md))), 0o644); err != nil {
		return 0, err
	}
	if err := copyFile(scenarioFile, filepath.Join(dst, "scenario.yaml")); err != nil {
		return 0, err
	}
	for _, ext := range []string{"*.svg", "*.png"} {
		plots, _ := filepath.Glob(filepath.Join(src, "plots", ext))
		for _, p := range plots {
			if figure.IsPrintForm(p) {
				continue // the restoration figure's print forms: `imslab report` draws them again
			}
			if err := copyFile(p, filepath.Join(dst, "plots", filepath.Base(p))); err != nil {
				return 0, err
			}
		}
	}
	probes, err := countProbes(filepath.Join(src, "records.jsonl"))
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dst, "probes.json"), probes, 0o644); err != nil {
		return 0, err
	}
	return dirSize(dst)
}

// countProbes counts the probes of records.jsonl (records of type call with a probe field: mo or mt) by kind:
// attempts, answered, and the span from the first to the last (probes.json). Every MT probe is a terminating
// request that costs the I-CSCF an LIR at the HSS, which the run's Cx counts include.
func countProbes(records string) ([]byte, error) {
	f, err := os.Open(records)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type acc struct {
		n, ok    int
		lo, hi   float64
		anyProbe bool
	}
	kinds := map[string]*acc{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var rec struct {
			Type   string  `json:"type"`
			Probe  *string `json:"probe"`
			Result string  `json:"result"`
			TNs    float64 `json:"t_ns"` // as a float, the way the counts always read it
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", records, err)
		}
		if rec.Type != "call" || rec.Probe == nil {
			continue
		}
		a := kinds[*rec.Probe]
		if a == nil {
			a = &acc{lo: math.Inf(1), hi: math.Inf(-1)}
			kinds[*rec.Probe] = a
		}
		a.n++
		if rec.Result == "ok" {
			a.ok++
		}
		a.lo, a.hi = math.Min(a.lo, rec.TNs), math.Max(a.hi, rec.TNs)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(kinds) == 0 {
		return []byte("{}\n"), nil
	}
	out := map[string]ProbeCount{}
	for k, a := range kinds {
		out[k] = ProbeCount{Attempts: a.n, OK: a.ok, SpanS: (a.hi - a.lo) / 1e9}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// studyRunFiles are the files of a finished study run its results come from; binaries.json is the build that ran
// (the study's build check reads it from the published copy too).
var studyRunFiles = []string{"study-run.json", "study-env.json", "summary.json", "expectations.json", "users.csv", "scenario.json",
	"binaries.json"}

// studyPlots are the plots repetition 1 of every experiment and scheme keeps: the example runs docs/results.md
// links to.
var studyPlots = []string{"ladder_mo.svg", "ladder_mo.png", "ladder_mt.svg", "ladder_mt.png", "timeline.svg",
	"timeline.png", "restore.svg", "restore.png"}

// PublishStudy copies what a study produced (src: its out directory) into dst, a directory that can be
// committed: study.json, study.md and results.md, figures/ (unless noPlots; the screen forms, not the print forms), and for every finished run the
// files its results come from (study-run.json, study-env.json, summary.json, expectations.json, users.csv,
// scenario.json), not the traces, logs and events; repetition 1 of every experiment and scheme also keeps its
// ladders, timeline and restoration curve (unless noPlots). The copy is a resumable study directory. It returns
// the finished runs copied and the bytes of dst.
func PublishStudy(src, dst string, noPlots bool) (int, int64, error) {
	if !exists(filepath.Join(src, study.FileJSON)) {
		return 0, 0, fmt.Errorf("publish study: %s not found: not a study's out dir", filepath.Join(src, study.FileJSON))
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return 0, 0, err
	}
	var recs []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() == "study-run.json" {
			recs = append(recs, path)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	slices.Sort(recs)
	n := 0
	for _, rec := range recs {
		run := filepath.Dir(rec)
		if !exists(filepath.Join(run, "summary.json")) || !exists(filepath.Join(run, "expectations.json")) {
			continue // unfinished: not published
		}
		rel, err := filepath.Rel(src, run)
		if err != nil {
			return n, 0, err
		}
		if err := os.MkdirAll(filepath.Join(dst, rel), 0o755); err != nil {
			return n, 0, err
		}
		for _, f := range studyRunFiles {
			if exists(filepath.Join(run, f)) {
				if err := copyFile(filepath.Join(run, f), filepath.Join(dst, rel, f)); err != nil {
					return n, 0, err
				}
			}
		}
		if !noPlots && filepath.Base(run) == "rep1" {
			if err := os.MkdirAll(filepath.Join(dst, rel, "plots"), 0o755); err != nil {
				return n, 0, err
			}
			for _, f := range studyPlots {
				if exists(filepath.Join(run, "plots", f)) {
					if err := copyFile(filepath.Join(run, "plots", f), filepath.Join(dst, rel, "plots", f)); err != nil {
						return n, 0, err
					}
				}
			}
		}
		n++
	}
	for _, f := range []string{study.FileJSON, study.FileMarkdown, study.FileResults} {
		if exists(filepath.Join(src, f)) {
			if err := copyFile(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
				return n, 0, err
			}
		}
	}
	if figs := filepath.Join(src, study.DirFigures); !noPlots && isDir(figs) {
		if err := os.RemoveAll(filepath.Join(dst, study.DirFigures)); err != nil {
			return n, 0, err
		}
		// The screen SVGs only: the print forms are drawn again by `imslab results <study>`.
		entries, err := os.ReadDir(figs)
		if err != nil {
			return n, 0, err
		}
		if err := os.MkdirAll(filepath.Join(dst, study.DirFigures), 0o755); err != nil {
			return n, 0, err
		}
		for _, e := range entries {
			if e.IsDir() || figure.IsPrintForm(e.Name()) {
				continue
			}
			if err := copyFile(filepath.Join(figs, e.Name()), filepath.Join(dst, study.DirFigures, e.Name())); err != nil {
				return n, 0, err
			}
		}
	}
	size, err := dirSize(dst)
	return n, size, err
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}
