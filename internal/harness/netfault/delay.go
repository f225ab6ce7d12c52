package netfault

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Delay adds Delay, varied by a uniform ±Jitter, to packets of the
// namespace.
//
// Direction Out delays what the namespace sends, In what it receives, Both
// (the zero value) both, so a round trip through a Both delay takes 2×Delay
// longer. Peers, when set, limits the delay to packets to (Out) or from (In)
// those prefixes. Device, when set, limits it to that device ("" = every
// device but lo).
//
// Two mechanisms, chosen at the first Apply:
//   - netem, as the root qdisc (handle fa17:) of Device (every device but lo
//     when Device is ""), when the kernel has sch_netem, Peers is empty and
//     Direction is Out: tc shapes egress only and netem cannot pick
//     destinations;
//   - otherwise the NFQUEUE delay line: iptables-nft rules in the mangle
//     table (OUTPUT for Out, PREROUTING for In) send matching packets to a
//     queue of their own, and a child process of this program (its own
//     executable started again, lineproc.go) holds each packet in the
//     kernel for its delay and then accepts it. It needs the namespace's
//     file (NewAt), the iptables-nft binary and a kernel with the xt
//     NFQUEUE target. The child ends with the process that applied the
//     delay: then packets pass undelayed (the rules are --queue-bypass)
//     until Clean or a Heal removes the rules.
type Delay struct {
	Device    string
	Delay     time.Duration
	Jitter    time.Duration
	Peers     []netip.Prefix
	Direction Direction
}

func (d Delay) String() string {
	return fmt.Sprintf("delay %s jitter %s %s dev %s peers=%s", d.Delay, d.Jitter, d.Direction, devName(d.Device), prefixList(d.Peers))
}

func (d Delay) validate() error {
	if err := validDevOrAll(d.Device); err != nil {
		return err
	}
	if d.Delay <= 0 || d.Jitter < 0 || d.Jitter > d.Delay {
		return fmt.Errorf("need delay > 0 and 0 <= jitter <= delay (got %s, %s)", d.Delay, d.Jitter)
	}
	return validDir(d.Direction, d.Peers)
}

func (d Delay) object() object {
	h := sha256.Sum256([]byte(d.String()))
	return &delayObj{d: d, name: tablePrefix + "_delay_" + hex.EncodeToString(h[:4])}
}

// netemOK reports whether netem can do this delay (on a kernel that has it).
func (d Delay) netemOK() bool { return len(d.Peers) == 0 && d.Direction == Out }

func (d Delay) netemQdisc() *ourQdisc {
	args := []string{"netem", "delay", usec(d.Delay)}
	if d.Jitter > 0 {
		args = append(args, usec(d.Jitter))
	}
	// A queue long enough for a fast link held for the delay.
	args = append(args, "limit", "10000")
	return &ourQdisc{dev: d.Device, args: args, netem: true}
}

// delayObj is a Delay's object: a netem qdisc or an NFQUEUE delay line with
// its iptables rules (comment name).
type delayObj struct {
	d    Delay
	name string // the rules' comment: imslab_fault_delay_<hash>
	path string // the namespace file

	mu      sync.Mutex
	mech    string // "" (not decided), "netem", "queue"
	qdisc   *ourQdisc
	line    *lineProc
	queue   uint16 // the queue of the last delay line (present looks for it)
	refused bool   // the last apply met another fault's rules: remove leaves them
}

func (o *delayObj) bindPath(path string) { o.path = path }

func (o *delayObj) decide(ctx context.Context, ex Exec) error {
	if o.mech != "" {
		return nil
	}
	if o.d.netemOK() {
		ok, err := NetemSupported(ctx, ex)
		if err != nil {
			return err
		}
		if ok {
			o.mech, o.qdisc = "netem", o.d.netemQdisc()
			return nil
		}
	}
	o.mech = "queue"
	return nil
}

// Mechanism is "netem" or "nfqueue" once the fault was applied, else "".
func (o *delayObj) mechanism() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.mech {
	case "queue":
		return "nfqueue"
	}
	return o.mech
}

