package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/onsi/ginkgo/v2"

	"github.com/imslab/quasipool/internal/harness/compose"
)

// ErrNoDocker means there is no Docker engine with the compose plugin here.
var ErrNoDocker = errors.New("no Docker engine with the compose plugin (../shared/tools/setup-docker.sh starts one)")

// DockerRequired tells whether the suites must fail, not skip, without Docker (.ci/run sets IMSLAB_REQUIRE_DOCKER
// after starting an engine).
func DockerRequired() bool { return os.Getenv("IMSLAB_REQUIRE_DOCKER") != "" }

// CheckDocker returns nil when the engine answers and docker compose works, else an error wrapping ErrNoDocker.
func CheckDocker(ctx context.Context) error {
	eng, err := compose.NewEngine()
	if err == nil {
		err = eng.Ping(ctx)
	}
	if err == nil {
		err = exec.CommandContext(ctx, "docker", "compose", "version").Run()
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	return nil
}

// RequireDocker skips the running Ginkgo spec without Docker, or fails it when DockerRequired.
func RequireDocker(ctx context.Context) {
	ginkgo.GinkgoHelper()
	if err := CheckDocker(ctx); err != nil {
		if DockerRequired() {
			ginkgo.Fail(err.Error() + " and IMSLAB_REQUIRE_DOCKER is set")
		}
		ginkgo.Skip(err.Error())
	}
}
