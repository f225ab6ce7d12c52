package netfault

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"strings"
)

// chainPriority puts our chains just before the usual filter chains. A drop
// in any base chain is final, so the priority does not decide whether our
// drops happen; it only makes them happen before other filtering work.
const chainPriority = -10

// Partition drops traffic between the namespace and Peers, silently unless
// Reject is set (then ICMP port unreachable for UDP and others, TCP reset for
// TCP). Direction In drops what comes from Peers, Out what goes to them.
type Partition struct {
	Peers     []netip.Prefix
	Direction Direction
	Reject    bool
}

func (p Partition) String() string {
	s := fmt.Sprintf("partition %s peers=%s", p.Direction, prefixList(p.Peers))
	if p.Reject {
		s += " reject"
	}
	return s
}

func (p Partition) validate() error {
	if len(p.Peers) == 0 {
		return fmt.Errorf("no peers")
	}
	return validDir(p.Direction, p.Peers)
}

func (p Partition) object() object {
	var in, out []string
	verdict := []string{"drop"}
	if p.Reject {
		verdict = []string{"meta l4proto tcp reject with tcp reset", "reject with icmpx type port-unreachable"}
	}
	for _, v := range verdict {
		if p.Direction.in() {
			in = append(in, addrMatch("saddr", p.Peers, v)...)
		}
		if p.Direction.out() {
			out = append(out, addrMatch("daddr", p.Peers, v)...)
		}
	}
	return nftTable{name: tableName("partition", p.String()), in: in, out: out}
}

// Isolate drops everything but loopback traffic and traffic with Except.
// IPv6 neighbour discovery stays allowed so that the exceptions work.
type Isolate struct {
	Except []netip.Prefix
}

func (i Isolate) String() string { return "isolate except=" + prefixList(i.Except) }

func (i Isolate) validate() error { return validDir(Both, i.Except) }

func (i Isolate) object() object {
	nd := "icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert } accept"
	in := []string{`iifname "lo" accept`, nd}
	in = append(in, addrMatch("saddr", i.Except, "accept")...)
	in = append(in, "drop")
	out := []string{`oifname "lo" accept`, nd}
	out = append(out, addrMatch("daddr", i.Except, "accept")...)
	out = append(out, "drop")
	return nftTable{name: tableName("isolate", i.String()), in: in, out: out}
}

// Loss drops a random Percent of the packets to and from Peers (all
// non-loopback traffic when Peers is empty), each packet independently
// (nftables numgen random). Percent has a resolution of 0.01.
type Loss struct {
	Percent   float64
	Peers     []netip.Prefix
	Direction Direction
}

func (l Loss) String() string {
	return fmt.Sprintf("loss %g%% %s peers=%s", l.Percent, l.Direction, prefixList(l.Peers))
}

func (l Loss) validate() error {
	if !(l.Percent > 0 && l.Percent <= 100) {
		return fmt.Errorf("percent %g not in (0, 100]", l.Percent)
	}
	if h := l.Percent * 100; math.Abs(h-math.Round(h)) > 1e-6 {
		return fmt.Errorf("percent %g finer than 0.01", l.Percent)
	}
	return validDir(l.Direction, l.Peers)
}

// lossMatch is the numgen expression for l.Percent.
func (l Loss) lossMatch() string {
	if l.Percent == math.Trunc(l.Percent) {
		return fmt.Sprintf("numgen random mod 100 < %d", int(l.Percent))
	}
	return fmt.Sprintf("numgen random mod 10000 < %d", int(math.Round(l.Percent*100)))
}

func (l Loss) object() object {
	var in, out []string
	verdict := l.lossMatch() + " drop"
	if len(l.Peers) == 0 {
		if l.Direction.in() {
			in = []string{`iifname != "lo" ` + verdict}
		}
		if l.Direction.out() {
			out = []string{`oifname != "lo" ` + verdict}
		}
	} else {
		if l.Direction.in() {
			in = addrMatch("saddr", l.Peers, verdict)
		}
		if l.Direction.out() {
			out = addrMatch("daddr", l.Peers, verdict)
		}
	}
	return nftTable{name: tableName("loss", l.String()), in: in, out: out}
}