func (o *delayObj) apply(ctx context.Context, ex Exec, again bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = false
	if err := o.decide(ctx, ex); err != nil {
		return err
	}
	if o.mech == "netem" {
		return o.qdisc.apply(ctx, ex, again)
	}
	if o.path == "" {
		return fmt.Errorf("%w: without sch_netem (or with peers or direction %s) a delay needs the NFQUEUE delay line, which needs the namespace's file: use NewAt (or Namespace.Path)", ErrInvalid, o.d.Direction)
	}
	iptMu.Lock()
	defer iptMu.Unlock()
	have, err := xtRules(ctx, ex, o.name)
	if err != nil {
		return err
	}
	if o.line == nil {
		if len(have) > 0 {
			o.refused = true
			return fmt.Errorf("%w: the namespace already has rules %s of another delay with the same parameters; heal it or run Clean", ErrBusy, o.name)
		}
		line, err := startDelayLine(o.path, o.d.Delay, o.d.Jitter)
		if err != nil {
			return err
		}
		o.line, o.queue = line, line.queue
	}
	want := o.rules(o.line.queue)
	if again && len(have) == len(want) {
		return o.check(ctx, ex)
	}
	if err := deleteXtRules(ctx, ex, have); err != nil {
		return err
	}
	for _, r := range want {
		if _, err := ex(ctx, r...); err != nil {
			return err
		}
	}
	return o.check(ctx, ex)
}

// check verifies that the ruleset sends to our queue.
func (o *delayObj) check(ctx context.Context, ex Exec) error {
	r, err := Ruleset(ctx, ex)
	if err != nil {
		return err
	}
	if !queueRulePresent(r, o.queue) {
		return fmt.Errorf("no rule sends to queue %d after iptables-nft succeeded", o.queue)
	}
	return nil
}

// rules returns the iptables-nft commands that add the delay line's rules:
// one per chain, family and peer prefix.
func (o *delayObj) rules(queue uint16) [][]string {
	type fam struct {
		bin  string
		pfxs []string
	}
	var v4, v6 []string
	for _, p := range minimalPrefixes(o.d.Peers) {
		if p.Addr().Is4() {
			v4 = append(v4, p.String())
		} else {
			v6 = append(v6, p.String())
		}
	}
	fams := []fam{{"iptables-nft", v4}, {"ip6tables-nft", v6}}
	if len(o.d.Peers) == 0 {
		fams = []fam{{"iptables-nft", []string{""}}, {"ip6tables-nft", []string{""}}}
	}
	var out [][]string
	for _, f := range fams {
		for _, dir := range []Direction{Out, In} {
			if (dir == Out && !o.d.Direction.out()) || (dir == In && !o.d.Direction.in()) {
				continue
			}
			chain, devFlag, addrFlag := "OUTPUT", "-o", "-d"
			if dir == In {
				chain, devFlag, addrFlag = "PREROUTING", "-i", "-s"
			}
			for _, p := range f.pfxs {
				argv := []string{f.bin, "-w", "5", "-t", "mangle", "-A", chain}
				if o.d.Device != "" {
					argv = append(argv, devFlag, o.d.Device)
				} else {
					argv = append(argv, "!", devFlag, "lo")
				}
				if p != "" {
					argv = append(argv, addrFlag, p)
				}
				argv = append(argv, "-m", "comment", "--comment", o.name,
					"-j", "NFQUEUE", "--queue-num", fmt.Sprint(queue), "--queue-bypass")
				out = append(out, argv)
			}
		}
	}
	return out
}

func (o *delayObj) remove(ctx context.Context, ex Exec) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refused {
		o.refused = false
		return nil
	}
	if o.mech == "" {
		// Not applied by this Fault: remove what a crashed run may have left.
		if o.d.netemOK() {
			if ok, err := NetemSupported(ctx, ex); err == nil && ok {
				return o.d.netemQdisc().remove(ctx, ex)
			}
		}
	}
	if o.mech == "netem" {
		return o.qdisc.remove(ctx, ex)
	}
	if o.line == nil && !haveIptablesNft() {
		return nil // no delay line and no iptables-nft: no rule can be there
	}
	iptMu.Lock()
	defer iptMu.Unlock()
	have, err := xtRules(ctx, ex, o.name)
	if err != nil {
		return err
	}
	if err := deleteXtRules(ctx, ex, have); err != nil {
		return err
	}
	if o.line != nil {
		o.line.stop()
		o.line = nil
	}
	return deleteEmptyXtTables(ctx, ex)
}

func (o *delayObj) present(st state) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch o.mech {
	case "netem":
		return o.qdisc.present(st)
	case "queue":
		return queueRulePresent(st.ruleset, o.queue)
	}
	return false
}

func (o *delayObj) stats() (QueueStats, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.line == nil {
		return QueueStats{}, false
	}
	return o.line.stats(), true
}

// QueueStats returns the counters of the fault's NFQUEUE delay line while it
// runs (false for other faults, a netem delay, or a delay not applied).
func (f *Fault) QueueStats() (QueueStats, bool) {
	if o, ok := f.obj.(*delayObj); ok {
		return o.stats()
	}
	return QueueStats{}, false
}

