package netfault

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Exec runs argv inside the target network namespace and returns its
// standard output. A failure returns an error that includes standard error.
type Exec func(ctx context.Context, argv ...string) ([]byte, error)

// InNetns runs commands in the named namespace (`ip netns exec NAME ...`).
func InNetns(name string) Exec {
	return prefixed("ip", "netns", "exec", name)
}

// InPID runs commands in the network namespace of process pid, for example
// a Docker container's init process (`nsenter -t PID -n ...`). Only the
// network namespace is entered, so nft and tc are the host's binaries.
func InPID(pid int) Exec {
	return prefixed("nsenter", "-t", strconv.Itoa(pid), "-n", "--")
}

// InNetnsPath runs commands in the namespace behind a namespace file
// (`nsenter --net=PATH ...`), e.g. /proc/PID/ns/net or /run/netns/NAME.
func InNetnsPath(path string) Exec {
	return prefixed("nsenter", "--net="+path, "--")
}

// Host runs commands in the caller's own namespace.
func Host() Exec { return prefixed() }

func prefixed(prefix ...string) Exec {
	return func(ctx context.Context, argv ...string) ([]byte, error) {
		full := append(append([]string{}, prefix...), argv...)
		if len(full) == 0 {
			return nil, fmt.Errorf("netfault: empty command")
		}
		cmd := exec.CommandContext(ctx, full[0], full[1:]...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stdout.Bytes(), fmt.Errorf("%s: %w: %s", shortCmd(argv), err, strings.TrimSpace(stderr.String()))
		}
		return stdout.Bytes(), nil
	}
}

func shortCmd(argv []string) string {
	s := strings.Join(argv, " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return strings.ReplaceAll(s, "\n", " ")
}
