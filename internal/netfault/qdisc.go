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
// qdisc. Packets over the rate queue for up to 50 ms, then are dropped.
type Rate struct {
	Device string
	Rate   string
}

func (r Rate) String() string { return fmt.Sprintf("rate %s dev %s", r.Rate, r.Device) }

func (r Rate) validate() error {
	if err := validDev(r.Device); err != nil {
		return err
	}
	_, err := parseRate(r.Rate)
	return err
}

func (r Rate) object() object {
	bps, _ := parseRate(r.Rate)
	// The bucket holds 10 ms at the rate, at least two full-size frames.
	burst := max(int(bps/8/100), 3200)
	return ourQdisc{dev: r.Device, args: []string{"tbf", "rate", r.Rate, "burst", strconv.Itoa(burst), "latency", "50ms"}}
}

// Delay adds Delay (and a uniform Jitter) to every packet leaving Device, with
// netem as the root qdisc. It needs CONFIG_NET_SCH_NETEM; without it Apply
// returns an error wrapping ErrUnsupported and changes nothing.
//
// Peers, when set, limits the delay to packets to (Direction Out, the
// default for a delay) or from (In) those prefixes.
type Delay struct {
	Device    string
	Delay     time.Duration
	Jitter    time.Duration
	Peers     []netip.Prefix
	Direction Direction
}

func (d Delay) String() string {
	return fmt.Sprintf("delay %s jitter %s dev %s", d.Delay, d.Jitter, d.Device)
}

func (d Delay) validate() error {
	if err := validDev(d.Device); err != nil {
		return err
	}
	if d.Delay <= 0 || d.Jitter < 0 || d.Jitter > d.Delay {
		return fmt.Errorf("need delay > 0 and 0 <= jitter <= delay (got %s, %s)", d.Delay, d.Jitter)
	}
	return nil
}

func (d Delay) object() object {
	args := []string{"netem", "delay", usec(d.Delay)}
	if d.Jitter > 0 {
		args = append(args, usec(d.Jitter))
	}
	// A queue long enough for a fast link held for the delay.
	args = append(args, "limit", "10000")
	return ourQdisc{dev: d.Device, args: args, netem: true}
}

func usec(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "us" }

// ourQdisc is a root qdisc of ours (handle fa17:) on one device.
type ourQdisc struct {
	dev   string
	args  []string
	netem bool
}

func (q ourQdisc) apply(ctx context.Context, ex Exec, again bool) error {
	if q.netem {
		ok, err := NetemSupported(ctx, ex)
		if err != nil {
			return err
		}
		if !ok {
			return errNoNetem
		}
	}
	cur, err := Qdiscs(ctx, ex)
	if err != nil {
		return err
	}
	if root, ok := findRoot(cur, q.dev); ok && root.handle != "0:" {
		if root.handle != qdiscHandle {
			return fmt.Errorf("%w: %s has root qdisc %q, not ours; refusing to replace it", ErrBusy, q.dev, root.text)
		}
		if !again {
			return fmt.Errorf("%w: %s already has a root qdisc of another imslab fault (%q); heal it or run Clean", ErrBusy, q.dev, root.text)
		}
	}
	argv := append([]string{"tc", "qdisc", "replace", "dev", q.dev, "root", "handle", qdiscHandle}, q.args...)
	if _, err := ex(ctx, argv...); err != nil {
		return err
	}
	cur, err = Qdiscs(ctx, ex)
	if err != nil {
		return err
	}
	if root, ok := findRoot(cur, q.dev); !ok || root.handle != qdiscHandle || root.kind != q.args[0] {
		return fmt.Errorf("root qdisc of %s is not ours after tc succeeded: %q", q.dev, strings.TrimSpace(cur))
	}
	return nil
}

func (q ourQdisc) remove(ctx context.Context, ex Exec) error {
	cur, err := Qdiscs(ctx, ex)
	if err != nil {
		return err
	}
	if root, ok := findRoot(cur, q.dev); ok && root.handle == qdiscHandle {
		_, err = ex(ctx, "tc", "qdisc", "del", "dev", q.dev, "root", "handle", qdiscHandle)
	}
	return err
}

func (q ourQdisc) present(st state) bool {
	root, ok := findRoot(st.qdiscs, q.dev)
	return ok && root.handle == qdiscHandle
}

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

func validDev(d string) error {
	if !devRE.MatchString(d) {
		return fmt.Errorf("bad device name %q", d)
	}
	return nil
}

// Clean removes everything this package may have left in the namespace:
// every nftables table named imslab_fault*, every root qdisc with handle fa17:
// and the netem probe link. It returns the objects it removed.
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
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("netfault: clean: %w", err)
	}
	return removed, nil
}
