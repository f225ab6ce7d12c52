package netfault

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rate limits the egress of Device to Rate (tc syntax in bits per second:
// "800kbit", "1mbit", "1.5gbit") with a token bucket filter (tbf) as the root
// qdisc. Packets over the rate queue for up to 50 ms, then are dropped. Device
// "" shapes every non-loopback device of the namespace, each with its own
// tbf at Rate (one fault object: applied and healed together).
//
// Peers, when set, limits the rate to what the namespace sends to those
// prefixes (a site link): the root qdisc is then an HTB (handle fa17:) whose
// default class fa17:1 is unlimited and whose class fa17:2 has Rate as its rate
// and ceiling, u32 filters sending the peers' packets (ip or ip6 dst) to it.
type Rate struct {
	Device string
	Rate   string
	Peers  []netip.Prefix
}

func (r Rate) String() string {
	s := fmt.Sprintf("rate %s dev %s", r.Rate, devName(r.Device))
	if len(r.Peers) > 0 {
		s += " to " + prefixList(r.Peers)
	}
	return s
}

func (r Rate) validate() error {
	if err := validDevOrAll(r.Device); err != nil {
		return err
	}
	for _, p := range r.Peers {
		if !p.IsValid() {
			return fmt.Errorf("invalid peer prefix")
		}
	}
	_, err := parseRate(r.Rate)
	return err
}

func (r Rate) object() object {
	bps, _ := parseRate(r.Rate)
	// The bucket holds 10 ms at the rate, at least two full-size frames.
	burst := max(int(bps/8/100), 3200)
	if len(r.Peers) == 0 {
		return &ourQdisc{dev: r.Device, args: []string{"tbf", "rate", r.Rate, "burst", strconv.Itoa(burst), "latency", "50ms"}}
	}
	peers := minimalPrefixes(r.Peers)
	return &ourQdisc{dev: r.Device, args: []string{"htb", "default", "1"}, after: func(dev string) [][]string {
		cmds := [][]string{
			{"tc", "class", "add", "dev", dev, "parent", qdiscHandle, "classid", "fa17:1", "htb", "rate", "100gbit"},
			{"tc", "class", "add", "dev", dev, "parent", qdiscHandle, "classid", "fa17:2", "htb", "rate", r.Rate,
				"ceil", r.Rate, "burst", strconv.Itoa(burst)},
		}
		for _, p := range peers {
			proto, match := "ip", "ip"
			if p.Addr().Is6() {
				proto, match = "ipv6", "ip6"
			}
			cmds = append(cmds, []string{"tc", "filter", "add", "dev", dev, "parent", qdiscHandle, "protocol", proto,
				"prio", "1", "u32", "match", match, "dst", p.String(), "flowid", "fa17:2"})
		}
		return cmds
	}}
}

// ourQdisc is a root qdisc of ours (handle fa17:) on one device, or on every
// non-loopback device when dev is "".
type ourQdisc struct {
	dev   string
	args  []string
	netem bool
	// after, when set, gives the commands that complete the qdisc on a device (classes, filters); they go with
	// it when it is deleted.
	after func(dev string) [][]string

	mu   sync.Mutex
	devs []string // the devices it was applied to (dev "": as found at apply)
}

// devices returns the devices the qdisc goes on.
func (q *ourQdisc) devices(ctx context.Context, ex Exec) ([]string, error) {
	if q.dev != "" {
		return []string{q.dev}, nil
	}
	devs, err := Links(ctx, ex)
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("no device but lo in the namespace")
	}
	return devs, nil
}

func (q *ourQdisc) apply(ctx context.Context, ex Exec, again bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.netem {
		ok, err := NetemSupported(ctx, ex)
		if err != nil {
			return err
		}
		if !ok {
			return errNoNetem
		}
	}
	devs, err := q.devices(ctx, ex)
	if err != nil {
		return err
	}
	cur, err := Qdiscs(ctx, ex)
	if err != nil {
		return err
	}
	mine := map[string]bool{}
	for _, d := range q.devs {
		mine[d] = true
	}
	// Refuse before changing anything.
	for _, dev := range devs {
		if root, ok := findRoot(cur, dev); ok && root.handle != "0:" {
			if root.handle != qdiscHandle {
				return fmt.Errorf("%w: %s has root qdisc %q, not ours; refusing to replace it", ErrBusy, dev, root.text)
			}
			if !again || !mine[dev] {
				return fmt.Errorf("%w: %s already has a root qdisc of another imslab fault (%q); heal it or run Clean", ErrBusy, dev, root.text)
			}
		}
	}
	for _, dev := range devs {
		if again && mine[dev] && q.after != nil {
			continue // classes and filters already there: applying again changes nothing
		}
		argv := append([]string{"tc", "qdisc", "replace", "dev", dev, "root", "handle", qdiscHandle}, q.args...)
		if _, err := ex(ctx, argv...); err != nil {
			return err
		}
		if !mine[dev] { // before the classes: a failure below must remove this qdisc too
			mine[dev] = true
			q.devs = append(q.devs, dev)
		}
		if q.after != nil {
			for _, cmd := range q.after(dev) {
				if _, err := ex(ctx, cmd...); err != nil {
					return err
				}
			}
		}
	}
	cur, err = Qdiscs(ctx, ex)
	if err != nil {
		return err
	}
	for _, dev := range devs {
		if root, ok := findRoot(cur, dev); !ok || root.handle != qdiscHandle || root.kind != q.args[0] {
			return fmt.Errorf("root qdisc of %s is not ours after tc succeeded: %q", dev, strings.TrimSpace(cur))
		}
	}
	return nil
}

