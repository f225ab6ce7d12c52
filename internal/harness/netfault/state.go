package netfault

import (
	"bufio"
	"context"
	"regexp"
	"strconv"
	"strings"
)

const (
	// tablePrefix starts the name of every nftables table this package adds.
	tablePrefix = "imslab_fault"
	// qdiscHandle is the handle of every root qdisc this package adds.
	qdiscHandle = "fa17:"
)

// state is what a namespace holds that faults can change.
type state struct {
	ruleset string // nft -s list ruleset
	qdiscs  string // tc qdisc show
}

// Ruleset returns `nft -s list ruleset` (no counters) in the namespace.
func Ruleset(ctx context.Context, ex Exec) (string, error) {
	out, err := ex(ctx, "nft", "-s", "list", "ruleset")
	return string(out), err
}

// Qdiscs returns `tc qdisc show` in the namespace.
func Qdiscs(ctx context.Context, ex Exec) (string, error) {
	out, err := ex(ctx, "tc", "qdisc", "show")
	return string(out), err
}

func snapshot(ctx context.Context, ex Exec) (state, error) {
	r, err := Ruleset(ctx, ex)
	if err != nil {
		return state{}, err
	}
	q, err := Qdiscs(ctx, ex)
	if err != nil {
		return state{}, err
	}
	return state{ruleset: r, qdiscs: q}, nil
}

// foreign returns a and b without anything this package added, ready to be
// compared. A device whose root qdisc is ours in either state is left out of
// both: while our qdisc is its root, the kernel's default qdisc is not listed.
func foreign(a, b state) (string, string) {
	skip := map[string]bool{}
	for _, s := range []state{a, b} {
		for _, q := range parseQdiscs(s.qdiscs) {
			if q.root && q.handle == qdiscHandle {
				skip[q.dev] = true
			}
		}
	}
	f := func(s state) string {
		return "# nft\n" + stripOurTables(s.ruleset) + "# tc\n" + stripQdiscs(s.qdiscs, skip)
	}
	return f(a), f(b)
}

// tables parses the top-level `table FAMILY NAME {` blocks of a ruleset into
// "FAMILY NAME" → block text.
func tables(ruleset string) (order []string, blocks map[string]string) {
	blocks = map[string]string{}
	var cur string
	var sb strings.Builder
	sc := bufio.NewScanner(strings.NewReader(ruleset))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if cur == "" && strings.HasPrefix(line, "table ") {
			f := strings.Fields(line)
			if len(f) >= 3 {
				cur = f[1] + " " + f[2]
				sb.Reset()
			}
		}
		if cur != "" {
			sb.WriteString(line)
			sb.WriteByte('\n')
			if line == "}" {
				order = append(order, cur)
				blocks[cur] = sb.String()
				cur = ""
			}
		}
	}
	return order, blocks
}

func isOurTable(key string) bool {
	f := strings.Fields(key)
	return len(f) == 2 && strings.HasPrefix(f[1], tablePrefix)
}

func stripOurTables(ruleset string) string {
	order, blocks := tables(ruleset)
	var sb strings.Builder
	for _, k := range order {
		switch {
		case isOurTable(k):
		case isXtTable(k):
			sb.WriteString(normXtTable(blocks[k]))
		default:
			sb.WriteString(blocks[k])
		}
	}
	return sb.String()
}

// xtTables are the iptables-nft tables the NFQUEUE delay line adds rules to.
var xtTables = []string{"ip mangle", "ip6 mangle"}

func isXtTable(key string) bool { return key == xtTables[0] || key == xtTables[1] }

var queueNumRE = regexp.MustCompile(`\bqueue num ([0-9]+)\b`)

// xtChain is one chain of an iptables-nft table block, with our rules left out.
type xtChain struct {
	name  string
	lines []string // header, body (no blank lines), closing brace
}

