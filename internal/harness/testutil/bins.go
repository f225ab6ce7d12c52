package testutil

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/imslab/quasipool/internal/harness/lab"
)

// Environment variables naming directories of prebuilt binaries of every command (make test-lab builds them
// once per run): IMSLAB_BIN_DIR without and IMSLAB_RACE_BIN_DIR with the race detector.
const (
	EnvBinDir     = "IMSLAB_BIN_DIR"
	EnvRaceBinDir = "IMSLAB_RACE_BIN_DIR"
)

var builds struct {
	sync.Mutex
	dir map[bool]string
}

// BinDir returns the directory of the commands' binaries the lab specs run: $IMSLAB_BIN_DIR (or
// $IMSLAB_RACE_BIN_DIR with race) when set, else one build of every command into the lab's build cache,
// shared by every spec of the test process (and, through the cache, by other packages' processes).
func BinDir(ctx context.Context, race bool) (string, error) {
	env := EnvBinDir
	if race {
		env = EnvRaceBinDir
	}
	if d := os.Getenv(env); d != "" {
		if _, err := os.Stat(d); err != nil {
			return "", fmt.Errorf("testutil: %s: %w", env, err)
		}
		return d, nil
	}
	builds.Lock()
	defer builds.Unlock()
	if d := builds.dir[race]; d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	repo, err := lab.FindRepo(wd)
	if err != nil {
		return "", err
	}
	d, err := lab.BuildBinaries(ctx, lab.BuildOptions{Repo: repo, Race: race})
	if err != nil {
		return "", err
	}
	if builds.dir == nil {
		builds.dir = map[bool]string{}
	}
	builds.dir[race] = d
	return d, nil
}
