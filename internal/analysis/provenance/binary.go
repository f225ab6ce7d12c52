package provenance

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// Binary is one program a run executed: where it was, its content hash and what Go's build info says about the
// code it was built from. A run records these instead of copying the binaries (docs/report.md, binaries.json).
type Binary struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// GoVersion, Revision, Modified and Time come from the binary's embedded build info (vcs.* settings);
	// Revision is empty when the binary was built outside a git checkout or with -buildvcs=false.
	GoVersion string `json:"go_version,omitempty"`
	Revision  string `json:"vcs_revision,omitempty"`
	Modified  bool   `json:"vcs_modified"`
	Time      string `json:"vcs_time,omitempty"`
	// Race is true for a binary built with the race detector.
	Race bool `json:"race,omitempty"`
}

// Short is the revision in a few characters with "+dirty" when the build's tree had changes ("unknown" when
// the binary carries no revision).
func (b Binary) Short() string {
	c := b.Revision
	if c == "" {
		return "unknown"
	}
	if len(c) > 12 {
		c = c[:12]
	}
	if b.Modified {
		c += "+dirty"
	}
	return c
}

// DescribeBinary hashes the program at path and reads its build info.
func DescribeBinary(name, path string) (Binary, error) {
	b := Binary{Name: name, Path: path}
	f, err := os.Open(path)
	if err != nil {
		return b, fmt.Errorf("provenance: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return b, fmt.Errorf("provenance: %s: %w", path, err)
	}
	b.SHA256, b.Size = hex.EncodeToString(h.Sum(nil)), n
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return b, nil // not a Go binary, or built without build info: the hash still names it
	}
	b.GoVersion = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		case "vcs.time":
			b.Time = s.Value
		case "-race":
			b.Race = s.Value == "true"
		}
	}
	return b, nil
}