// emptyAccept: no rule, policy accept (a base chain that changes nothing).
func (c xtChain) emptyAccept() bool {
	body := c.lines[1 : len(c.lines)-1]
	if len(body) != 1 {
		return false
	}
	t := strings.TrimSpace(body[0])
	return strings.HasPrefix(t, "type ") && strings.HasSuffix(t, "policy accept;")
}

// parseXtTable splits a table block into its chains, with strip leaving out
// rules that send to a queue number of ours (queueBase and up: nft cannot
// show their xt comment). ok is false when the table holds more than chains.
func parseXtTable(block string, strip bool) (chains []xtChain, ok bool) {
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	if len(lines) < 2 {
		return nil, false
	}
	var cur *xtChain
	for _, l := range lines[1 : len(lines)-1] {
		t := strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(t, "chain ") && strings.HasSuffix(t, "{"):
			cur = &xtChain{name: strings.Fields(t)[1], lines: []string{l}}
		case cur != nil && t == "}":
			cur.lines = append(cur.lines, l)
			chains = append(chains, *cur)
			cur = nil
		case cur != nil:
			if m := queueNumRE.FindStringSubmatch(t); strip && m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil && n >= queueBase {
					continue
				}
			}
			if t != "" {
				cur.lines = append(cur.lines, l)
			}
		default:
			// Something outside a chain (a set, a comment).
			if t != "" {
				return nil, false
			}
		}
	}
	return chains, cur == nil
}

// normXtTable returns an iptables-nft table block without what the delay line
// adds: its rules, then base chains left with no rule and policy accept
// (iptables-nft creates them on first use; they change nothing), then the
// table itself if no chain is left ("").
func normXtTable(block string) string {
	return xtTableWithout(block, true)
}

// xtTableWithout is normXtTable, leaving our rules in unless strip.
func xtTableWithout(block string, strip bool) string {
	chains, ok := parseXtTable(block, strip)
	if !ok {
		return block
	}
	var sb strings.Builder
	for _, c := range chains {
		if c.emptyAccept() {
			continue
		}
		for _, l := range c.lines {
			sb.WriteString(l)
			sb.WriteByte('\n')
		}
	}
	if sb.Len() == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	return lines[0] + "\n" + sb.String() + lines[len(lines)-1] + "\n"
}

// ourTables returns the "FAMILY NAME" of every table of this package.
func ourTables(ruleset string) []string {
	order, _ := tables(ruleset)
	var out []string
	for _, k := range order {
		if isOurTable(k) {
			out = append(out, k)
		}
	}
	return out
}

// qdiscLine is one parsed line of `tc qdisc show`.
type qdiscLine struct {
	kind, handle, dev string
	root              bool
	parent            string
	text              string
}

func parseQdiscs(s string) []qdiscLine {
	var out []qdiscLine
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "qdisc" {
			continue
		}
		q := qdiscLine{kind: f[1], handle: f[2], text: strings.TrimSpace(line)}
		for i := 3; i < len(f); i++ {
			switch f[i] {
			case "dev":
				if i+1 < len(f) {
					q.dev = f[i+1]
				}
			case "root":
				q.root = true
			case "parent":
				if i+1 < len(f) {
					q.parent = f[i+1]
				}
			}
		}
		out = append(out, q)
	}
	return out
}

func (q qdiscLine) ours() bool {
	return q.handle == qdiscHandle || strings.HasPrefix(q.parent, qdiscHandle)
}

func stripQdiscs(s string, skipDev map[string]bool) string {
	var sb strings.Builder
	for _, q := range parseQdiscs(s) {
		if q.ours() || skipDev[q.dev] {
			continue
		}
		sb.WriteString(q.text)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// findRoot returns the root qdisc of dev in s, if listed.
func findRoot(s, dev string) (qdiscLine, bool) {
	for _, q := range parseQdiscs(s) {
		if q.dev == dev && q.root {
			return q, true
		}
	}
	return qdiscLine{}, false
}