// targets returns the devices whose root qdisc remove and present look at:
// those it was applied to, or (for dev "" after a crash) every device with a
// root qdisc of ours of the same kind.
func (q *ourQdisc) targets(qdiscs string) []string {
	if q.dev != "" {
		return []string{q.dev}
	}
	if len(q.devs) > 0 {
		return q.devs
	}
	var out []string
	for _, l := range parseQdiscs(qdiscs) {
		if l.root && l.handle == qdiscHandle && l.kind == q.args[0] {
			out = append(out, l.dev)
		}
	}
	return out
}

func (q *ourQdisc) remove(ctx context.Context, ex Exec) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	cur, err := Qdiscs(ctx, ex)
	if err != nil {
		return err
	}
	var errs []error
	for _, dev := range q.targets(cur) {
		if root, ok := findRoot(cur, dev); ok && root.handle == qdiscHandle {
			if _, err := ex(ctx, "tc", "qdisc", "del", "dev", dev, "root", "handle", qdiscHandle); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	q.devs = nil
	return nil
}

func (q *ourQdisc) present(st state) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, dev := range q.targets(st.qdiscs) {
		if root, ok := findRoot(st.qdiscs, dev); ok && root.handle == qdiscHandle {
			return true
		}
	}
	return false
}

// Links returns the names of the namespace's devices other than lo
// (`ip -o link show`).
func Links(ctx context.Context, ex Exec) ([]string, error) {
	out, err := ex(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return nil, err
	}
	return parseLinks(string(out)), nil
}

// parseLinks reads `ip -o link show`: "2: eth0@if7: <...> ...".
func parseLinks(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		name, _, _ = strings.Cut(name, "@")
		if name != "lo" && name != "" {
			out = append(out, name)
		}
	}
	return out
}

func usec(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "us" }

var errNoNetem = fmt.Errorf("%w: sch_netem is missing (kernel built without CONFIG_NET_SCH_NETEM and no module): delay and jitter cannot be applied", ErrUnsupported)

// probeLink is the veth pair NetemSupported creates for its probe.
const probeLink = "imslab_np0"

var netem struct {
	sync.Mutex
	known, ok bool
}

// NetemSupported reports whether the kernel has sch_netem, by adding and
// deleting a netem qdisc on a throwaway veth in the namespace. A definite
// answer is cached for the process (it is a property of the kernel).
func NetemSupported(ctx context.Context, ex Exec) (bool, error) {
	netem.Lock()
	defer netem.Unlock()
	if netem.known {
		return netem.ok, nil
	}
	_, _ = ex(ctx, "ip", "link", "del", probeLink)
	if _, err := ex(ctx, "ip", "link", "add", probeLink, "type", "veth", "peer", "name", probeLink+"p"); err != nil {
		return false, fmt.Errorf("netem probe: %w", err)
	}
	defer func() { _, _ = ex(context.WithoutCancel(ctx), "ip", "link", "del", probeLink) }()
	_, err := ex(ctx, "tc", "qdisc", "add", "dev", probeLink, "root", "netem", "delay", "1ms")
	switch {
	case err == nil:
		netem.known, netem.ok = true, true
	case strings.Contains(err.Error(), "qdisc kind is unknown"):
		netem.known, netem.ok = true, false
	default:
		return false, fmt.Errorf("netem probe: %w", err)
	}
	return netem.ok, nil
}

var rateRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$`)

// parseRate parses tc's bit rates into bits per second.
func parseRate(s string) (float64, error) {
	m := rateRE.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, fmt.Errorf("rate %q: want a number and bit, kbit, mbit, gbit or tbit", s)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	mult := map[string]float64{"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}[m[2]]
	if v*mult < 8000 {
		return 0, fmt.Errorf("rate %q below 8kbit", s)
	}
	return v * mult, nil
}

var devRE = regexp.MustCompile(`^[A-Za-z0-9_.@:-]{1,15}$`)

// devName is how a fault's String shows a device; "" is every device.
func devName(d string) string {
	if d == "" {
		return "*"
	}
	return d
}

func validDevOrAll(d string) error {
	if d == "" {
		return nil
	}
	return validDev(d)
}

func validDev(d string) error {
	if !devRE.MatchString(d) {
		return fmt.Errorf("bad device name %q", d)
	}
	return nil
}

// Clean removes everything this package may have left in the namespace:
// every nftables table named imslab_fault*, every root qdisc with handle fa17:,
// the netem probe link, and every iptables-nft rule of a delay line (comment
// imslab_fault_delay_*) with the mangle tables they leave empty. It returns
// the objects it removed.
func Clean(ctx context.Context, ex Exec) ([]string, error) {
	var removed []string
	var errs []error
	r, err := Ruleset(ctx, ex)
	if err != nil {
		return nil, fmt.Errorf("netfault: clean: %w", err)
	}
	for _, t := range ourTables(r) {
		if _, err := ex(ctx, "nft", "delete", "table", strings.Fields(t)[0], strings.Fields(t)[1]); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "nft table "+t)
	}
	q, err := Qdiscs(ctx, ex)
	if err != nil {
		return removed, fmt.Errorf("netfault: clean: %w", err)
	}
	for _, l := range parseQdiscs(q) {
		if l.root && l.handle == qdiscHandle {
			if _, err := ex(ctx, "tc", "qdisc", "del", "dev", l.dev, "root", "handle", qdiscHandle); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, "qdisc "+l.kind+" dev "+l.dev)
		}
	}
	if out, err := ex(ctx, "ip", "-o", "link", "show", "dev", probeLink); err == nil && len(out) > 0 {
		if _, err := ex(ctx, "ip", "link", "del", probeLink); err != nil {
			errs = append(errs, err)
		} else {
			removed = append(removed, "link "+probeLink)
		}
	}
	d, err := cleanDelayRules(ctx, ex)
	removed = append(removed, d...)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("netfault: clean: %w", err)
	}
	return removed, nil
}
