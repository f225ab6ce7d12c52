package results

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/report"
)

// ReadSummary reads a run's summary.json, or summary.json.gz when the path ends in .gz (a published large run).
func ReadSummary(path string) (*report.Summary, error) {
	var s report.Summary
	if err := readJSON(path, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// readJSON decodes the JSON file at path (gzipped when its name ends in .gz) into v.
func readJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	if err := json.NewDecoder(r).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Expectations is a run's expectations.json: each expectation of the scenario and whether it held.
type Expectations struct {
	Passed  bool `json:"passed"`
	Results []struct {
		Name string `json:"name"`
		OK   bool   `json:"ok"`
	} `json:"results"`
}

// held is "k / n" of the expectations that held, with the names of the failed ones.
func (e *Expectations) held() string {
	var ok int
	var failed []string
	for _, r := range e.Results {
		if r.OK {
			ok++
		} else {
			failed = append(failed, r.Name)
		}
	}
	s := fmt.Sprintf("%d / %d", ok, len(e.Results))
	if !e.Passed {
		s += " (failed: " + strings.Join(failed, "; ") + ")"
	}
	return s
}

// ReadExpectations reads a run's expectations.json.
func ReadExpectations(path string) (*Expectations, error) {
	var e Expectations
	if err := readJSON(path, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// ProbeCount is one kind of reachability probe (mo, mt) of a published run: probes.json, which PublishRun
// counts from records.jsonl.
type ProbeCount struct {
	Attempts int     `json:"attempts"`
	OK       int     `json:"ok"`
	SpanS    float64 `json:"span_s"`
}

// readProbes reads a published run's probes.json (none when the run has none).
func readProbes(dir string) (map[string]ProbeCount, error) {
	path := filepath.Join(dir, "probes.json")
	if !exists(path) {
		return nil, nil
	}
	var p map[string]ProbeCount
	if err := readJSON(path, &p); err != nil {
		return nil, err
	}
	return p, nil
}
