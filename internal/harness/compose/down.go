package compose

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"
)

// DownResult says what removing a compose project met on the way.
type DownResult struct {
	// Retries counts the removals the engine refused with "has active endpoints" and that were tried again.
	Retries int
	// Forced lists the stale endpoints removed with `docker network disconnect -f`, as "network/container".
	Forced []string
	// Left lists the project's networks the engine still kept with a stale endpoint, no container being left.
	Left []string
}

// downAttempts is how many times a refused removal is tried before the stale endpoints are forced out, and
// downRetryWait the wait between two tries.
const downAttempts = 3

var downRetryWait = 2 * time.Second

// DownProject removes a compose project (containers, networks, volumes), working around the engine's stale
// endpoints. Docker 20.10 sometimes still counts, in its own store, the endpoint of a container it has just
// removed, and refuses to remove the network: "has active endpoints" (moby/moby#42119, #43286). A moment later it
// often does not; when it still does, the endpoint is deleted by the container's name (`docker network
// disconnect -f <network> <name>`: the engine's store names endpoints after their containers, and an ID is not
// found once the container is gone). If the engine keeps the network even then and no container of the project
// is left, the project is gone in every way that matters: the network is reported in Left, with a nil error, and
// later labs take other subnets. A container still there, or any other failure, is an error.
func DownProject(ctx context.Context, project, file string, timeout time.Duration, log *slog.Logger) (DownResult, error) {
	if log == nil {
		log = slog.Default()
	}
	var res DownResult
	// The names of the project's containers, read before they go: the stale endpoints carry them.
	names, _ := dockerLines(ctx, "ps", "-a", "--filter", "label="+labelProject+"="+project, "--format", "{{.Names}}")
	down := func() error {
		args := []string{"compose", "-p", project, "-f", file, "down", "-v", "-t",
			fmt.Sprint(max(int(timeout.Seconds()), 0)), "--remove-orphans"}
		out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("docker %s: %w\n%s", strings.Join(args, " "), err, tailLines(string(out), 30))
		}
		return nil
	}
	networks := func() []string {
		n, _ := dockerLines(ctx, "network", "ls", "--filter", "label="+labelProject+"="+project, "--format", "{{.Name}}")
		return n
	}
	stale := func(err error) bool { return err != nil && strings.Contains(err.Error(), "active endpoints") }
	var err error
	for attempt := 0; attempt < downAttempts; attempt++ {
		if err = down(); !stale(err) {
			return res, err
		}
		res.Retries++
		log.Warn("compose: a network of the project still has endpoints; removing the project again", "project", project)
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(downRetryWait):
		}
	}
	nets := networks()
	for _, n := range nets {
		for _, c := range names {
			if exec.CommandContext(ctx, "docker", "network", "disconnect", "-f", n, c).Run() == nil {
				res.Forced = append(res.Forced, n+"/"+c)
			}
		}
	}
	if len(res.Forced) > 0 {
		log.Warn("compose: removed stale endpoints the engine kept", "project", project, "endpoints", res.Forced)
		if err = down(); !stale(err) {
			return res, err
		}
	}
	left, perr := dockerLines(ctx, "compose", "-p", project, "-f", file, "ps", "-a", "-q")
	if perr != nil || len(left) > 0 {
		return res, err
	}
	if res.Left = networks(); len(res.Left) == 0 {
		res.Left = nets
	}
	log.Warn("compose: the engine kept a network of the project with a stale endpoint, no container left; "+
		"restart dockerd to remove it", "project", project, "networks", res.Left)
	return res, nil
}

// dockerLines runs the docker CLI and returns its non-empty output lines.
func dockerLines(ctx context.Context, args ...string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).Output()
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
