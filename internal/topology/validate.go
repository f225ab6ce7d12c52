package topology

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// FieldError is a problem with one field of a topology or node configuration. Field is the YAML path
// (pools.pcscf.size); Line is the line of the file when the error came from Parse or Load (0 otherwise).
type FieldError struct {
	Field string
	Line  int
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("topology: line %d: %s: %s", e.Line, e.Field, e.Msg)
	}
	return fmt.Sprintf("topology: %s: %s", e.Field, e.Msg)
}

type validator struct{ errs []error }

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) err() error { return errors.Join(v.errs...) }

var labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (v *validator) label(field, s string) {
	if !labelRE.MatchString(s) {
		v.add(field, "%q is not a host label (lower-case letters, digits and '-', at most 63)", s)
	}
}

func (v *validator) domain(field, s string) {
	if s == "" {
		v.add(field, "must not be empty")
		return
	}
	if len(s) > 253 || strings.HasSuffix(s, ".") {
		v.add(field, "%q: must be a domain name without the trailing dot", s)
		return
	}
	for _, l := range strings.Split(s, ".") {
		if !labelRE.MatchString(l) {
			v.add(field, "%q: label %q is not valid (lower-case letters, digits and '-')", s, l)
			return
		}
	}
}

func (v *validator) ip(field, s string) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		v.add(field, "%q is not an IP address", s)
		return
	}
	if a.IsUnspecified() {
		v.add(field, "%s: must be a specific address (other nodes connect to it)", s)
	}
}

func (v *validator) port(field string, p int) {
	if p < 1 || p > 65535 {
		v.add(field, "%d is not a port (1..65535)", p)
	}
}

func (v *validator) hostPort(field, s string) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		v.add(field, "%q: want ip:port", s)
		return
	}
	n := len(v.errs)
	v.ip(field, h)
	if len(v.errs) > n {
		return
	}
	pn, err := strconv.Atoi(p)
	if err != nil {
		v.add(field, "%q: port %q is not a number", s, p)
		return
	}
	v.port(field, pn)
}

func (v *validator) positive(field string, d time.Duration) {
	if d <= 0 {
		v.add(field, "%s: must be positive", d)
	}
}

func (v *validator) seconds(field string, d time.Duration, min time.Duration) {
	switch {
	case d < min:
		v.add(field, "%s: must be at least %s", d, min)
	case d%time.Second != 0:
		v.add(field, "%s: must be a whole number of seconds", d)
	case d > (1<<31-1)*time.Second:
		v.add(field, "%s: too long", d)
	}
}

func (v *validator) atLeast1(field string, n int) {
	if n < 1 {
		v.add(field, "%d: must be at least 1", n)
	}
}

func (v *validator) timers(prefix string, t Timers) {
	v.positive(prefix+".t1", t.T1)
	v.positive(prefix+".invite_no_answer", t.InviteNoAnswer)
	v.positive(prefix+".non_invite_no_answer", t.NonInviteNoAnswer)
}

func (v *validator) probing(prefix string, p Probing) {
	v.positive(prefix+".interval", p.Interval)
	if p.Interval > 0 && p.Interval < MinProbeInterval {
		v.add(prefix+".interval", "%s: must be at least %s", p.Interval, MinProbeInterval)
	}
	switch {
	case p.Jitter < 0:
		v.add(prefix+".jitter", "%s: must not be negative", p.Jitter)
	case p.Jitter > 0 && p.Jitter >= p.Interval:
		v.add(prefix+".jitter", "%s: must be less than the interval (%s)", p.Jitter, p.Interval)
	}
	v.positive(prefix+".timeout", p.Timeout)
	if p.Timeout > p.Interval && p.Interval > 0 {
		v.add(prefix+".timeout", "%s: must not be longer than the interval (%s)", p.Timeout, p.Interval)
	}
	v.atLeast1(prefix+".failures_to_down", p.FailuresToDown)
	v.atLeast1(prefix+".successes_to_up", p.SuccessesToUp)
}

