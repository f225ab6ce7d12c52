package compose

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/harness/netns"
)

// Owner labels: the compose lab puts them on every container and network of its project (Options.Labels), so
// that `imslab clean` can tell a project a crashed run left behind (its owner process is gone) from a live run's
// and from anything imslab did not create (no owner label).
const (
	// LabelOwnerPID is the pid of the imslab process that brought the project up.
	LabelOwnerPID = "io.imslab.owner.pid"
	// LabelOwnerStart is that process's start time (clock ticks since boot, /proc/<pid>/stat field 22), so a
	// reused pid is not taken for the owner.
	LabelOwnerStart = "io.imslab.owner.start"
	// LabelOwnerHost is the owner's host name: a project owned on another host (a shared engine) is never
	// judged from here.
	LabelOwnerHost = "io.imslab.owner.host"
	// LabelRunDir is the owner's run directory (for the record; clean does not use it).
	LabelRunDir = "io.imslab.run-dir"
)

const labelProject = "com.docker.compose.project"

// OwnerLabels returns the owner labels of this process with the run directory.
func OwnerLabels(runDir string) map[string]string {
	m := map[string]string{LabelOwnerPID: strconv.Itoa(os.Getpid()), LabelRunDir: runDir}
	if s, err := netns.ProcessStart(os.Getpid()); err == nil {
		m[LabelOwnerStart] = strconv.FormatUint(s, 10)
	}
	if h, err := os.Hostname(); err == nil {
		m[LabelOwnerHost] = h
	}
	return m
}

// labelled is a container or network of the engine with its labels.
type labelled struct {
	ID     string            `json:"Id"`
	Name   string            `json:"Name"`
	Names  []string          `json:"Names"`
	Labels map[string]string `json:"Labels"`
}

func (l labelled) name() string {
	if l.Name != "" {
		return l.Name
	}
	if len(l.Names) > 0 {
		return strings.TrimPrefix(l.Names[0], "/")
	}
	return l.ID
}

func (e *Engine) listLabelled(ctx context.Context, what, label string) ([]labelled, error) {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	q := url.Values{"filters": {string(f)}}
	if what == "containers" {
		q.Set("all", "1")
	}
	path := "/containers/json" // the engine lists networks at /networks, containers at /containers/json
	if what == "networks" {
		path = "/networks"
	}
	var out []labelled
	if err := e.do(ctx, http.MethodGet, path, q, &out); err != nil {
		return nil, err
	}
	if what == "networks" {
		out = slices.DeleteFunc(out, func(l labelled) bool { return l.Labels[label] == "" }) // old engines ignore filters
	}
	return out, nil
}

// CleanResult is what CleanProjects found and removed.
type CleanResult struct {
	// Removed are the projects removed (their owner is gone), Live those left alone because their owner runs,
	// Foreign those labelled by imslab on another host (left alone).
	Removed, Live, Foreign []string
	// Containers and Networks are the names of what was removed.
	Containers, Networks []string
}

func (r CleanResult) String() string {
	var parts []string
	if len(r.Removed) == 0 {
		parts = append(parts, "no compose project left behind")
	} else {
		parts = append(parts, fmt.Sprintf("removed %d compose project(s) (%s): %d container(s) (%s), %d network(s) (%s)",
			len(r.Removed), strings.Join(r.Removed, ", "), len(r.Containers), strings.Join(r.Containers, ", "),
			len(r.Networks), strings.Join(r.Networks, ", ")))
	}
	if len(r.Live) > 0 {
		parts = append(parts, fmt.Sprintf("left %d of a live run (%s)", len(r.Live), strings.Join(r.Live, ", ")))
	}
	if len(r.Foreign) > 0 {
		parts = append(parts, fmt.Sprintf("left %d owned on another host (%s)", len(r.Foreign), strings.Join(r.Foreign, ", ")))
	}
	return strings.Join(parts, "; ")
}

// ErrNoEngine: no Docker Engine answers (clean skips the compose projects).
var ErrNoEngine = errors.New("no Docker engine")

// CleanProjects removes the compose projects a crashed compose lab left behind: every container and network
// carrying the owner labels (LabelOwnerPID) of a process that no longer runs on this host (alive false). A
// project whose owner runs, one owned on another host, and anything without the owner labels (not created by
// the compose lab, or by a version before the labels) are left alone. An engine that does not answer is
// ErrNoEngine. alive nil: the process with that pid and start time runs (/proc).
func CleanProjects(ctx context.Context, e *Engine, alive func(pid int, start uint64) bool) (CleanResult, error) {
	var res CleanResult
	if alive == nil {
		alive = netns.ProcessAlive
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := e.Ping(pctx)
	cancel()
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	cs, err := e.listLabelled(ctx, "containers", LabelOwnerPID)
	if err != nil {
		return res, err
	}
	ns, err := e.listLabelled(ctx, "networks", LabelOwnerPID)
	if err != nil {
		return res, err
	}
	host, _ := os.Hostname()
	verdict := map[string]string{} // project → remove, live, foreign
	judge := func(l labelled) string {
		p := l.Labels[labelProject]
		if p == "" {
			return "" // not a compose project's: not ours to remove
		}
		if v, ok := verdict[p]; ok {
			return v
		}
		v := "remove"
		pid, perr := strconv.Atoi(l.Labels[LabelOwnerPID])
		start, serr := strconv.ParseUint(l.Labels[LabelOwnerStart], 10, 64)
		switch {
		case l.Labels[LabelOwnerHost] != host:
			v = "foreign"
		case perr != nil || serr != nil:
			v = "foreign" // labels we cannot read: leave it
		case alive(pid, start):
			v = "live"
		}
		verdict[p] = v
		switch v {
		case "live":
			res.Live = append(res.Live, p)
		case "foreign":
			res.Foreign = append(res.Foreign, p)
		default:
			res.Removed = append(res.Removed, p)
		}
		return v
	}
	// A project is judged on any of its objects; every object of a project carries the same labels.
	for _, c := range cs {
		judge(c)
	}
	for _, n := range ns {
		judge(n)
	}
	var errs []error
	for _, c := range cs {
		if verdict[c.Labels[labelProject]] != "remove" {
			continue
		}
		q := url.Values{"force": {"1"}, "v": {"1"}}
		if err := e.do(ctx, http.MethodDelete, "/containers/"+c.ID, q, nil); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("container %s: %w", c.name(), err))
			continue
		}
		res.Containers = append(res.Containers, c.name())
	}
	for _, n := range ns {
		if verdict[n.Labels[labelProject]] != "remove" {
			continue
		}
		if err := e.do(ctx, http.MethodDelete, "/networks/"+n.ID, nil, nil); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("network %s: %w", n.name(), err))
			continue
		}
		res.Networks = append(res.Networks, n.name())
	}
	slices.Sort(res.Removed)
	slices.Sort(res.Live)
	slices.Sort(res.Foreign)
	return res, errors.Join(errs...)
}

func notFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}
