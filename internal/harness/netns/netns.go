// Package netns builds a lab network out of Linux network namespaces: one bridge in the host namespace carrying
// the gateway address .1 of a /24, one namespace per node, and a veth pair per node (the host end on the bridge,
// the namespace end named eth0 with the node's address and a default route via the gateway). It runs iproute2's
// ip (no netlink library) and records which process owns each network under /run/imslab, so that Clean removes
// only what a dead owner left behind and never touches a live run.
//
// Names, all derived from a lab id of 6 hex digits:
//
//	bridge      imslab-<id>            (15 characters at most, the kernel's limit)
//	namespace   imslab-<id>-<node>
//	host veth   vh<id>n<k>             (k: the node's number in the network)
//	record      /run/imslab/<id>.json  {"id", "pid", "start", "subnet", "bridge"}
//	iptables    FORWARD -i <bridge> -o <bridge> -j ACCEPT, comment imslab-<id>, when the host's FORWARD policy
//	            would drop bridged traffic between namespaces (Docker sets it to DROP with br_netfilter loaded)
package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRecordDir is where ownership records are kept.
const DefaultRecordDir = "/run/imslab"

// ErrUnsupported is wrapped by Check's error when the machine cannot run a lab in namespaces.
var ErrUnsupported = errors.New("network namespaces unavailable")

// Check tells whether this process can build a lab network: Linux, root (CAP_NET_ADMIN and CAP_SYS_ADMIN for
// ip netns), network namespace support in the kernel and iproute2's ip in PATH. The error says what is missing.
func Check() error { return CheckUID(os.Geteuid()) }

// CheckUID is Check for a process whose effective user id is euid (tests show a non-root user's error with it).
func CheckUID(euid int) error {
	const need = "running each node in its own network namespace needs root on Linux (CAP_NET_ADMIN and " +
		"CAP_SYS_ADMIN), a kernel with network namespaces, veth and bridge, and iproute2's ip in PATH"
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("%w: %s; this system has no /proc/self/ns/net", ErrUnsupported, need)
	}
	if uid := euid; uid != 0 {
		return fmt.Errorf("%w: %s; running as uid %d (run as root, e.g. with sudo)", ErrUnsupported, need, uid)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: %s; ip not found: %v", ErrUnsupported, need, err)
	}
	return nil
}

// Options configures Create.
type Options struct {
	// RecordDir holds the ownership records (default DefaultRecordDir).
	RecordDir string
	// Subnet is the network's /24 (zero: the first free one of 10.89.0.0/16, 10.89.<n>.0/24, not used by a host
	// address or route nor by another lab's record).
	Subnet netip.Prefix
	// Owner is the process whose death makes the network a leftover for Clean (default: this process). Tests
	// give a process they then end, to simulate a crashed run.
	Owner int
}

// Network is a lab network: a bridge and the namespaces of its nodes. Its methods are safe for concurrent use.
type Network struct {
	ID        string
	Bridge    string
	Subnet    netip.Prefix
	Gateway   netip.Addr
	recordDir string

	mu    sync.Mutex
	nodes map[string]netip.Addr // node name → address
	order []string
	fwd   bool // the iptables FORWARD rule is installed
}

// record is the ownership record of a network.
type record struct {
	ID     string `json:"id"`
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"` // the owner's start time (clock ticks since boot, /proc/<pid>/stat field 22)
	Subnet string `json:"subnet"`
	Bridge string `json:"bridge"`
}

// BridgeName, NamespaceName and vethName derive the names of a network's parts from its id.
func BridgeName(id string) string          { return "imslab-" + id }
func NamespaceName(id, node string) string { return "imslab-" + id + "-" + node }
func vethName(id string, k int) string     { return fmt.Sprintf("vh%sn%d", id, k) }
func fwdComment(id string) string          { return "imslab-" + id }
func recordPath(dir, id string) string     { return filepath.Join(dir, id+".json") }

func defaultDir(d string) string {
	if d == "" {
		return DefaultRecordDir
	}
	return d
}

// Create cleans what dead owners left behind, picks an id and a free subnet, records this process as the owner
// and creates the bridge with the gateway address. Nodes are added with AddNode; Destroy removes everything.
func Create(ctx context.Context, o Options) (*Network, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	dir := defaultDir(o.RecordDir)
	if _, err := Clean(ctx, dir); err != nil {
		return nil, fmt.Errorf("netns: clean before start: %w", err)
	}
	unlock, err := lock(dir)
	if err != nil {
		return nil, err
	}
	owner := o.Owner
	if owner == 0 {
		owner = os.Getpid()
	}
	n, err := allocate(ctx, dir, o.Subnet, owner)
	unlock()
	if err != nil {
		return nil, err
	}
	if err := n.createBridge(ctx); err != nil {
		_ = n.Destroy(context.WithoutCancel(ctx))
		return nil, err
	}
	return n, nil
}