// failover checks fast failure detection against the INVITE no-answer time it shortens (t: the node's timers).
func (v *validator) failover(prefix string, f Failover, t Timers) {
	d := f.ProvisionalTimeout
	switch {
	case d < 0:
		v.add(prefix+".provisional_timeout", "%s: must not be negative", d)
	case d > 0 && d < MinProvisionalTimeout:
		v.add(prefix+".provisional_timeout", "%s: must be 0 (off) or at least %s", d, MinProvisionalTimeout)
	case d > 0 && t.InviteNoAnswer > 0 && d >= t.InviteNoAnswer:
		v.add(prefix+".provisional_timeout", "%s: must be shorter than timers.invite_no_answer (%s)", d,
			t.InviteNoAnswer)
	}
}

func (v *validator) log(prefix string, l Log) {
	switch strings.ToLower(l.Format) {
	case "", "text", "json":
	default:
		v.add(prefix+".format", "%q: must be text or json", l.Format)
	}
	switch strings.ToLower(l.Level) {
	case "", "debug", "info", "warn", "warning", "error":
	default:
		v.add(prefix+".level", "%q: must be debug, info, warn or error", l.Level)
	}
}

func (v *validator) host(prefix string, h Host) {
	v.label(prefix+".host", h.Host)
	v.ip(prefix+".address", h.Address)
	v.port(prefix+".port", h.Port)
}

func (v *validator) pool(prefix string, p Pool) {
	maxSize := MaxPoolSize
	if p.SchemeOf() == SchemeNPlus1 {
		maxSize++ // N active members and the spare
	}
	if p.Size < 1 || p.Size > maxSize {
		v.add(prefix+".size", "%d: must be between 1 and %d", p.Size, maxSize)
		return
	}
	switch {
	case len(p.Addresses) > 0 && p.Address != "":
		v.add(prefix+".addresses", "give address or addresses, not both")
	case len(p.Addresses) > 0:
		if len(p.Addresses) != p.Size {
			v.add(prefix+".addresses", "%d addresses for %d members", len(p.Addresses), p.Size)
		}
		for i, a := range p.Addresses {
			v.ip(fmt.Sprintf("%s.addresses[%d]", prefix, i), a)
		}
	default:
		v.ip(prefix+".address", p.Address)
	}
	switch {
	case p.BasePort != 0 && p.Port != 0:
		v.add(prefix+".port", "give base_port or port, not both")
	case p.BasePort != 0:
		v.port(prefix+".base_port", p.BasePort)
		if p.BasePort+p.Size-1 > 65535 {
			v.add(prefix+".base_port", "%d: the last member's port %d is beyond 65535", p.BasePort, p.BasePort+p.Size-1)
		}
	case p.Port != 0:
		v.port(prefix+".port", p.Port)
	default:
		v.add(prefix+".base_port", "missing (or port, when every member has its own address)")
	}
	if p.Scheme != "" && !slices.Contains(Schemes, p.Scheme) {
		v.add(prefix+".scheme", "%q: must be one of %s", p.Scheme, strings.Join(Schemes, ", "))
	}
	if p.SchemeOf() == SchemeNPlus1 && p.Size < 2 {
		v.add(prefix+".size", "%d: n-plus-1 needs at least one active member and the spare (size >= 2)", p.Size)
	}
	if p.SchemeOf() == SchemeMutual && p.Size%2 != 0 {
		v.add(prefix+".size", "%d: mutual pairs the members (1+2, 3+4, …), the size must be even", p.Size)
	}
	switch {
	case len(p.StandbyAddresses) > 0 && p.SchemeOf() != SchemeActiveStandby:
		v.add(prefix+".standby_addresses", "only for scheme active-standby")
	case p.SchemeOf() == SchemeActiveStandby && p.BasePort == 0 && len(p.StandbyAddresses) != p.Size:
		v.add(prefix+".standby_addresses", "%d addresses for %d standbys (active-standby with port needs one per member)",
			len(p.StandbyAddresses), p.Size)
	case p.SchemeOf() == SchemeActiveStandby && p.BasePort != 0 && p.BasePort+2*p.Size-1 > 65535:
		v.add(prefix+".base_port", "%d: the last standby's port %d is beyond 65535", p.BasePort, p.BasePort+2*p.Size-1)
	}
	for i, a := range p.StandbyAddresses {
		v.ip(fmt.Sprintf("%s.standby_addresses[%d]", prefix, i), a)
	}
	if p.Weight < 1 || p.Weight > 65535 {
		v.add(prefix+".weight", "%d: must be between 1 and 65535 (Go's resolver does not shuffle zero weights)", p.Weight)
	}
}

