package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"
)

// Engine talks to the Docker Engine API over its unix socket. Faults go through it rather than the docker CLI:
// a kill then takes milliseconds, not the CLI's few hundred, so the recorded fault instant is the real one.
type Engine struct {
	hc   *http.Client
	base string
}

// DefaultSocket is the Docker Engine's socket; DOCKER_HOST=unix://… overrides it.
const DefaultSocket = "/var/run/docker.sock"

// NewEngine returns a client of the local Docker Engine.
func NewEngine() (*Engine, error) {
	sock := DefaultSocket
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if !strings.HasPrefix(h, "unix://") {
			return nil, fmt.Errorf("docker: DOCKER_HOST %q: only unix:// sockets are supported", h)
		}
		sock = strings.TrimPrefix(h, "unix://")
	}
	return NewEngineAt(sock), nil
}

// NewEngineAt returns a client of the Docker Engine listening on the unix socket sock.
func NewEngineAt(sock string) *Engine {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	return &Engine{hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}, base: "http://docker/v1.41"}
}

// APIError is an error answer of the engine.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("docker engine: %d: %s", e.Status, e.Message) }

func (e *Engine) do(ctx context.Context, method, path string, q url.Values, out any) error {
	return e.doBody(ctx, method, path, q, nil, out)
}

// doBody is do with a JSON request body (nil: none).
func (e *Engine) doBody(ctx context.Context, method, path string, q url.Values, in, out any) error {
	u := e.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var reqBody io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		reqBody = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, reqBody)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return fmt.Errorf("docker engine: %w (is the engine running? ../shared/tools/setup-docker.sh starts one)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified {
		var m struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &m)
		if m.Message == "" {
			m.Message = strings.TrimSpace(string(body))
		}
		return &APIError{Status: resp.StatusCode, Message: m.Message}
	}
	if out != nil && len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("docker engine: %s %s: %w", method, path, err)
		}
	}
	return nil
}

// Ping checks that the engine answers.
func (e *Engine) Ping(ctx context.Context) error {
	return e.do(ctx, http.MethodGet, "/_ping", nil, nil)
}

// Container is what the lab needs of a container.
type Container struct {
	ID      string
	Service string
	State   string // running, paused, exited, …
	Health  string // healthy, unhealthy, starting, "" without a healthcheck
	PID     int    // the init process on the host (0 when not running): its /proc/PID/ns/net is the network namespace
	// StartedAt is when the container was last started (RFC 3339): with PID it names one life of the container
	// and of its network namespace (a start after a kill gives a new namespace).
	StartedAt string
	// Addrs are the container's IPv4 addresses by network name (Inspect only).
	Addrs map[string]netip.Addr
}

// Containers lists the containers of a compose project by service (stopped ones too).
func (e *Engine) Containers(ctx context.Context, project string) (map[string]Container, error) {
	f, _ := json.Marshal(map[string][]string{"label": {"com.docker.compose.project=" + project}})
	var list []struct {
		ID     string            `json:"Id"`
		Labels map[string]string `json:"Labels"`
		State  string            `json:"State"`
	}
	if err := e.do(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(f)}}, &list); err != nil {
		return nil, err
	}
	out := map[string]Container{}
	for _, c := range list {
		if c.Labels["com.docker.compose.oneoff"] == "True" {
			continue
		}
		out[c.Labels["com.docker.compose.service"]] = Container{ID: c.ID, Service: c.Labels["com.docker.compose.service"], State: c.State}
	}
	return out, nil
}