// allocate picks the id and subnet and writes the record (under the lock).
func allocate(ctx context.Context, dir string, subnet netip.Prefix, owner int) (*Network, error) {
	recs, err := readRecords(dir)
	if err != nil {
		return nil, err
	}
	var id string
	for {
		b := make([]byte, 3)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("netns: id: %w", err)
		}
		id = hex.EncodeToString(b)
		if !slices.ContainsFunc(recs, func(r record) bool { return r.ID == id }) {
			break
		}
	}
	if !subnet.IsValid() {
		used, err := hostPrefixes(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if p, err := netip.ParsePrefix(r.Subnet); err == nil {
				used = append(used, p)
			}
		}
		for i := range 256 {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 89, byte(i), 0}), 24)
			if !slices.ContainsFunc(used, p.Overlaps) {
				subnet = p
				break
			}
		}
		if !subnet.IsValid() {
			return nil, errors.New("netns: no free /24 in 10.89.0.0/16 (every one is used by a host route or a lab)")
		}
	}
	subnet = subnet.Masked()
	if !subnet.Addr().Is4() || subnet.Bits() != 24 {
		return nil, fmt.Errorf("netns: subnet %s: want an IPv4 /24", subnet)
	}
	n := &Network{ID: id, Bridge: BridgeName(id), Subnet: subnet, Gateway: subnet.Addr().Next(), recordDir: dir,
		nodes: map[string]netip.Addr{}}
	start, err := procStart(owner)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(record{ID: id, PID: owner, Start: start, Subnet: subnet.String(), Bridge: n.Bridge})
	if err := os.WriteFile(recordPath(dir, id), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("netns: record: %w", err)
	}
	return n, nil
}

func (n *Network) createBridge(ctx context.Context) error {
	gw := netip.PrefixFrom(n.Gateway, n.Subnet.Bits()).String()
	for _, args := range [][]string{
		{"link", "add", n.Bridge, "type", "bridge"},
		{"addr", "add", gw, "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	} {
		if _, err := ip(ctx, args...); err != nil {
			return fmt.Errorf("netns: bridge: %w", err)
		}
	}
	// Bridged traffic between two namespaces crosses the host's FORWARD chain when br_netfilter is loaded; with a
	// DROP policy (Docker's) it would never arrive. Accept it for this bridge only.
	if forwardDrops() {
		if _, err := run(ctx, "iptables", "-I", "FORWARD", "-i", n.Bridge, "-o", n.Bridge, "-m", "comment",
			"--comment", fwdComment(n.ID), "-j", "ACCEPT"); err != nil {
			return fmt.Errorf("netns: accepting bridged traffic: %w", err)
		}
		n.mu.Lock()
		n.fwd = true
		n.mu.Unlock()
	}
	return nil
}

// forwardDrops tells whether bridged IPv4 traffic goes through iptables and its FORWARD policy is not ACCEPT.
func forwardDrops() bool {
	b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return false
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return false
	}
	out, err := exec.Command("iptables", "-S", "FORWARD").Output()
	if err != nil {
		return false
	}
	return !bytes.Contains(out, []byte("-P FORWARD ACCEPT"))
}

// AddNode creates the node's namespace (lo up) and its veth pair: the host end on the bridge, the namespace end
// eth0 with addr/24 and a default route via the gateway. It returns the namespace's name.
func (n *Network) AddNode(ctx context.Context, node string, addr netip.Addr) (string, error) {
	if !n.Subnet.Contains(addr) || addr == n.Gateway || addr == n.Subnet.Addr() {
		return "", fmt.Errorf("netns: %s: address %s is not a host address of %s other than the gateway", node, addr, n.Subnet)
	}
	n.mu.Lock()
	if _, dup := n.nodes[node]; dup {
		n.mu.Unlock()
		return "", fmt.Errorf("netns: %s: already added", node)
	}
	k := len(n.order)
	n.nodes[node] = addr
	n.order = append(n.order, node)
	n.mu.Unlock()
	ns := NamespaceName(n.ID, node)
	veth := vethName(n.ID, k)
	cidr := netip.PrefixFrom(addr, n.Subnet.Bits()).String()
	steps := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", veth, "master", n.Bridge},
		{"link", "set", veth, "up"},
		{"-n", ns, "addr", "add", cidr, "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", "default", "via", n.Gateway.String()},
	}
	for _, args := range steps {
		if _, err := ip(ctx, args...); err != nil {
			return "", fmt.Errorf("netns: node %s: %w", node, err)
		}
	}
	return ns, nil
}

// Namespace returns the namespace name of an added node ("" if it was not added).
func (n *Network) Namespace(node string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.nodes[node]; !ok {
		return ""
	}
	return NamespaceName(n.ID, node)
}