// Mechanism says how an applied Delay is done: "netem" or "nfqueue" ("" for
// other faults and before the first Apply).
func (f *Fault) Mechanism() string {
	if o, ok := f.obj.(*delayObj); ok {
		return o.mechanism()
	}
	return ""
}

// iptMu serialises this process's iptables-nft changes (adding rules, and
// deleting the mangle table once it is empty).
var iptMu sync.Mutex

var xtBins = []string{"iptables-nft", "ip6tables-nft"}

func haveIptablesNft() bool {
	_, err := exec.LookPath("iptables-nft")
	return err == nil
}

// xtRules returns the `iptables-nft -t mangle -S` lines (both families, each
// prefixed with its binary) whose comment is name, or starts with name when
// name ends in "_" (Clean).
func xtRules(ctx context.Context, ex Exec, name string) ([][]string, error) {
	var out [][]string
	for _, bin := range xtBins {
		b, err := ex(ctx, bin, "-w", "5", "-t", "mangle", "-S")
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" {
				continue
			}
			for i := range f {
				f[i] = strings.Trim(f[i], `"`)
			}
			for i := 0; i+1 < len(f); i++ {
				c := f[i+1]
				if f[i] == "--comment" && (c == name || (strings.HasSuffix(name, "_") && strings.HasPrefix(c, name))) {
					out = append(out, append([]string{bin}, f...))
					break
				}
			}
		}
	}
	return out, nil
}

// deleteXtRules deletes rules listed by xtRules (-A becomes -D).
func deleteXtRules(ctx context.Context, ex Exec, rules [][]string) error {
	var errs []error
	for _, r := range rules {
		argv := append([]string{r[0], "-w", "5", "-t", "mangle", "-D"}, r[2:]...)
		if _, err := ex(ctx, argv...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteEmptyXtTables deletes the ip and ip6 mangle tables when they hold no
// rule and no chain with a policy other than accept (iptables-nft creates
// them on first use and never removes them), and otherwise the OUTPUT and
// PREROUTING chains the delay line used once they are empty with policy
// accept.
func deleteEmptyXtTables(ctx context.Context, ex Exec) error {
	_, err := deleteEmptyXtTablesList(ctx, ex)
	return err
}

func deleteEmptyXtTablesList(ctx context.Context, ex Exec) ([]string, error) {
	r, err := Ruleset(ctx, ex)
	if err != nil {
		return nil, err
	}
	_, blocks := tables(r)
	var removed []string
	for _, t := range xtTables {
		b, ok := blocks[t]
		if !ok {
			continue
		}
		// Only what holds no rule at all goes, other delay lines' included.
		if xtTableWithout(b, false) == "" {
			if _, err := ex(ctx, "nft", "delete table "+t); err != nil {
				return removed, err
			}
			removed = append(removed, "nft table "+t)
			continue
		}
		chains, _ := parseXtTable(b, false)
		for _, c := range chains {
			if (c.name == "OUTPUT" || c.name == "PREROUTING") && c.emptyAccept() {
				if _, err := ex(ctx, "nft", "delete chain "+t+" "+c.name); err != nil {
					return removed, err
				}
				removed = append(removed, "nft chain "+t+" "+c.name)
			}
		}
	}
	return removed, nil
}

// queueRulePresent reports whether an ip/ip6 mangle rule sends to queue.
func queueRulePresent(ruleset string, queue uint16) bool {
	_, blocks := tables(ruleset)
	re := regexp.MustCompile(fmt.Sprintf(`\bqueue num %d\b`, queue))
	for _, t := range xtTables {
		if re.MatchString(blocks[t]) {
			return true
		}
	}
	return false
}

// cleanDelayRules removes every delay-line rule (by comment) and then the
// mangle tables if empty. Without iptables-nft there can be none.
func cleanDelayRules(ctx context.Context, ex Exec) ([]string, error) {
	if !haveIptablesNft() {
		return nil, nil
	}
	iptMu.Lock()
	defer iptMu.Unlock()
	have, err := xtRules(ctx, ex, tablePrefix+"_delay_")
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, r := range have {
		if err := deleteXtRules(ctx, ex, [][]string{r}); err != nil {
			return removed, err
		}
		removed = append(removed, r[0]+" rule "+strings.Join(r[1:], " "))
	}
	if len(have) == 0 {
		return removed, nil
	}
	t, err := deleteEmptyXtTablesList(ctx, ex)
	return append(removed, t...), err
}