// Inspect returns the state of one container.
func (e *Engine) Inspect(ctx context.Context, id string) (Container, error) {
	var j struct {
		ID    string `json:"Id"`
		State struct {
			Status    string `json:"Status"`
			Pid       int    `json:"Pid"`
			StartedAt string `json:"StartedAt"`
			Health    *struct {
				Status string `json:"Status"`
			} `json:"Health"`
		} `json:"State"`
		NetworkSettings struct {
			Networks map[string]struct {
				IPAddress string `json:"IPAddress"`
			} `json:"Networks"`
		} `json:"NetworkSettings"`
	}
	if err := e.do(ctx, http.MethodGet, "/containers/"+id+"/json", nil, &j); err != nil {
		return Container{}, err
	}
	c := Container{ID: j.ID, State: j.State.Status, PID: j.State.Pid, StartedAt: j.State.StartedAt}
	for name, n := range j.NetworkSettings.Networks {
		if a, err := netip.ParseAddr(n.IPAddress); err == nil {
			if c.Addrs == nil {
				c.Addrs = map[string]netip.Addr{}
			}
			c.Addrs[name] = a
		}
	}
	if j.State.Health != nil {
		c.Health = j.State.Health.Status
	}
	return c, nil
}

// Kill sends a signal (e.g. "KILL") to a container's main process.
func (e *Engine) Kill(ctx context.Context, id, signal string) error {
	return e.do(ctx, http.MethodPost, "/containers/"+id+"/kill", url.Values{"signal": {signal}}, nil)
}

// Stop stops a container: SIGTERM, SIGKILL after grace.
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	return e.do(ctx, http.MethodPost, "/containers/"+id+"/stop", url.Values{"t": {fmt.Sprint(int(grace.Seconds()))}}, nil)
}

// Start starts a stopped container.
func (e *Engine) Start(ctx context.Context, id string) error {
	return e.do(ctx, http.MethodPost, "/containers/"+id+"/start", nil, nil)
}

// UpdateCPU sets a running container's CFS bandwidth (its cgroup's quota per period, in µs): quota -1 lifts the
// limit. The engine applies it to the container's cgroup at once.
func (e *Engine) UpdateCPU(ctx context.Context, id string, periodUs, quotaUs int64) error {
	return e.doBody(ctx, http.MethodPost, "/containers/"+id+"/update", nil,
		map[string]int64{"CpuPeriod": periodUs, "CpuQuota": quotaUs}, nil)
}

// Pause freezes every process of a container (cgroup freezer); Unpause thaws them.
func (e *Engine) Pause(ctx context.Context, id string) error {
	return e.do(ctx, http.MethodPost, "/containers/"+id+"/pause", nil, nil)
}

// Unpause thaws a paused container.
func (e *Engine) Unpause(ctx context.Context, id string) error {
	return e.do(ctx, http.MethodPost, "/containers/"+id+"/unpause", nil, nil)
}

// WaitHealthy waits until the container is running and, when it has a healthcheck, healthy.
func (e *Engine) WaitHealthy(ctx context.Context, id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last Container
	for {
		c, err := e.Inspect(ctx, id)
		if err == nil {
			last = c
			if c.State == "running" && (c.Health == "" || c.Health == "healthy") {
				return nil
			}
			if c.State == "exited" || c.State == "dead" {
				return fmt.Errorf("container %.12s %s", id, c.State)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %.12s not healthy within %s (state %s, health %s)", id, timeout, last.State, last.Health)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ImageExists tells whether the engine has the image.
func (e *Engine) ImageExists(ctx context.Context, ref string) (bool, error) {
	err := e.do(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

// NetworkSubnets returns the IPv4 subnets of every network the engine has, for choosing a free one.
func (e *Engine) NetworkSubnets(ctx context.Context) ([]string, error) {
	var list []struct {
		IPAM struct {
			Config []struct {
				Subnet string `json:"Subnet"`
			} `json:"Config"`
		} `json:"IPAM"`
	}
	if err := e.do(ctx, http.MethodGet, "/networks", nil, &list); err != nil {
		return nil, err
	}
	var out []string
	for _, n := range list {
		for _, c := range n.IPAM.Config {
			out = append(out, c.Subnet)
		}
	}
	return out, nil
}