// kamailio checks the Kamailio members of a mixed pool (Pool.Kamailio).
func (v *validator) kamailio(t *Topology) {
	if len(t.Pools.PCSCF.Kamailio) > 0 {
		v.add("pools.pcscf.kamailio", "Kamailio runs only as an S-CSCF member (the lab has no Kamailio P-CSCF)")
	}
	p := t.Pools.SCSCF
	if len(p.Kamailio) == 0 {
		return
	}
	seen := map[int]bool{}
	for i, k := range p.Kamailio {
		f := fmt.Sprintf("pools.scscf.kamailio[%d]", i)
		switch {
		case k < 1 || k > p.Size:
			v.add(f, "%d: not a member of the pool (1..%d)", k, p.Size)
		case seen[k]:
			v.add(f, "%d: listed twice", k)
		}
		seen[k] = true
	}
	if s := p.SchemeOf(); SchemeReplicates(s) {
		v.add("pools.scscf.kamailio", "scheme %s copies registrations between members, and Kamailio's S-CSCF "+
			"cannot take part: use quasi-pool, load-sharing or n-plus-1", s)
	}
	if t.Networks != nil {
		v.add("pools.scscf.kamailio", "Kamailio members run only in the local lab (processes or namespaces), "+
			"not in containers")
	}
}

// Validate checks the topology. The error lists every bad field (errors.Join of *FieldError).
func (t *Topology) Validate() error {
	var v validator
	v.domain("domain", t.Domain)
	v.label("dns.host", t.DNS.Host)
	v.hostPort("dns.listen", t.DNS.Listen)
	v.seconds("dns.ttl", t.DNS.TTL, 0)
	v.label("hss.host", t.HSS.Host)
	v.ip("hss.address", t.HSS.Address)
	v.port("hss.diameter_port", t.HSS.DiameterPort)
	v.port("hss.http_port", t.HSS.HTTPPort)
	if c := t.HSS.LabSubscriberCount; c < 0 || c > MaxLabSubscribers {
		v.add("hss.lab_subscriber_count", "must be between 0 (the default, 1000) and %d (user%d), is %d",
			MaxLabSubscribers, MaxLabSubscribers, c)
	}
	v.host("bac", t.BAC)
	v.host("icscf", t.ICSCF)
	v.pool("pools.pcscf", t.Pools.PCSCF)
	v.pool("pools.scscf", t.Pools.SCSCF)
	v.kamailio(t)
	structural := len(v.errs) == 0 // the checks of names and endpoints below need the nodes, which need these
	v.timers("timers", t.Timers)
	v.probing("probing", t.Probing)
	v.failover("failover", t.Failover, t.Timers)
	v.seconds("registration.expires", t.Registration.Expires, time.Second)
	v.log("log", t.Log)
	if t.Overload.Target < 0 || t.Overload.MaxInFlight < 0 || t.Overload.RetryAfter < 0 {
		v.add("overload", "target, max_in_flight and retry_after must not be negative")
	}
	if r := t.Overload.MaxRate; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		v.add("overload.max_rate", "%v: must be 0 (no limit) or a positive number of requests per second", r)
	}
	if t.Trace.MaxMB < 0 {
		v.add("trace.max_mb", "%d: must be 0 (default %d MiB) or more", t.Trace.MaxMB, 128)
	}
	if !structural {
		return v.err()
	}

	nodes := t.Nodes()
	field := func(n Node) string {
		switch {
		case n.Pool != "":
			return "pools." + n.Pool
		case n.Kind == KindDNS:
			return "dns"
		}
		return string(n.Kind)
	}
	names := map[string]Node{}
	endpoints := map[string]string{}
	for _, n := range nodes {
		if o, dup := names[n.Name]; dup {
			blame, other := n, o
			if n.Pool != "" { // pool members are named by the pool: blame the node with a host field
				blame, other = o, n
			}
			v.add(field(blame)+".host", "node name %q is also the name of a %s node", n.Name, other.Kind)
		}
		names[n.Name] = n
		for _, p := range n.Ports {
			ep := net.JoinHostPort(n.Address, strconv.Itoa(p.Port))
			what := n.Name + " " + p.Name
			if o, dup := endpoints[ep]; dup {
				v.add(field(n), "%s address %s is also %s", what, ep, o)
			}
			endpoints[ep] = what
		}
	}

	v.sites(t)

	keys := make([]string, 0, len(t.Overrides))
	for k := range t.Overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, name := range keys {
		o := t.Overrides[name]
		prefix := "nodes." + name
		if _, ok := names[name]; !ok {
			v.add(prefix, "no node named %q in this topology", name)
			continue
		}
		if o.Timers != (Timers{}) {
			v.timers(prefix+".timers", mergeTimers(t.Timers, o.Timers))
		}
		if o.Probing != (Probing{}) {
			v.probing(prefix+".probing", mergeProbing(t.Probing, o.Probing))
		}
		v.log(prefix+".log", o.Log)
		if o.Metrics != "" {
			switch k := names[name].Kind; k {
			case KindBAC, KindPCSCF, KindICSCF, KindSCSCF:
				if _, port, err := net.SplitHostPort(o.Metrics); err != nil || port == "" {
					v.add(prefix+".metrics", "%q: must be host:port", o.Metrics)
				}
			default:
				v.add(prefix+".metrics", "only SIP nodes serve metrics here (a %s node does not)", k)
			}
		}
	}
	if nw := t.Networks; nw != nil {
		if err := nw.Validate(); err != nil {
			v.add("networks", "%s", strings.TrimPrefix(err.Error(), "topology: networks."))
		} else {
			for _, n := range nodes {
				on, want := nw.Core, "core"
				if n.Kind == KindHSS {
					on, want = nw.Cx, "cx"
				}
				if a, err := netip.ParseAddr(n.Address); err == nil && !on.Contains(a) {
					v.add(field(n), "%s address %s: not on the %s network %s", n.Name, a, want, on)
				}
			}
		}
	}
	return v.err()
}