// Command returns a command that runs name with args inside the node's namespace (ip netns exec, which execs
// the program: the process's PID is the program's).
func Command(ns, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Exec runs a command inside a namespace and returns its combined output.
func Exec(ctx context.Context, ns, name string, args ...string) (string, error) {
	return run(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Destroy removes the namespaces (and with them the veth pairs), the bridge, the FORWARD rule and the record.
// It removes what it can and returns every failure.
func (n *Network) Destroy(ctx context.Context) error {
	n.mu.Lock()
	nodes := slices.Clone(n.order)
	fwd := n.fwd
	n.fwd = false
	n.mu.Unlock()
	var errs []error
	for k, node := range nodes {
		// The veth first: a deleted namespace's interfaces go away only when the kernel gets to it.
		if err := delLink(ctx, vethName(n.ID, k)); err != nil {
			errs = append(errs, err)
		}
		if err := delNamespace(ctx, NamespaceName(n.ID, node)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := delLink(ctx, n.Bridge); err != nil {
		errs = append(errs, err)
	}
	rule := []string{"FORWARD", "-i", n.Bridge, "-o", n.Bridge, "-m", "comment", "--comment", fwdComment(n.ID),
		"-j", "ACCEPT"}
	if fwd && exec.CommandContext(ctx, "iptables", append([]string{"-C"}, rule...)...).Run() == nil {
		if _, err := run(ctx, "iptables", append([]string{"-D"}, rule...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(recordPath(n.recordDir, n.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func delNamespace(ctx context.Context, ns string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_, err := ip(ctx, "netns", "del", ns)
	return err
}

func delLink(ctx context.Context, name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_, err := ip(ctx, "link", "del", name)
	return err
}

// Removed lists what Clean removed.
type Removed struct {
	Namespaces, Links, Rules, Records []string
}

// Empty tells whether nothing was removed.
func (r Removed) Empty() bool {
	return len(r.Namespaces)+len(r.Links)+len(r.Rules)+len(r.Records) == 0
}

func (r Removed) String() string {
	if r.Empty() {
		return "nothing left behind"
	}
	var parts []string
	add := func(what string, l []string) {
		if len(l) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(l), what, strings.Join(l, ", ")))
		}
	}
	add("namespaces", r.Namespaces)
	add("links", r.Links)
	add("iptables rules", r.Rules)
	add("records", r.Records)
	return "removed " + strings.Join(parts, "; ")
}

var (
	nsName     = regexp.MustCompile(`^imslab-([0-9a-f]{6})-`)
	linkName   = regexp.MustCompile(`^(?:imslab-([0-9a-f]{6})|vh([0-9a-f]{6})n[0-9]+)$`)
	ruleIDName = regexp.MustCompile(`--comment "?imslab-([0-9a-f]{6})"?`)
)

// Clean removes the lab networks of owners that are no longer running: namespaces imslab-<id>-*, links
// imslab-<id> and vh<id>n*, FORWARD rules with the comment imslab-<id>, and records in dir (default
// DefaultRecordDir). A network whose record names a live owner is left alone. Without root there is nothing it
// may remove and it returns Check's error.
func Clean(ctx context.Context, dir string) (Removed, error) {
	var rm Removed
	if err := Check(); err != nil {
		return rm, err
	}
	dir = defaultDir(dir)
	unlock, err := lock(dir)
	if err != nil {
		return rm, err
	}
	defer unlock()
	// List what exists first, then read the records: a network is recorded before it is created, so whatever is
	// listed and belongs to a live run has its record by now.
	nss, err := listNamespaces()
	if err != nil {
		return rm, err
	}
	links, err := listLinks()
	if err != nil {
		return rm, err
	}
	rules := listRules()
	recs, err := readRecords(dir)
	if err != nil {
		return rm, err
	}
	live := map[string]bool{}
	for _, r := range recs {
		live[r.ID] = alive(r.PID, r.Start)
	}
	var errs []error
	// Links (veths and bridges) before namespaces: deleting one end of a veth deletes the pair at once, while a
	// deleted namespace's interfaces go only when the kernel gets to it.
	for _, l := range links {
		m := linkName.FindStringSubmatch(l)
		if m == nil || live[m[1]+m[2]] {
			continue
		}
		if err := delLink(ctx, l); err != nil {
			errs = append(errs, err)
			continue
		}
		rm.Links = append(rm.Links, l)
	}
	for _, ns := range nss {
		if m := nsName.FindStringSubmatch(ns); m != nil && !live[m[1]] {
			if err := delNamespace(ctx, ns); err != nil {
				errs = append(errs, err)
				continue
			}
			rm.Namespaces = append(rm.Namespaces, ns)
		}
	}
	for _, rule := range rules {
		m := ruleIDName.FindStringSubmatch(rule)
		if m == nil || live[m[1]] {
			continue
		}
		args := append([]string{"-D"}, splitRule(strings.TrimPrefix(rule, "-A "))...)
		if _, err := run(ctx, "iptables", args...); err != nil {
			errs = append(errs, err)
			continue
		}
		rm.Rules = append(rm.Rules, rule)
	}
	for _, r := range recs {
		if live[r.ID] {
			continue
		}
		if err := os.Remove(recordPath(dir, r.ID)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		rm.Records = append(rm.Records, recordPath(dir, r.ID))
	}
	return rm, errors.Join(errs...)
}

func listNamespaces() ([]string, error) {
	ents, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

func listLinks() ([]string, error) {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

// listRules returns the FORWARD rules ("-A FORWARD …") that carry an imslab comment.
func listRules() []string {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil
	}
	out, err := exec.Command("iptables", "-S", "FORWARD").Output()
	if err != nil {
		return nil
	}
	var rules []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "-A ") && ruleIDName.MatchString(l) {
			rules = append(rules, l)
		}
	}
	return rules
}

// splitRule splits an iptables -S line into arguments (quotes as iptables prints them).
func splitRule(s string) []string {
	var out []string
	var cur strings.Builder
	inQ, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQ, have = !inQ, true
		case r == ' ' && !inQ:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

func readRecords(dir string) ([]record, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: records: %w", err)
	}
	var out []record
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var r record
		if json.Unmarshal(b, &r) != nil || r.ID+".json" != e.Name() {
			// Unreadable: treat it as a dead owner's, so that Clean removes it.
			r = record{ID: strings.TrimSuffix(e.Name(), ".json")}
		}
		out = append(out, r)
	}
	return out, nil
}

// ProcessAlive tells whether process pid still runs and is the one that started at start (ProcessStart; not a
// reused PID). The compose backend's clean uses it for the owners of its projects too.
func ProcessAlive(pid int, start uint64) bool { return alive(pid, start) }

// ProcessStart returns the start time of process pid in clock ticks since boot (/proc/<pid>/stat field 22).
func ProcessStart(pid int) (uint64, error) { return procStart(pid) }

// alive tells whether process pid still runs and is the one that started at start (not a reused PID).
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	s, err := procStart(pid)
	return err == nil && s == start
}

// procStart returns the start time of a process in clock ticks since boot (/proc/<pid>/stat field 22).
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("netns: %w", err)
	}
	// The command name (field 2) is in parentheses and may contain spaces: count fields after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("netns: /proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("netns: /proc/%d/stat: unexpected format", pid)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after the command name
}

// lock takes an exclusive lock on dir/.lock (creating dir), so allocation and cleaning never interleave.
func lock(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("netns: lock %s: %w", f.Name(), err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// hostPrefixes returns the IPv4 prefixes of the host's addresses and routes (in every table).
func hostPrefixes(ctx context.Context) ([]netip.Prefix, error) {
	var out []netip.Prefix
	addrs, err := ip(ctx, "-o", "-4", "addr", "show")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(addrs, "\n") {
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" {
				if p, err := netip.ParsePrefix(f[i+1]); err == nil {
					out = append(out, p.Masked())
				}
			}
		}
	}
	routes, err := ip(ctx, "-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(routes, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		if f[0] == "broadcast" || f[0] == "local" || f[0] == "unicast" {
			if len(f) < 2 {
				continue
			}
			f = f[1:]
		}
		if p, err := netip.ParsePrefix(f[0]); err == nil {
			out = append(out, p.Masked())
		} else if a, err := netip.ParseAddr(f[0]); err == nil && a.Is4() {
			out = append(out, netip.PrefixFrom(a, 32))
		}
	}
	return out, nil
}

func ip(ctx context.Context, args ...string) (string, error) { return run(ctx, "ip", args...) }

func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Do runs fn on a goroutine whose thread is inside the namespace ns. Sockets fn opens stay in that namespace
// after Do returns (their traffic goes through its interfaces), which lets a test send from one namespace to
// another without a helper program.
func Do(ns string, fn func() error) error {
	return DoPath(filepath.Join("/run/netns", ns), fn)
}

// DoPath is Do for the namespace at path, such as /proc/PID/ns/net (a container's init process).
func DoPath(path string, fn func() error) error {
	ns := path
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: %w", err)
			return
		}
		defer self.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: enter %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := setns(self); err != nil {
			// The thread stays locked and ends with the goroutine: no other goroutine runs in the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

func setns(f *os.File) error {
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// Addr returns host number k of subnet (1 is the gateway).
func Addr(subnet netip.Prefix, k int) netip.Addr {
	b := subnet.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(k)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
