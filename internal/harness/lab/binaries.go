package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/analysis/provenance"
)

// BinariesFile is the run directory's record of the programs the lab ran (their paths, hashes and build info):
// runs keep it instead of copies of the binaries.
const BinariesFile = "binaries.json"

// Binaries is what BinariesFile holds.
type Binaries struct {
	// Dir is the directory the node binaries were run from: the build cache (Built) or the prebuilt directory
	// the lab was given.
	Dir      string              `json:"dir"`
	Built    bool                `json:"built"`
	Binaries []provenance.Binary `json:"binaries"`
}

// Revisions returns the distinct revisions of the binaries, in order ("unknown" for one without).
func (b Binaries) Revisions() []string {
	var out []string
	for _, x := range b.Binaries {
		if s := x.Short(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// ReadBinaries reads a run directory's BinariesFile.
func ReadBinaries(runDir string) (Binaries, error) {
	var b Binaries
	raw, err := os.ReadFile(filepath.Join(runDir, BinariesFile))
	if err != nil {
		return b, fmt.Errorf("lab: %w", err)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return b, fmt.Errorf("lab: %s: %w", filepath.Join(runDir, BinariesFile), err)
	}
	return b, nil
}

// DescribeBinaries describes the named programs in dir; a name without a file there is left out.
func DescribeBinaries(dir string, names []string, built bool) (Binaries, error) {
	b := Binaries{Dir: dir, Built: built}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if !isExecutable(p) {
			continue
		}
		d, err := provenance.DescribeBinary(n, p)
		if err != nil {
			return b, err
		}
		b.Binaries = append(b.Binaries, d)
	}
	return b, nil
}

func writeBinaries(runDir string, b Binaries) error {
	raw, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(runDir, BinariesFile), append(raw, '\n'), 0o644)
}

// CacheDir is where built node binaries are kept, one directory per distinct build: $IMSLAB_CACHE, else the
// user's cache directory (~/.cache/imslab), else the system's temporary directory.
func CacheDir() string {
	if d := os.Getenv("IMSLAB_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "imslab")
	}
	return filepath.Join(os.TempDir(), "imslab-cache")
}

// BuildOptions says what BuildBinaries builds.
type BuildOptions struct {
	// Repo is the repository's root (FindRepo); Commands the commands under cmd/ to build (every one when
	// empty).
	Repo     string
	Commands []string
	// Race builds with the race detector (the lab's smoke run under real concurrency).
	Race bool
	// Cache is the cache directory (CacheDir when empty).
	Cache string
	// Keep is how many builds the cache keeps besides the new one (8 when 0); older builds are removed once
	// they are a day old, so a lab that is still running keeps its binaries.
	Keep int
}

// BuildBinaries builds the commands with one go build and returns the directory that holds them:
// <cache>/bin/<hash>, named by the content of the binaries. A build that gives the same binaries as an
// earlier one reuses its directory, so runs share one copy of each build instead of one per run directory,
// and a directory's binaries never change under a running lab.
func BuildBinaries(ctx context.Context, o BuildOptions) (string, error) {
	cmds := slices.Clone(o.Commands)
	if len(cmds) == 0 {
		entries, err := os.ReadDir(filepath.Join(o.Repo, "cmd"))
		if err != nil {
			return "", fmt.Errorf("lab: build: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() {
				cmds = append(cmds, e.Name())
			}
		}
	}
	slices.Sort(cmds)
	cmds = slices.Compact(cmds)
	if len(cmds) == 0 {
		return "", errors.New("lab: build: no command to build")
	}
	cache := o.Cache
	if cache == "" {
		cache = CacheDir()
	}
	root := filepath.Join(cache, "bin")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("lab: build cache: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".build-")
	if err != nil {
		return "", fmt.Errorf("lab: build cache: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after a rename; what is left after a failure
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("lab: go build: %w", err)
	}
	// -buildvcs=auto: the commit and dirty flag go into the binaries' build info whenever the repository is a git
	// checkout, even where GOFLAGS turns stamping off (binaries.json records them).
	args := []string{"build", "-buildvcs=auto"}
	if o.Race {
		args = append(args, "-race")
	}
	args = append(args, "-o", tmp+string(filepath.Separator))
	for _, c := range cmds {
		args = append(args, "./cmd/"+c)
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = o.Repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("lab: go %s: %w\n%s", strings.Join(args, " "), err, strings.TrimRight(string(out), "\n"))
	}
	desc, err := DescribeBinaries(tmp, cmds, true)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, b := range desc.Binaries {
		fmt.Fprintf(h, "%s %s\n", b.Name, b.SHA256)
	}
	dir := filepath.Join(root, hex.EncodeToString(h.Sum(nil))[:16])
	if err := os.Rename(tmp, dir); err != nil {
		if !dirExists(dir) { // not another build of the same binaries that got there first
			return "", fmt.Errorf("lab: build cache: %w", err)
		}
	}
	now := time.Now()
	_ = os.Chtimes(dir, now, now) // the most recently used builds are kept
	pruneBuilds(root, dir, o.Keep)
	return dir, nil
}

// pruneBuilds removes the builds beyond the keep most recently used ones that are more than a day old.
func pruneBuilds(root, current string, keep int) {
	if keep <= 0 {
		keep = 8
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type build struct {
		path string
		used time.Time
	}
	var builds []build
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if !e.IsDir() || p == current {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") { // a build that did not finish
			if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > 24*time.Hour {
				_ = os.RemoveAll(p)
			}
			continue
		}
		if st, err := os.Stat(p); err == nil {
			builds = append(builds, build{p, st.ModTime()})
		}
	}
	slices.SortFunc(builds, func(a, b build) int { return b.used.Compare(a.used) })
	for i, b := range builds {
		if i >= keep && time.Since(b.used) > 24*time.Hour {
			_ = os.RemoveAll(b.path)
		}
	}
}