func mergeTimers(base, o Timers) Timers {
	if o.T1 != 0 {
		base.T1 = o.T1
	}
	if o.InviteNoAnswer != 0 {
		base.InviteNoAnswer = o.InviteNoAnswer
	}
	if o.NonInviteNoAnswer != 0 {
		base.NonInviteNoAnswer = o.NonInviteNoAnswer
	}
	return base
}

func mergeProbing(base, o Probing) Probing {
	if o.Interval != 0 {
		base.Interval = o.Interval
	}
	if o.Timeout != 0 {
		base.Timeout = o.Timeout
	}
	if o.FailuresToDown != 0 {
		base.FailuresToDown = o.FailuresToDown
	}
	if o.SuccessesToUp != 0 {
		base.SuccessesToUp = o.SuccessesToUp
	}
	if o.Panic != nil {
		base.Panic = o.Panic
	}
	if o.LagExcuse != 0 {
		base.LagExcuse = o.LagExcuse
	}
	if o.Jitter != 0 {
		base.Jitter = o.Jitter
	}
	return base
}

func mergeLog(base, o Log) Log {
	if o.Format != "" {
		base.Format = o.Format
	}
	if o.Level != "" {
		base.Level = o.Level
	}
	return base
}

// annotateLines fills in the line of every *FieldError in err from the parsed document.
func annotateLines(err error, doc *yaml.Node) {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Line == 0 {
			fe.Line = lineOf(doc, fe.Field)
		}
	}
}

// lineOf returns the line of the YAML node at a field path, or of its deepest present ancestor (the document
// itself when not even the first key is present).
func lineOf(doc *yaml.Node, path string) int {
	if l := FieldLine(doc, path); l != 0 {
		return l
	}
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	return n.Line
}

// FieldLine returns the line of the YAML node at a field path (a.b[2].c) in a parsed document, or of its deepest
// present ancestor; 0 when not even the first key is present. Strict YAML loaders use it to put a line number on
// the errors of their Validate.
func FieldLine(doc *yaml.Node, path string) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, seg := range strings.Split(path, ".") {
		idx := -1
		if i := strings.IndexByte(seg, '['); i >= 0 && strings.HasSuffix(seg, "]") {
			idx, _ = strconv.Atoi(seg[i+1 : len(seg)-1])
			seg = seg[:i]
		}
		key, next := mappingEntry(n, seg)
		if next == nil {
			return line
		}
		n, line = next, key.Line
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n, line = n.Content[idx], n.Content[idx].Line
		}
	}
	return line
}

func mappingEntry(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}