// nftTable is a table of ours with an input and an output chain.
type nftTable struct {
	name    string
	in, out []string
}

// script replaces the table in one nft transaction: declaring it first makes
// the delete succeed whether or not it existed, and nft applies the whole
// text atomically or not at all.
func (t nftTable) script() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "table inet %s {}\ndelete table inet %s\ntable inet %s {\n", t.name, t.name, t.name)
	chain := func(name, hook string, rules []string) {
		if len(rules) == 0 {
			return
		}
		fmt.Fprintf(&sb, "\tchain %s {\n\t\ttype filter hook %s priority %d; policy accept;\n", name, hook, chainPriority)
		for _, r := range rules {
			fmt.Fprintf(&sb, "\t\t%s\n", r)
		}
		sb.WriteString("\t}\n")
	}
	chain("input", "input", t.in)
	chain("output", "output", t.out)
	sb.WriteString("}\n")
	return sb.String()
}

func (t nftTable) apply(ctx context.Context, ex Exec, _ bool) error {
	if _, err := ex(ctx, "nft", t.script()); err != nil {
		return err
	}
	r, err := Ruleset(ctx, ex)
	if err != nil {
		return err
	}
	if !t.present(state{ruleset: r}) {
		return fmt.Errorf("table inet %s not in the ruleset after nft succeeded", t.name)
	}
	return nil
}

func (t nftTable) remove(ctx context.Context, ex Exec) error {
	_, err := ex(ctx, "nft", fmt.Sprintf("table inet %s {}\ndelete table inet %s", t.name, t.name))
	return err
}

func (t nftTable) present(st state) bool {
	_, blocks := tables(st.ruleset)
	_, ok := blocks["inet "+t.name]
	return ok
}

// tableName is deterministic, so the same fault maps to the same table from
// any process, and distinct faults in one namespace do not collide.
func tableName(kind, desc string) string {
	h := sha256.Sum256([]byte(desc))
	return tablePrefix + "_" + kind + "_" + hex.EncodeToString(h[:4])
}

// addrMatch returns one rule per address family present in ps.
func addrMatch(field string, ps []netip.Prefix, verdict string) []string {
	var v4, v6 []string
	for _, p := range minimalPrefixes(ps) {
		p = p.Masked()
		s := p.String()
		if p.IsSingleIP() {
			s = p.Addr().String()
		}
		if p.Addr().Is4() {
			v4 = append(v4, s)
		} else {
			v6 = append(v6, s)
		}
	}
	var out []string
	if len(v4) > 0 {
		out = append(out, fmt.Sprintf("ip %s { %s } %s", field, strings.Join(v4, ", "), verdict))
	}
	if len(v6) > 0 {
		out = append(out, fmt.Sprintf("ip6 %s { %s } %s", field, strings.Join(v6, ", "), verdict))
	}
	return out
}

func validDir(d Direction, ps []netip.Prefix) error {
	if d != Both && d != In && d != Out {
		return fmt.Errorf("bad direction %d", int(d))
	}
	for _, p := range ps {
		if !p.IsValid() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return fmt.Errorf("bad prefix %q", p)
		}
	}
	return nil
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, ",") + "]"
}

// minimalPrefixes drops prefixes contained in others (nft refuses an anonymous
// set with overlapping intervals), keeping the given order otherwise.
func minimalPrefixes(ps []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for i, p := range ps {
		p = p.Masked()
		covered := false
		for j, q := range ps {
			q = q.Masked()
			if i == j || q.Addr().Is4() != p.Addr().Is4() {
				continue
			}
			// q covers p if q is shorter and contains p's address, or they are
			// equal and q comes first.
			if (q.Bits() < p.Bits() && q.Contains(p.Addr())) || (q == p && j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}
