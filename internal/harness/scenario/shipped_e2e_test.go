package scenario_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"

	"github.com/imslab/quasipool/internal/analysis/report"
	"github.com/imslab/quasipool/internal/harness/lab"
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/testutil"
	"github.com/imslab/quasipool/internal/harness/ue"
	"github.com/imslab/quasipool/internal/topology"
)

// The shipped scenarios (scenarios/*.yaml), shortened for CI: the same topology, traffic, faults and expectations,
// compressed in time. The fault scenarios' probe traffic (every phone calls the next one every probe interval)
// already has every affected user call and be called right after the fault, so it is kept; the baseline's random
// calls are made denser so the short run still places a few hundred.
const (
	ciDuration = 24 * time.Second
	ciPhones   = 30
	ciCallRate = 16 // calls per second: ~0.5 per phone and direction, ~8 each way in the 16 s after the fault
	ciHold     = 500 * time.Millisecond
)

// shorten compresses a shipped scenario to ciDuration: fault offsets and durations scale with the run (a fault at
// 20 s of 60 s moves to 8 s of 24 s), random traffic becomes the CI one and the lab moves to a free block of 11
// ports. Expectations are kept; the only threshold that depends on the amount of traffic, the baseline's
// calls.total, scales with the number of calls offered.
func shorten(sc *scenario.Scenario, base int) {
	GinkgoHelper()
	shortenTo(sc, base, 11, ciDuration)
}

// shippedPorts is how many ports shortenTo lays a scenario's lab out on: the DNS, the HSS (Diameter, HTTP), the
// BAC, the I-CSCF and one per pool member.
func shippedPorts(sc *scenario.Scenario) int {
	return 5 + sc.Topology.Pools.PCSCF.Size + sc.Topology.Pools.SCSCF.Size
}

// shortenTo is shorten to a run of d, on a block of ports (at least shippedPorts). A flap's period is not scaled:
// it is the time a member stays down or up, which must stay longer than detection (two 1 s probes) for the flap
// to mean anything; the run is made long enough for the cycles instead (flapping-scscf).
func shortenTo(sc *scenario.Scenario, base, ports int, d time.Duration) {
	GinkgoHelper()
	f := float64(d) / float64(sc.Duration)
	scale := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) * f).Round(100 * time.Millisecond)
	}
	for i := range sc.Faults {
		sc.Faults[i].At, sc.Faults[i].For = scale(sc.Faults[i].At), scale(sc.Faults[i].For)
	}
	offered := d.Seconds() / sc.Duration.Seconds()
	if sc.Traffic.ProbeInterval == 0 {
		offered *= ciCallRate / sc.Traffic.CallRate
	}
	for i, e := range sc.Expectations {
		if e.Metric == "calls.total" && e.Value != nil {
			v := *e.Value * offered
			sc.Expectations[i].Value = &v
		}
	}
	sc.Duration = d
	if sc.Traffic.ProbeInterval == 0 {
		// Random calls only (baseline): denser, so the short run still places a few hundred.
		sc.Traffic.Phones, sc.Traffic.CallRate, sc.Traffic.Hold = ciPhones, ciCallRate, ciHold
	} // with probe traffic every phone already calls and is called every probe interval: kept as it is

	Expect(shippedPorts(sc)).To(BeNumerically("<=", ports), "the block of ports holds every node")
	t := &sc.Topology
	t.DNS.Listen = fmt.Sprintf("127.0.0.1:%d", base)
	t.HSS.Address, t.HSS.DiameterPort, t.HSS.HTTPPort = "127.0.0.1", base+1, base+2
	t.BAC.Address, t.BAC.Port = "127.0.0.1", base+3
	t.ICSCF.Address, t.ICSCF.Port = "127.0.0.1", base+4
	t.Pools.PCSCF.Address, t.Pools.PCSCF.Addresses, t.Pools.PCSCF.BasePort, t.Pools.PCSCF.Port = "127.0.0.1", nil, base+5, 0
	t.Pools.SCSCF.Address, t.Pools.SCSCF.Addresses, t.Pools.SCSCF.BasePort, t.Pools.SCSCF.Port = "127.0.0.1", nil,
		base+5+t.Pools.PCSCF.Size, 0
	Expect(sc.Validate()).To(Succeed())
}

// shippedRun is one finished run of a shortened shipped scenario and what it recorded.
type shippedRun struct {
	dir     string
	outcome *scenario.Outcome
	sum     *report.Summary
	output  string
	domain  string
	sc      *scenario.Scenario // as run (shortened)
	faultNs int64              // the lab's first fault event of the first fault
	dead    string             // its target (a node, or the site of a site-down)
	invites []sipHop
	cx      []cxAnswer
	events  map[string][]nodeEvent // node → its events (restore, reselect, …)
	records []ue.Record
}

// sipHop is an INVITE request sent from one node to another (phones are "ue"), as the trace recorded it.
type sipHop struct {
	TNs      int64 // the earliest trace line of it
	From, To string
	Received bool // the receiver recorded it
	CallID   string
	Routes   []sip.Uri
}

// cxAnswer is a cx_answer event of the HSS.
type cxAnswer struct {
	TNs          int64  `json:"t_ns"`
	Cmd          string `json:"cmd"`
	UAT          *int   `json:"uat"`
	SAT          *int   `json:"sat"`
	Result       int    `json:"result"`
	Experimental bool   `json:"experimental"`
	IMPU         string `json:"impu"`
	ServerName   string `json:"server_name"`
	Peer         string `json:"peer"`
	LatencyUs    int64  `json:"latency_us"`
}

// skew absorbs the difference between the HSS's event times and the SIP nodes' trace times (different processes,
// each stamping after its own socket call or answer on a loaded machine): comparisons of the two allow it.
const skew = int64(20 * time.Millisecond)

// requestNs is when the HSS received the request: the event is written after the answer was sent, so it can come
// after what the asking node did with the answer; the request cannot.
func (a cxAnswer) requestNs() int64 { return a.TNs - a.LatencyUs*1000 }

func (a cxAnswer) String() string {
	s := a.Cmd
	if a.UAT != nil {
		s += fmt.Sprintf(" uat %d", *a.UAT)
	}
	if a.SAT != nil {
		s += fmt.Sprintf(" sat %d", *a.SAT)
	}
	return s + fmt.Sprintf(" %s → %d (experimental %t) server %q, asked at %d", a.IMPU, a.Result, a.Experimental,
		a.ServerName, a.requestNs())
}

type nodeEvent struct {
	Tried   []string `json:"tried"`
	TNs     int64    `json:"t_ns"`
	Kind    string   `json:"kind"`
	IMPU    string   `json:"impu"`
	CallID  string   `json:"call_id"`
	UAT     *int     `json:"uat"`
	Cmd     string   `json:"cmd"`
	Peer    string   `json:"peer"`    // peer_state
	State   string   `json:"state"`   // peer_state
	Failure string   `json:"failure"` // sip_tx
	Served  int      `json:"served"`  // dns_stale
	Queries int      `json:"queries"` // dns_stats
}

// requireKamailio skips when Kamailio's IMS S-CSCF is not installed, unless IMSLAB_REQUIRE_KAMAILIO is set (then
// it fails).
func requireKamailio() {
	if lab.KamailioBinary() != "" {
		return
	}
	if os.Getenv("IMSLAB_REQUIRE_KAMAILIO") != "" {
		Fail("Kamailio is not installed and IMSLAB_REQUIRE_KAMAILIO is set " +
			"(apt-get install -y kamailio kamailio-ims-modules kamailio-presence-modules)")
	}
	Skip("Kamailio is not installed (kamailio kamailio-ims-modules kamailio-presence-modules)")
}

// buildNodes returns the node binaries every lab spec shares (testutil.BinDir: built once per test run).
func buildNodes(ctx SpecContext) string {
	GinkgoHelper()
	dir, err := testutil.BinDir(ctx, false)
	Expect(err).NotTo(HaveOccurred())
	return dir
}

// detectionBound is the latest node can notice a dead peer under the run's own configuration: failures_to_down
// probes an interval apart, the last one timing out, or a request's no-answer timer, whichever is later, plus
// one probe interval for the phase of the probes at the fault and one timeout of scheduling slack.
func detectionBound(sc *scenario.Scenario, node string) time.Duration {
	GinkgoHelper()
	nc, err := sc.Topology.NodeConfig(node)
	Expect(err).NotTo(HaveOccurred())
	p := nc.Probing
	probe := time.Duration(p.FailuresToDown)*p.Interval + p.Timeout
	return max(probe, nc.Timers.InviteNoAnswer) + p.Interval + p.Timeout
}

// starved says why the run's own health record holds it invalid for timing (a node stalled, the machine
// overloaded, another lab beside it), and which nodes ran late (self_lag), or "".
func starved(s *report.Summary) string {
	if s == nil {
		return ""
	}
	var parts []string
	if s.Health != nil && !s.Health.Valid {
		parts = append(parts, s.Health.Describe())
	}
	for _, n := range slices.Sorted(maps.Keys(s.SelfLag)) {
		l := s.SelfLag[n]
		parts = append(parts, fmt.Sprintf("%s ran up to %.0f ms late (%d s with late timers)", n, l.MaxLagMs, l.Events))
	}
	return strings.Join(parts, "; ")
}

// starvedNote is starved as the end of a failure message.
func starvedNote(s *report.Summary) string {
	if st := starved(s); st != "" {
		return "; STARVED run: " + st
	}
	return ""
}

// runShipped loads scenarios/<name>.yaml, shortens it, runs it with the real report builder and loads what the
// run recorded, with the run directory <dir>/run.
func runShipped(ctx SpecContext, name, binDir, dir string, d time.Duration) *shippedRun {
	GinkgoHelper()
	return runShippedEdited(ctx, name, binDir, dir, d, nil)
}

// runShippedEdited is runShipped with the shortened scenario changed by edit (nil: as shipped) before it runs.
func runShippedEdited(ctx SpecContext, name, binDir, dir string, d time.Duration, edit func(*scenario.Scenario)) *shippedRun {
	GinkgoHelper()
	wd, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	repo, err := lab.FindRepo(wd)
	Expect(err).NotTo(HaveOccurred())
	file := filepath.Join(repo, "scenarios", name+".yaml")
	sc, err := scenario.Load(file)
	Expect(err).NotTo(HaveOccurred())
	shortenTo(sc, freeBlock(shippedPorts(sc)), shippedPorts(sc), d)
	if edit != nil {
		edit(sc)
		Expect(sc.Validate()).To(Succeed())
	}

	r := &shippedRun{dir: filepath.Join(dir, "run"), domain: sc.Topology.Domain, sc: sc}
	var out strings.Builder
	build := func(runDir string, eval scenario.Evaluator) (scenario.Metrics, error) {
		s, err := report.Build(runDir, scenario.ReportChecks(eval))
		if err != nil {
			return nil, err
		}
		r.sum = s
		return s, nil
	}
	began := time.Now()
	r.outcome, err = scenario.Run(ctx, scenario.RunConfig{Scenario: sc, ScenarioFile: file, RunDir: r.dir, BinDir: binDir,
		Progress: 4 * time.Second, GracePeriod: 2 * time.Second},
		scenario.WithOutput(&out),
		scenario.WithLogger(slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		scenario.WithReportBuilder(build))
	r.output = out.String()
	GinkgoWriter.Printf("%s (took %s):\n%s\n", name, time.Since(began).Round(time.Second), r.output)
	Expect(err).NotTo(HaveOccurred(), "%s: %s", name, r.output)
	Expect(r.sum).NotTo(BeNil())
	r.load(sc)
	return r
}

// load reads the trace, events and records of the run.
func (r *shippedRun) load(sc *scenario.Scenario) {
	GinkgoHelper()
	if len(sc.Faults) > 0 {
		// The KPIs follow the first fault (hss-outage has a second one); its target may be left out (hss-down,
		// dns-down: the lab's fault event names the node) or be a site (every node of it is killed).
		r.dead = sc.Faults[0].Target
		nodes, _ := sc.Topology.Target(r.dead)
		for _, e := range readJSONL[labEvent](filepath.Join(r.dir, "events", "lab.jsonl")) {
			if e.Kind == "fault" && r.faultNs == 0 && (r.dead == "" || e.Target == r.dead || slices.Contains(nodes, e.Target)) {
				r.faultNs = e.TNs
				if r.dead == "" {
					r.dead = e.Target
				}
			}
		}
		Expect(r.faultNs).NotTo(BeZero(), "the lab recorded the fault")
	}

	// Addresses → node names, from the node configurations.
	addrs := map[string]string{}
	cfgs, err := filepath.Glob(filepath.Join(r.dir, "config", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, p := range cfgs {
		var c struct {
			Name   string `yaml:"name"`
			Listen string `yaml:"listen"`
		}
		b, err := os.ReadFile(p)
		Expect(err).NotTo(HaveOccurred())
		if yaml.Unmarshal(b, &c) == nil && c.Name != "" && c.Listen != "" {
			addrs[c.Listen] = c.Name
		}
	}
	Expect(addrs).To(ContainElement("bac"))
	nodeOf := func(addr string) string {
		if n, ok := addrs[addr]; ok {
			return n
		}
		return "ue"
	}

	// One hop per INVITE sent (retransmissions are one), recorded by its sender ("out"), its receiver ("in") or
	// both. Each line is stamped after the socket call returned, so the receiver's line can come before the
	// sender's; the earlier of the two keeps cause before effect.
	seen := map[string]int{}
	for _, t := range runTrace(r.dir) {
		if t.Proto != "sip" || !strings.HasPrefix(string(t.Data), "INVITE ") {
			continue
		}
		h := sipHop{TNs: t.TNs}
		if t.Dir == "out" {
			h.From, h.To = t.Node, nodeOf(t.Dst)
		} else {
			h.From, h.To, h.Received = nodeOf(t.Src), t.Node, true
		}
		key := h.From + " " + h.To + " " + string(t.Data)
		if i, ok := seen[key]; ok {
			r.invites[i].TNs = min(r.invites[i].TNs, h.TNs)
			r.invites[i].Received = r.invites[i].Received || h.Received
			continue
		}
		m, err := sip.ParseMessage(t.Data)
		Expect(err).NotTo(HaveOccurred(), "%s: %s", t.Node, t.Data)
		req, ok := m.(*sip.Request)
		Expect(ok).To(BeTrue())
		h.CallID = req.CallID().Value()
		for _, rh := range req.GetHeaders("Route") {
			route, ok := rh.(*sip.RouteHeader)
			Expect(ok).To(BeTrue(), "Route %s", rh.Value())
			h.Routes = append(h.Routes, route.Address)
		}
		seen[key] = len(r.invites)
		r.invites = append(r.invites, h)
	}
	Expect(r.invites).NotTo(BeEmpty())
	slices.SortStableFunc(r.invites, func(a, b sipHop) int { return cmp.Compare(a.TNs, b.TNs) })

	r.events = map[string][]nodeEvent{}
	// Every node's events: events/<node>.jsonl, or the merged events.jsonl of a run whose report merged them.
	evs, err := filepath.Glob(filepath.Join(r.dir, "events", "*.jsonl"))
	Expect(err).NotTo(HaveOccurred())
	if len(evs) == 0 {
		evs = []string{filepath.Join(r.dir, report.FileEvents)}
	}
	for _, p := range evs {
		eachLine(p, func(line []byte) {
			var e nodeEvent
			if json.Unmarshal(line, &e) != nil {
				return
			}
			var head struct {
				Node string `json:"node"`
			}
			_ = json.Unmarshal(line, &head)
			node := head.Node
			if node == "hss" && e.Kind == "cx_answer" {
				var a cxAnswer
				Expect(json.Unmarshal(line, &a)).To(Succeed())
				r.cx = append(r.cx, a)
			}
			r.events[node] = append(r.events[node], e)
		})
	}
	Expect(r.cx).NotTo(BeEmpty())
	slices.SortStableFunc(r.cx, func(a, b cxAnswer) int { return cmp.Compare(a.requestNs(), b.requestNs()) })
	r.records = readJSONL[ue.Record](filepath.Join(r.dir, "records.jsonl"))
}

func eachLine(path string, fn func([]byte)) {
	GinkgoHelper()
	sc := bufio.NewScanner(bytes.NewReader(nodeEventsFile(path)))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		fn(sc.Bytes())
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
}

// nodeEventsFile is readNodeEvents, failing the spec on an error.
func nodeEventsFile(path string) []byte {
	GinkgoHelper()
	b, err := readNodeEvents(path)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// readNodeEvents reads the file at path; a node's events file (<run>/events/<node>.jsonl) of a run whose report
// merged it away is read from the merged events.jsonl, the node's lines only.
func readNodeEvents(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if !errors.Is(err, fs.ErrNotExist) || filepath.Base(filepath.Dir(path)) != "events" {
		return b, err
	}
	node := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	all, merr := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(path)), report.FileEvents))
	if merr != nil {
		return nil, err // the node's own file is the one missing
	}
	var out []byte
	for _, line := range bytes.Split(all, []byte("\n")) {
		var head struct {
			Node string `json:"node"`
		}
		if json.Unmarshal(line, &head) == nil && head.Node == node {
			out = append(append(out, line...), '\n')
		}
	}
	return out, nil
}

// metric reads a KPI of the summary; absent is a failure.
func (r *shippedRun) metric(path string) float64 {
	GinkgoHelper()
	v, ok := r.sum.Lookup(path)
	Expect(ok).To(BeTrue(), "summary.json has %s", path)
	return v
}

// firstCall is the first successful call record of a user in a direction ("mo", "mt") started at or after the
// fault.
func (r *shippedRun) firstCall(impu, dir string) ue.Record {
	GinkgoHelper()
	var first *ue.Record
	for i, rec := range r.records {
		if rec.Type == "call" && rec.Direction == dir && rec.IMPU == impu && rec.Result == "ok" && rec.TNs >= r.faultNs &&
			(first == nil || rec.TNs < first.TNs) {
			first = &r.records[i]
		}
	}
	Expect(first).NotTo(BeNil(), "%s has a successful %s call after the fault", impu, dir)
	return *first
}

// firstCallAfter is the first successful call of a user in a direction that was placed at or after t: its
// first INVITE (the caller's, to the BAC) was sent then. A terminating record's own start is when the INVITE
// reached the callee, which may be well after the call was placed.
func (r *shippedRun) firstCallAfter(impu, dir string, t int64) ue.Record {
	GinkgoHelper()
	var first *ue.Record
	var firstNs int64
	for i, rec := range r.records {
		if rec.Type != "call" || rec.Direction != dir || rec.IMPU != impu || rec.Result != "ok" {
			continue
		}
		hs := r.hops(rec.CallID, "", "")
		if len(hs) == 0 || hs[0].TNs < t {
			continue
		}
		if first == nil || hs[0].TNs < firstNs {
			first, firstNs = &r.records[i], hs[0].TNs
		}
	}
	Expect(first).NotTo(BeNil(), "%s has a successful %s call placed after %d", impu, dir, t)
	return *first
}

// hops returns the INVITEs of a call from one node (or kind prefix, "pcscf") to another, in time order; "" matches
// any node.
func (r *shippedRun) hops(callID, from, to string) []sipHop {
	var out []sipHop
	for _, h := range r.invites {
		if h.CallID == callID && strings.HasPrefix(h.From, from) && strings.HasPrefix(h.To, to) {
			out = append(out, h)
		}
	}
	return out
}

// sent returns the first INVITE of a call sent from one node to another that satisfies ok.
func (r *shippedRun) sent(callID, from, to string, ok func(sipHop) bool) (sipHop, bool) {
	for _, h := range r.hops(callID, from, to) {
		if ok == nil || ok(h) {
			return h, true
		}
	}
	return sipHop{}, false
}

// describe lists a call's INVITE hops for failure messages.
func (r *shippedRun) describe(callID string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INVITEs of %s (run dir %s):\n", callID, r.dir)
	for _, h := range r.hops(callID, "", "") {
		fmt.Fprintf(&b, "  %d %s→%s received %t route %v\n", h.TNs, h.From, h.To, h.Received, h.Routes)
	}
	return b.String()
}

// cxFor returns the HSS's answers of a command about a user whose request came in [from, to], in time order.
func (r *shippedRun) cxFor(cmd, impu string, from, to int64) []cxAnswer {
	var out []cxAnswer
	for _, a := range r.cx {
		if a.Cmd == cmd && a.IMPU == impu && a.requestNs() >= from && a.requestNs() <= to {
			out = append(out, a)
		}
	}
	return out
}

func (r *shippedRun) host(node string) string { return node + "." + r.domain }

func isOrigRestore(u sip.Uri) bool {
	v, _ := u.UriParams.Get("restore")
	return u.UriParams.Has("orig") && v == "1"
}

func uatIs(a cxAnswer, uat int) bool { return a.UAT != nil && *a.UAT == uat }
func satIs(a cxAnswer, sat int) bool { return a.SAT != nil && *a.SAT == sat }
func cxOK(a cxAnswer) bool           { return a.Result == 2001 && !a.Experimental }

func nodeOfServer(serverName string) string {
	h := strings.TrimPrefix(serverName, "sip:")
	name, _, _ := strings.Cut(h, ".")
	return name
}

// procEvent is a lab event about a node's process: node_exit (the lab's wait for it returned: its exit status) or
// node_ready (the lab started it and saw it ready). They come from the process supervisor, not from the fault
// injector.
type procEvent struct {
	TNs    int64  `json:"t_ns"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	PID    int    `json:"pid"`
	Signal string `json:"signal"`
}

// procEvents returns the node_exit and node_ready events of a node at or after t, in time order.
func (r *shippedRun) procEvents(node string, t int64) []procEvent {
	GinkgoHelper()
	var out []procEvent
	for _, e := range readJSONL[procEvent](filepath.Join(r.dir, "events", "lab.jsonl")) {
		if e.Target == node && (e.Kind == "node_exit" || e.Kind == "node_ready") && e.TNs >= t {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b procEvent) int { return cmp.Compare(a.TNs, b.TNs) })
	return out
}

// outage is a node's first death at or after t and its next start, as the lab saw them (ready is zero when it was
// not started again), and killed, when the lab sent the signal that ended it. The exit is recorded when the lab's
// wait for the process returns, which on a starved machine can be seconds after the death (2.3 s seen at a load
// average of 20): time windows that start at the death start at killed.
func (r *shippedRun) outage(node string, t int64) (exit, ready procEvent, killed int64) {
	GinkgoHelper()
	evs := r.procEvents(node, t)
	i := slices.IndexFunc(evs, func(e procEvent) bool { return e.Kind == "node_exit" })
	Expect(i).To(BeNumerically(">=", 0), "the lab saw %s's process exit after the fault: %v", node, evs)
	exit = evs[i]
	if j := slices.IndexFunc(evs[i:], func(e procEvent) bool { return e.Kind == "node_ready" }); j >= 0 {
		ready = evs[i+j]
	}
	for _, e := range readJSONL[procEvent](filepath.Join(r.dir, "events", "lab.jsonl")) {
		if e.Kind == "fault" && e.Target == node && e.PID == exit.PID && e.TNs <= exit.TNs {
			killed = e.TNs
		}
	}
	Expect(killed).NotTo(BeZero(), "the lab signalled %s (pid %d)", node, exit.PID)
	return exit, ready, killed
}

// ownEvents returns a node's own events of a kind with t_ns in [from, to], in time order.
func (r *shippedRun) ownEvents(node, kind string, from, to int64) []nodeEvent {
	var out []nodeEvent
	for _, e := range r.events[node] {
		if e.Kind == kind && e.TNs >= from && e.TNs <= to {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b nodeEvent) int { return cmp.Compare(a.TNs, b.TNs) })
	return out
}

// healNs is when the lab healed fault i (its heal instant in the summary).
func (r *shippedRun) healNs(i int) int64 {
	GinkgoHelper()
	Expect(r.sum.Faults).To(HaveLen(len(r.sc.Faults)))
	Expect(r.sum.Faults[i].HealS).NotTo(BeNil(), "fault %d was healed", i)
	return r.sum.StartNs + int64(*r.sum.Faults[i].HealS*1e9)
}

// endNs is the end of the run's traffic (t0 + duration); the phones deregister and the lab stops after it.
func (r *shippedRun) endNs() int64 { return r.sum.StartNs + int64(r.sc.Duration) }

// registrations counts the phones' registrations (initial or refresh, not the deregistrations at the end of the
// run) started in [from, to].
func (r *shippedRun) registrations(from, to int64) int {
	n := 0
	for _, rec := range r.records {
		if rec.Type == "register" && rec.Kind != "deregister" && rec.TNs >= from && rec.TNs <= to {
			n++
		}
	}
	return n
}

// calls counts the call records (both directions) started in [from, to], and how many of them were answered.
func (r *shippedRun) calls(from, to int64) (all, ok int) {
	for _, rec := range r.records {
		if rec.Type == "call" && rec.TNs >= from && rec.TNs <= to {
			all++
			if rec.Result == "ok" {
				ok++
			}
		}
	}
	return all, ok
}

func nodeOfHost(host string) string {
	name, _, _ := strings.Cut(host, ".")
	return name
}

func seconds(ns int64) string { return fmt.Sprintf("%.2f s", float64(ns)/1e9) }

var _ = Describe("the shipped scenarios, shortened for CI", Label("e2e"), Ordered, ContinueOnFailure, func() {
	var binDir string
	BeforeAll(func(ctx SpecContext) { binDir = buildNodes(ctx) }, NodeTimeout(5*time.Minute))

	// runFor runs scenarios/<name>.yaml, shortened to d, once, for the specs of the enclosing container. Its run
	// directory is removed afterwards unless a spec failed; then it is kept and named in the report, with what the
	// run says about the machine (nodes starved of CPU), so that a starved run reads as starved, not as a
	// takeover regression.
	runFor := func(name string, d time.Duration) func() *shippedRun {
		var (
			r      *shippedRun
			dir    string
			failed bool
		)
		BeforeAll(func(ctx SpecContext) {
			var err error
			dir, err = os.MkdirTemp("", "shipped-"+name+"-")
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() {
				if !failed {
					Expect(os.RemoveAll(dir)).To(Succeed())
				}
			})
			r = runShipped(ctx, name, binDir, dir, d)
		}, NodeTimeout(6*time.Minute))
		AfterEach(func() {
			if CurrentSpecReport().Failed() {
				failed = true
				AddReportEntry("run directory (kept)", r.dir)
				if st := starved(r.sum); st != "" {
					AddReportEntry("STARVED: the machine was too busy for this run's timing", st)
				}
			}
		})
		return func() *shippedRun { return r }
	}
	// run is runFor the CI duration (24 s).
	run := func(name string) func() *shippedRun { return runFor(name, ciDuration) }

	// passesWithTakeover checks a fault scenario's outcome and the takeover KPIs; watcher is the node that must
	// notice the fault ("" for a fault too short to be noticed).
	passesWithTakeover := func(r func() *shippedRun, watcher string) {
		It("passes its expectations, and the pool took over the affected users' calls", func() {
			s := r()
			Expect(scenario.ExitCode(s.outcome, nil)).To(Equal(scenario.ExitPassed), "%s", s.output)
			Expect(s.metric("affected_users")).To(BeNumerically(">", 0))
			for _, d := range []string{"mo", "mt"} {
				Expect(s.metric(d+".taken_over_before_reregistration")).To(BeNumerically(">=", 0.99), d)
				Expect(s.metric(d+".success_ratio_after_detection")).To(BeNumerically(">=", 0.95), d)
			}
			if watcher != "" {
				bound := detectionBound(s.sc, watcher)
				Expect(s.metric("time_to_detect_s."+watcher)).To(BeNumerically("<=", bound.Seconds()),
					"%s noticed %s later than its configuration allows (%s)%s", watcher, s.dead, bound, starvedNote(s.sum))
			}
		})
	}

	Context("baseline", Label("full"), func() {
		r := run("baseline")
		It("passes its expectations, with no failed call and no failed registration", func() {
			s := r()
			Expect(scenario.ExitCode(s.outcome, nil)).To(Equal(scenario.ExitPassed), "%s", s.output)
			Expect(s.metric("calls.total")).To(BeNumerically(">", 0))
			Expect(s.metric("calls.failed")).To(BeZero(), "failed calls by cause: %v", s.sum.Calls.ByCause)
			Expect(s.metric("registrations.failed")).To(BeZero(), "failed registrations by cause: %v", s.sum.Registrations.ByCause)
		})
	})

	Context("pcscf-kill", func() {
		r := run("pcscf-kill")
		passesWithTakeover(r, "bac")

		It("times restoration at the answer: an independent recomputation from records.jsonl agrees with users.csv, "+
			"restored_at_bound, every restored_at point and band, the median and the run's own bound", func() {
			recomputeRestoration(r())
		})

		It("P-CSCF failure, originating call (SPEC §4.1): the BAC picks a backup P-CSCF, which sends orig;restore=1 "+
			"to the I-CSCF; LIR UAT 2; on to an S-CSCF", func() {
			s := r()
			Expect(s.sum.AffectedIMPUs).NotTo(BeEmpty())
			for _, u := range s.sum.AffectedIMPUs {
				c := s.firstCall(u, "mo")
				desc := s.describe(c.CallID)
				toP, ok := s.sent(c.CallID, "bac", "pcscf", func(h sipHop) bool { return h.To != s.dead })
				Expect(ok).To(BeTrue(), "%s: the BAC sent the INVITE to a P-CSCF other than %s\n%s", u, s.dead, desc)
				toI, ok := s.sent(c.CallID, toP.To, "icscf", func(h sipHop) bool {
					return h.TNs >= toP.TNs && len(h.Routes) > 0 && h.Routes[0].Host == s.host("icscf") && isOrigRestore(h.Routes[0])
				})
				Expect(ok).To(BeTrue(), "%s: %s sent the INVITE to the I-CSCF with Route <sip:%s;lr;orig;restore=1>\n%s",
					u, toP.To, s.host("icscf"), desc)
				toS, ok := s.sent(c.CallID, "icscf", "scscf", func(h sipHop) bool {
					return h.TNs >= toI.TNs && len(h.Routes) > 0 && h.Routes[0].UriParams.Has("orig")
				})
				Expect(ok).To(BeTrue(), "%s: the I-CSCF sent the INVITE on to an S-CSCF\n%s", u, desc)
				Expect(toS.Received).To(BeTrue(), "%s: the INVITE reached %s\n%s", u, toS.To, desc)
				Expect(s.cxFor("LIR", u, toI.TNs-skew, toS.TNs+skew)).To(ContainElement(Satisfy(func(a cxAnswer) bool {
					return uatIs(a, 2) && cxOK(a)
				})), "%s: the HSS answered an LIR with UAT 2 with Result-Code 2001 between the P-CSCF's INVITE and the "+
					"I-CSCF's; cx answers about the user: %v\n%s", u, s.cxFor("LIR", u, s.faultNs, c.TNs+int64(time.Minute)), desc)
			}
		})

		It("P-CSCF failure, terminating call (SPEC §4.2): the S-CSCF walks the Path's per-host record to a backup "+
			"P-CSCF, which passes the INVITE on to the BAC", func() {
			s := r()
			Expect(s.sum.AffectedIMPUs).NotTo(BeEmpty())
			for _, u := range s.sum.AffectedIMPUs {
				c := s.firstCall(u, "mt")
				desc := s.describe(c.CallID)
				toB, ok := s.sent(c.CallID, "scscf", "pcscf", func(h sipHop) bool {
					return h.To != s.dead && len(h.Routes) > 0 && h.Routes[0].User == "term" && h.Routes[0].Host == s.host(s.dead)
				})
				Expect(ok).To(BeTrue(), "%s: an S-CSCF sent the INVITE to a P-CSCF other than %s with Route <sip:term@%s;lr>\n%s",
					u, s.dead, s.host(s.dead), desc)
				_, ok = s.sent(c.CallID, toB.To, "bac", func(h sipHop) bool { return h.TNs >= toB.TNs })
				Expect(ok).To(BeTrue(), "%s: %s passed the INVITE on to the BAC\n%s", u, toB.To, desc)
			}
		})

		It("counts the calls up at the kill that it cut, from the phones' own records, the post-dial delay after it "+
			"and a probe share within 10 %", func() {
			s := r()
			c := s.sum.CallsCut
			Expect(c).NotTo(BeNil())
			Expect(c.SessionTimers).To(BeTrue(), "the scenario turns session timers on")
			Expect(c.InProgress).To(BeNumerically(">", 0), "model calls were up at the kill")
			Expect(c.Cut + c.Survived + c.Unknown).To(Equal(c.InProgress))
			// Recomputed from records.jsonl: a call up at the kill is cut when a leg says ended "cut" after the
			// kill, or a leg's BYE after the kill failed.
			up, cut := map[string]bool{}, map[string]bool{}
			for _, x := range s.records {
				if x.Type != "call" || x.Probe != "" || x.Result != "ok" || x.Setup200 == nil {
					continue
				}
				answered := x.TNs + int64(*x.Setup200*1e6)
				end := answered + int64(x.DurationMs*1e6)
				if answered >= s.faultNs || end <= s.faultNs {
					continue
				}
				up[x.CallID] = true
				if x.Ended == ue.EndedCut && x.CutNs >= s.faultNs ||
					x.Ended != "remote" && x.ByeResult != "" && x.ByeResult != "ok" && x.ByeResult != "aborted" {
					cut[x.CallID] = true
				}
			}
			Expect(c.InProgress).To(Equal(len(up)))
			Expect(c.Cut).To(Equal(len(cut)))
			p := s.sum.PostDialDelay
			Expect(p).NotTo(BeNil())
			Expect(p.Calls).To(BeNumerically(">", 0), "the affected users called and were called after the kill")
			Expect(p.Answer.Count).To(Equal(p.Answered))
			Expect(s.sum.ProbeLoad).NotTo(BeNil())
			Expect(s.sum.ProbeLoad.Share).To(BeNumerically("<=", 0.1))
			Expect(s.sum.ProbeLoad.ProbedUsers).To(BeNumerically("<=", 6), "reachability.sample: 6")
		})
	})

	// Fast failure detection (issue 32, docs/architecture.md): the same kills with failover.provisional_timeout
	// 200 ms and 200 ms probes. fastDetection checks that an INVITE to the killed member was failed over for want
	// of a 100 Trying, and that the watcher noticed within a second.
	fastDetection := func(r func() *shippedRun, watcher string) {
		It("fails INVITEs over on a missing 100 Trying, and the "+watcher+" noticed within a second", func() {
			s := r()
			nc, err := s.sc.Topology.NodeConfig(watcher)
			Expect(err).NotTo(HaveOccurred())
			Expect(nc.Failover.ProvisionalTimeout).To(Equal(200*time.Millisecond), "the run used fast detection")
			missed := map[string]int{}
			for node, evs := range s.events {
				for _, e := range evs {
					if e.Kind == "sip_tx" && e.Failure == "no_provisional" && strings.HasPrefix(e.Peer, s.dead+".") &&
						e.TNs >= s.faultNs {
						missed[node]++
					}
				}
			}
			Expect(missed).NotTo(BeEmpty(), "some node gave up on an INVITE to %s for want of a provisional answer", s.dead)
			Expect(s.metric("time_to_detect_s."+watcher)).To(BeNumerically("<=", 1.0), "%s%s", watcher, starvedNote(s.sum))
		})
	}

	Context("pcscf-kill-fast", Label("full"), func() {
		r := run("pcscf-kill-fast")
		passesWithTakeover(r, "bac")
		fastDetection(r, "bac")
	})

	Context("scscf-kill-fast", Label("full"), func() {
		r := run("scscf-kill-fast")
		passesWithTakeover(r, "icscf")
		fastDetection(r, "icscf")
	})

	Context("pcscf-pause", Label("full"), func() {
		r := run("pcscf-pause")
		passesWithTakeover(r, "bac")
	})

	Context("scscf-kill", func() {
		r := run("scscf-kill")
		passesWithTakeover(r, "icscf")

		It("S-CSCF failure, originating call (SPEC §4.5): orig;restore=1 to the I-CSCF, LIR UAT 2, SAR "+
			"UNREGISTERED_USER from a surviving S-CSCF, which the HSS now names", func() {
			s := r()
			Expect(s.sum.AffectedIMPUs).NotTo(BeEmpty())
			byOwnCall := 0
			for _, u := range s.sum.AffectedIMPUs {
				c := s.firstCall(u, "mo")
				desc := s.describe(c.CallID)
				toI, ok := s.sent(c.CallID, "pcscf", "icscf", func(h sipHop) bool {
					return len(h.Routes) > 0 && h.Routes[0].Host == s.host("icscf") && isOrigRestore(h.Routes[0])
				})
				Expect(ok).To(BeTrue(), "%s: the P-CSCF sent the INVITE to the I-CSCF with Route <sip:%s;lr;orig;restore=1>\n%s",
					u, s.host("icscf"), desc)
				toS, ok := s.sent(c.CallID, "icscf", "scscf", func(h sipHop) bool {
					return h.TNs >= toI.TNs && h.To != s.dead && len(h.Routes) > 0 && isOrigRestore(h.Routes[0])
				})
				Expect(ok).To(BeTrue(), "%s: the I-CSCF sent the INVITE to a surviving S-CSCF with orig;restore=1\n%s", u, desc)
				Expect(s.cxFor("LIR", u, toI.TNs-skew, toS.TNs+skew)).To(ContainElement(Satisfy(func(a cxAnswer) bool {
					return uatIs(a, 2) && cxOK(a)
				})), "%s: LIR with UAT 2 answered 2001 in between\n%s", u, desc)
				served, ok := s.sent(c.CallID, toS.To, "", func(h sipHop) bool { return h.TNs >= toS.TNs })
				Expect(ok).To(BeTrue(), "%s: %s served the call\n%s", u, toS.To, desc)
				sars := s.cxFor("SAR", u, s.faultNs, served.TNs+skew)
				Expect(sars).NotTo(BeEmpty(), "%s: a SAR after the fault, before %s served the call\n%s", u, toS.To, desc)
				last := sars[len(sars)-1]
				Expect(satIs(last, 3) && cxOK(last) && nodeOfServer(last.ServerName) == toS.To).To(BeTrue(),
					"%s: the HSS's last assignment before the call was served is %s's SAR UNREGISTERED_USER (3), "+
						"answered 2001; it is %s\n%s", u, toS.To, last, desc)
				if last.requestNs() >= toI.TNs {
					byOwnCall++
				}
			}
			// Whether some user's own call did the takeover (SAR after its INVITE reached the I-CSCF) or a call it
			// received first did, is up to the run's timing: when the I-CSCF detects the kill before the P-CSCFs,
			// every affected user is usually called before its own call gets through (seen in 2 of 3 runs). The
			// MO-triggered takeover is checked deterministically in test/e2e (takeover_test.go, "a survivor S-CSCF
			// takes over"); here each MO call's path is checked above whichever came first.
			GinkgoWriter.Printf("scscf-kill: %d of %d affected users taken over by their own call\n", byOwnCall,
				len(s.sum.AffectedIMPUs))
		})

		// Which calls reselect is not up to the test (a user taken over by a call it placed first is found at its
		// new S-CSCF at once), and the HSS's Cx events carry no Call-ID: the calls checked are the first successful
		// terminating call of each affected user for which the I-CSCF recorded a reselection, and the Cx answers
		// are matched by user and by time within the call's terminating leg.
		It("S-CSCF failure, terminating call (SPEC §4.6): LIR naming the dead S-CSCF, then LIR UAT 2 (I-CSCF "+
			"reselect), then SAR UNREGISTERED_USER from a surviving S-CSCF", func() {
			s := r()
			Expect(s.sum.AffectedIMPUs).NotTo(BeEmpty())
			ok := func(u, callID string) bool {
				return slices.ContainsFunc(s.records, func(rec ue.Record) bool {
					return rec.Type == "call" && rec.Direction == "mt" && rec.IMPU == u && rec.CallID == callID && rec.Result == "ok"
				})
			}
			checked, byThisCall := 0, 0
			for _, u := range s.sum.AffectedIMPUs {
				var sel *nodeEvent
				for i, e := range s.events["icscf"] {
					if e.Kind == "reselect" && e.Cmd == "LIR" && e.IMPU == u && e.TNs >= s.faultNs && ok(u, e.CallID) {
						sel = &s.events["icscf"][i]
						break
					}
				}
				if sel == nil {
					continue // taken over by a call it placed before any call to it needed a new S-CSCF
				}
				checked++
				c := sel.CallID
				desc := s.describe(c)
				Expect(sel.UAT).To(HaveValue(Equal(2)), "%s: reselect by LIR UAT 2", u)
				Expect(sel.Tried).To(ContainElement(s.host(s.dead)), "%s: the I-CSCF reselected because %s failed", u, s.dead)
				toS, found := s.sent(c, "icscf", "scscf", func(h sipHop) bool {
					return h.To != s.dead && h.TNs >= sel.TNs && (len(h.Routes) == 0 || !h.Routes[0].UriParams.Has("orig"))
				})
				Expect(found).To(BeTrue(), "%s: after the reselection the I-CSCF sent the INVITE to a surviving S-CSCF\n%s", u, desc)
				var began int64 // the terminating leg: the caller's S-CSCF hands the INVITE to the I-CSCF
				for _, h := range s.hops(c, "scscf", "icscf") {
					if h.TNs <= sel.TNs {
						began = h.TNs
					}
				}
				Expect(began).NotTo(BeZero(), "%s: the caller's S-CSCF sent the INVITE to the I-CSCF\n%s", u, desc)
				lirs := s.cxFor("LIR", u, began-skew, sel.TNs+skew)
				first := slices.IndexFunc(lirs, func(a cxAnswer) bool {
					return (a.UAT == nil || *a.UAT == 0) && cxOK(a) && nodeOfServer(a.ServerName) == s.dead
				})
				Expect(first).To(BeNumerically(">=", 0), "%s: an LIR without UAT naming %s, answered 2001: %v\n%s",
					u, s.dead, lirs, desc)
				Expect(lirs[first+1:]).To(ContainElement(Satisfy(func(a cxAnswer) bool { return uatIs(a, 2) && cxOK(a) })),
					"%s: then an LIR with UAT 2 answered 2001: %v\n%s", u, lirs, desc)
				served, found := s.sent(c, toS.To, "pcscf", func(h sipHop) bool { return h.TNs >= toS.TNs })
				Expect(found).To(BeTrue(), "%s: %s sent the INVITE on to a P-CSCF\n%s", u, toS.To, desc)
				sars := s.cxFor("SAR", u, s.faultNs, served.TNs+skew)
				Expect(sars).NotTo(BeEmpty(), "%s: a SAR after the fault, before %s served the call\n%s", u, toS.To, desc)
				last := sars[len(sars)-1]
				Expect(satIs(last, 3) && cxOK(last) && nodeOfServer(last.ServerName) == toS.To).To(BeTrue(),
					"%s: the HSS's last assignment before the call was served is %s's SAR UNREGISTERED_USER (3), "+
						"answered 2001; it is %s\n%s", u, toS.To, last, desc)
				if last.requestNs() >= sel.TNs {
					byThisCall++
				}
			}
			Expect(checked).To(BeNumerically(">", 0), "some affected user's call was reselected by the I-CSCF")
			Expect(byThisCall).To(BeNumerically(">", 0), "some affected user was taken over by the S-CSCF the "+
				"reselection chose (SAR within the call)")
		})
	})

	Context("scscf-restart", Label("full"), func() {
		r := run("scscf-restart")
		// scscf1 is back within about a second, before two probes fail: no node reports it down
		// (time_to_detect_s is empty), and the takeover paths are what is checked.
		passesWithTakeover(r, "")
	})

	// Issue 11: the faults that act on processes.
	Context("failback-pcscf", Label("full"), func() {
		r := run("failback-pcscf")
		passesWithTakeover(r, "bac")
		It("restarts pcscf1 empty, and it serves its old users again by restoring them (LIR UAT 2)", func() {
			s := r()
			Expect(s.sum.Faults[0].HealS).NotTo(BeNil(), "the heal was recorded")
			heal := s.sum.StartNs + int64(*s.sum.Faults[0].HealS*1e9)
			restored := 0
			for _, e := range s.events["pcscf1"] {
				if e.Kind == "restore" && e.TNs > heal {
					restored++
				}
			}
			Expect(restored).To(BeNumerically(">", 0), "pcscf1, back and empty, restored users on their calls")
			Expect(s.metric("faults.0.after_heal.registrations")).To(BeZero(), "nobody registered again")
		})
	})

	// failback-scscf-stale shortened: scscf1 frozen from 8 s to 14 s of 24 and continued with its registrations.
	Context("failback-scscf-stale", Label("full"), func() {
		r := run("failback-scscf-stale")
		passesWithTakeover(r, "icscf")
		It("scscf1 was frozen, not restarted, and its users stayed with the S-CSCF that took them over: the HSS "+
			"names that one, never scscf1, after the failback", func() {
			s := r()
			for _, e := range s.procEvents("scscf1", 0) {
				Expect(e.Kind == "node_exit" && e.TNs < s.endNs()).To(BeFalse(), "scscf1 did not exit: %+v", e)
			}
			Expect(s.ownEvents("scscf1", "node_ready", 0, math.MaxInt64)).To(HaveLen(1), "scscf1 started once")
			f := s.sc.Faults[0]
			heal := s.sum.StartNs + int64(f.At+f.For) // the pause's end (SIGCONT)
			takeovers := 0
			for _, n := range []string{"scscf2", "scscf3"} {
				takeovers += len(s.ownEvents(n, "takeover", s.faultNs, heal))
			}
			Expect(takeovers).To(BeNumerically(">", 0), "scscf2/scscf3 took scscf1's users over during the freeze")
			Expect(s.sum.AffectedIMPUs).NotTo(BeEmpty())
			for _, u := range s.sum.AffectedIMPUs {
				var names []string
				for _, a := range s.cxFor("LIR", u, heal, s.endNs()) {
					if cxOK(a) && a.ServerName != "" {
						names = append(names, nodeOfServer(a.ServerName))
					}
				}
				Expect(names).NotTo(BeEmpty(), "%s: LIRs answered after the failback", u)
				Expect(names).NotTo(ContainElement("scscf1"), "%s: the HSS still names the S-CSCF that took it over", u)
			}
		})
	})

	Context("gray-pcscf", Label("full"), func() {
		BeforeAll(func() {
			if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); os.Geteuid() != 0 || err != nil {
				if os.Getenv("IMSLAB_REQUIRE_CGROUP") == "1" {
					Fail("gray-pcscf needs root and the cgroup v1 cpu controller (IMSLAB_REQUIRE_CGROUP=1)")
				}
				Skip("gray-pcscf needs root and the cgroup v1 cpu controller")
			}
		})
		r := run("gray-pcscf")
		It("passes its expectations: pcscf1 starved but alive, its users served late, and the cgroup is gone", func() {
			s := r()
			Expect(scenario.ExitCode(s.outcome, nil)).To(Equal(scenario.ExitPassed), "%s", s.output)
			var quota []int
			for _, e := range readJSONL[map[string]any](filepath.Join(s.dir, "events", "lab.jsonl")) {
				if e["kind"] == "cpu_limit" {
					quota = append(quota, int(e["cpu_cfs_quota_us"].(float64)), int(e["cpu_cfs_period_us"].(float64)))
					Expect(e["cgroup"]).NotTo(BeADirectory(), "healed: the cgroup is removed")
				}
			}
			Expect(quota).To(Equal([]int{2000, 100000}), "2 %% of the CFS period, read back from the cgroup")
		})
	})

	// The four below (issue 11) are checked by what the processes, the nodes and the phones recorded, not by the
	// injector's fault events. Shortened to 24 s, hss-outage's HSS is down from 6 s to 14 s with pcscf1 killed at
	// 8 s (2 s into the outage, as 5 s of 20 in the shipped run): the takeover still has to wait for the HSS.
	// The heal used to leave a gap the shortening made weigh more: the nodes' Cx clients redialled only every
	// ReconnectMax (2 s) while the HSS was down and failed requests at once meanwhile (FailFastAfter), so calls in
	// the first 1-2 s after the HSS was back still got 504 (after_heal.answered 553 of 617, 0.896, on a quiet
	// 2-core machine). A request that finds the HSS gone now asks for a connection attempt on demand
	// (internal/proto/cx, spec "serves the first request after the HSS's return").
	Context("hss-outage", Label("full"), func() {
		r := run("hss-outage")
		It("passes its expectations as shipped", func() {
			s := r()
			Expect(scenario.ExitCode(s.outcome, nil)).To(Equal(scenario.ExitPassed), "%s", s.output)
		})

		It("the HSS process died and came back on its data: no Cx answer while it was gone, answers again after, "+
			"nobody registered again, and pcscf1's users were taken over by LIR UAT 2 answered after its return", func() {
			s := r()
			exit, ready, killed := s.outage("hss", s.faultNs)
			Expect(exit.Signal).To(Equal("SIGKILL"), "the HSS was killed: %+v", exit)
			Expect(ready.TNs).NotTo(BeZero(), "the lab started the HSS again")
			Expect(ready.PID).NotTo(Equal(exit.PID), "a new HSS process")
			want := s.sc.Faults[0].For
			Expect(time.Duration(ready.TNs-killed)).To(BeNumerically(">=", want-500*time.Millisecond),
				"the HSS was gone for the fault's %s", want)
			// The HSS's own account: it started again (its second node_ready) and answered nothing in between.
			own := s.ownEvents("hss", "node_ready", exit.TNs, ready.TNs+int64(time.Second))
			Expect(own).NotTo(BeEmpty(), "the HSS wrote node_ready again after its restart")
			back := own[0].TNs
			for _, a := range s.cx {
				Expect(a.TNs > exit.TNs && a.TNs < back).To(BeFalse(), "a Cx answer while the HSS was gone: %s", a)
			}
			var after []cxAnswer
			for _, a := range s.cx {
				if a.requestNs() >= back && a.requestNs() <= s.endNs() && cxOK(a) {
					after = append(after, a)
				}
			}
			Expect(after).NotTo(BeEmpty(), "Cx answers resumed after the HSS was back")
			Expect(slices.ContainsFunc(after, func(a cxAnswer) bool { return a.Cmd == "UAR" })).To(BeFalse(),
				"nobody had to register again (no UAR after the HSS's return)")
			Expect(s.registrations(killed, s.endNs())).To(BeZero(), "no phone registered during or after the outage")
			// The assignments survived: LIRs without UAT after the return name an S-CSCF.
			Expect(after).To(ContainElement(Satisfy(func(a cxAnswer) bool {
				return a.Cmd == "LIR" && (a.UAT == nil || *a.UAT == 0) && strings.HasPrefix(nodeOfServer(a.ServerName), "scscf")
			})), "LIRs after the return name the users' S-CSCFs")

			// pcscf1 died during the outage; its users were taken over with the restoration data the HSS kept.
			_, _, pKilled := s.outage("pcscf1", s.faultNs)
			Expect(pKilled).To(BeNumerically(">", killed), "pcscf1 was killed after the HSS")
			Expect(pKilled).To(BeNumerically("<", back), "pcscf1 was killed while the HSS was down")
			Expect(s.sum.AffectedIMPUs).NotTo(BeEmpty())
			for _, u := range s.sum.AffectedIMPUs {
				Expect(s.cxFor("LIR", u, back, s.endNs())).To(ContainElement(Satisfy(func(a cxAnswer) bool {
					return uatIs(a, 2) && cxOK(a)
				})), "%s: LIR with UAT 2 answered 2001 after the HSS's return (%s after the start)", u,
					seconds(back-s.sum.StartNs))
			}
			GinkgoWriter.Printf("hss-outage: HSS killed at %s, back at %s (own node_ready), pcscf1 killed at %s; "+
				"%d Cx answers after the return\n", seconds(killed-s.sum.StartNs), seconds(back-s.sum.StartNs),
				seconds(pKilled-s.sum.StartNs), len(after))
		})
	})

	// site-loss on topologies/two-sites.yaml (pools of 4 over two sites, 40 phones): south is killed at 8 s of 24.
	// Its p95 interruption bound is 3.5 s, not pcscf-kill's 3 s: a user often loses its P-CSCF and its S-CSCF at
	// once and waits for the later of two detections, which puts the p95 at the worst case of the probing budget
	// (2.5 s to detect + 0.5 s to the next probe call + setup; 3.01-3.03 s measured). The scenario file says so.
	Context("site-loss", Label("full"), func() {
		r := run("site-loss")
		passesWithTakeover(r, "icscf")

		It("every south node died and a north node reported each down; north served every affected user", func() {
			s := r()
			site, ok := strings.CutPrefix(s.dead, topology.SiteTargetPrefix)
			Expect(ok).To(BeTrue(), "the fault names a site: %q", s.dead)
			south := s.sc.Topology.SiteNodes(site)
			Expect(south).To(ConsistOf("pcscf3", "pcscf4", "scscf3", "scscf4"))
			north := s.sc.Topology.SiteNodes("north")
			var allDead int64 // when the lab saw the last south process exit
			for _, n := range south {
				exit, ready, killed := s.outage(n, s.faultNs)
				allDead = max(allDead, exit.TNs)
				Expect(exit.Signal).To(Equal("SIGKILL"), "%s was killed: %+v", n, exit)
				Expect(ready.TNs).To(BeZero(), "%s stayed down", n)
				// A north node that probes n reported it down after the kill and not up again before the end of
				// the traffic (on a starved machine it may have marked n down, on a late probe, already before).
				var by []string
				for _, m := range north {
					var last *nodeEvent
					for _, e := range s.ownEvents(m, "peer_state", 0, s.endNs()) {
						if nodeOfHost(e.Peer) == n {
							last = &e
						}
					}
					if last != nil && last.State == "down" {
						by = append(by, fmt.Sprintf("%s %+.2f s", m, float64(last.TNs-killed)/1e9))
					}
				}
				Expect(by).NotTo(BeEmpty(), "a north node holds %s down at the end (its last peer_state)", n)
				GinkgoWriter.Printf("site-loss: %s killed at %s, down at (relative to the kill) %v\n", n,
					seconds(killed-s.sum.StartNs), by)
			}
			Expect(s.sum.AffectedIMPUs).NotTo(BeEmpty())
			// The first calls placed once the whole site is gone. A call placed before (or among the four kills)
			// may have reached a south node that was still alive: in one CI run an INVITE reached scscf3 and pcscf4
			// 13 ms before the fault, and the call was then restored through north (its terminating record starts
			// 2 s later, when the callee got it).
			for _, u := range s.sum.AffectedIMPUs {
				for _, d := range []string{"mo", "mt"} {
					c := s.firstCallAfter(u, d, allDead)
					var served []string
					for _, h := range s.hops(c.CallID, "", "") {
						if h.Received && h.To != "ue" {
							served = append(served, h.To)
						}
					}
					Expect(served).To(ContainElement(HavePrefix("pcscf")), "%s %s: a P-CSCF served it\n%s", u, d, s.describe(c.CallID))
					Expect(served).To(ContainElement(HavePrefix("scscf")), "%s %s: an S-CSCF served it\n%s", u, d, s.describe(c.CallID))
					Expect(served).To(HaveEach(BeElementOf(north)), "%s %s: only north nodes served it\n%s", u, d, s.describe(c.CallID))
				}
			}
		})
	})

	// flapping-scscf is not shortened to 24 s: its 5 s period (down 5 s, up 5 s) is what the scenario is about and
	// must stay well above detection (two 1 s probes), and 24 s would leave one and a half cycles (killed at 6 and
	// 16 s, back at 11 and 18 s). At 30 s the flap runs from 7.5 s to 22.5 s: killed at 7.5 and 17.5 s, started at
	// 12.5 and 22.5 s (two full cycles; the shipped run has three), then 7.5 s of calm.
	Context("flapping-scscf", Label("full"), func() {
		r := runFor("flapping-scscf", 30*time.Second)
		passesWithTakeover(r, "icscf")

		It("scscf1 went down and came back more than once by its own account, and users were restored in more "+
			"than one of its outages", func() {
			s := r()
			heal := s.healNs(0)
			var cycles [][2]int64 // scscf1's outages: the kill, its own next node_ready
			t := s.faultNs
			for {
				evs := s.procEvents("scscf1", t)
				i := slices.IndexFunc(evs, func(e procEvent) bool { return e.Kind == "node_exit" && e.TNs <= heal })
				if i < 0 {
					break // the next exit, if any, is the lab's stop at the end of the run
				}
				exit, _, killed := s.outage("scscf1", evs[i].TNs)
				Expect(exit.Signal).To(Equal("SIGKILL"), "%+v", exit)
				own := s.ownEvents("scscf1", "node_ready", exit.TNs, math.MaxInt64)
				Expect(own).NotTo(BeEmpty(), "scscf1 wrote node_ready again after the kill at %s", seconds(killed-s.sum.StartNs))
				cycles = append(cycles, [2]int64{killed, own[0].TNs})
				t = own[0].TNs
			}
			Expect(len(cycles)).To(BeNumerically(">=", 2), "scscf1 was killed and came back more than once")
			Expect(cycles[len(cycles)-1][1]).To(BeNumerically("<=", heal+int64(2*time.Second)),
				"back for good after the flapping")
			restoredIn := 0
			for _, c := range cycles {
				takeovers, restores := 0, 0
				for _, n := range []string{"scscf2", "scscf3"} {
					takeovers += len(s.ownEvents(n, "takeover", c[0], c[1]))
				}
				for _, n := range []string{"pcscf1", "pcscf2", "pcscf3"} {
					restores += len(s.ownEvents(n, "restore", c[0], c[1]))
				}
				GinkgoWriter.Printf("flapping-scscf: scscf1 down %s–%s: %d takeovers by scscf2/3, %d P-CSCF restores\n",
					seconds(c[0]-s.sum.StartNs), seconds(c[1]-s.sum.StartNs), takeovers, restores)
				if takeovers+restores > 0 {
					restoredIn++
				}
			}
			Expect(restoredIn).To(BeNumerically(">=", 2), "users were restored (an S-CSCF's takeover or a P-CSCF's "+
				"restore) in more than one outage of scscf1")
		})
	})

	// dns-outage shortened: dnsd is down from 8 s to 14 s of 24 (6 s: longer than the 1 s TTL and the 5 s
	// failure-recheck period of the nodes' resolver).
	Context("dns-outage", Label("full"), func() {
		r := run("dns-outage")
		It("passes its expectations as shipped", func() {
			s := r()
			Expect(scenario.ExitCode(s.outcome, nil)).To(Equal(scenario.ExitPassed), "%s", s.output)
		})

		It("dnsd's process was gone and it answered nothing, while the nodes served stale answers and calls "+
			"were answered", func() {
			s := r()
			exit, ready, killed := s.outage("dnsd", s.faultNs)
			Expect(exit.Signal).To(Equal("SIGKILL"), "dnsd was killed: %+v", exit)
			Expect(ready.TNs).NotTo(BeZero(), "the lab started dnsd again")
			own := s.ownEvents("dnsd", "node_ready", exit.TNs, ready.TNs+int64(time.Second))
			Expect(own).NotTo(BeEmpty(), "dnsd wrote node_ready again after its restart")
			back := own[0].TNs
			// dnsd's own events: nothing between its death and its restart (a killed dnsd writes no dns_stats), and
			// the restarted one answered queries (its dns_stats at the end of the run).
			for _, e := range s.events["dnsd"] {
				Expect(e.TNs > exit.TNs && e.TNs < back).To(BeFalse(), "dnsd wrote %s while gone", e.Kind)
			}
			stats := s.ownEvents("dnsd", "dns_stats", back, math.MaxInt64)
			Expect(stats).To(HaveLen(1), "the restarted dnsd counted its queries when the lab stopped it")
			Expect(stats[0].Queries).To(BeNumerically(">", 0), "dnsd answered queries again after its restart")

			// The nodes' resolvers served expired answers (dns_stale) during the outage. Before it they serve none
			// on a machine that lets dnsd answer within the 500 ms query timeout; a starved one may see a few.
			stale, before := map[string]int{}, 0
			for n := range s.events {
				for _, e := range s.ownEvents(n, "dns_stale", 0, math.MaxInt64) {
					switch {
					case e.TNs <= killed:
						before += e.Served
					case e.TNs <= back+int64(1500*time.Millisecond): // events are written once a second
						stale[n] += e.Served
					}
				}
			}
			for _, n := range []string{"bac", "icscf"} {
				Expect(stale).To(HaveKeyWithValue(n, BeNumerically(">", 0)), "%s served stale answers while dnsd "+
					"was gone", n)
			}
			during := 0
			for _, v := range stale {
				during += v
			}
			Expect(during).To(BeNumerically(">", before), "more stale answers while dnsd was gone than before")
			// Calls started once every cached answer had expired (1 s TTL) and before dnsd was back were answered.
			all, ok := s.calls(killed+int64(2*time.Second), back)
			Expect(all).To(BeNumerically(">", 0))
			Expect(float64(ok)).To(BeNumerically(">=", 0.99*float64(all)), "calls answered while dnsd was gone")
			GinkgoWriter.Printf("dns-outage: dnsd gone %s–%s; stale answers served %v (%d before the kill); calls "+
				"%d answered of %d\n", seconds(killed-s.sum.StartNs), seconds(back-s.sum.StartNs), stale, before, ok, all)
		})
	})

	// Issue 34: a mixed S-CSCF pool, Kamailio's IMS S-CSCF as scscf2 (docs/mixed-pool.md). Run at full length: the
	// fallback (the phones' refresh, 27-33 s into the run) must fall inside it.
	Context("mixed-scscf-kamailio-kill", Label("full"), func() {
		BeforeAll(requireKamailio)
		r := runFor("mixed-scscf-kamailio-kill", 60*time.Second)
		It("passes its expectations: no survivor restores Kamailio's users, who come back by registering again", func() {
			s := r()
			Expect(scenario.ExitCode(s.outcome, nil)).To(Equal(scenario.ExitPassed), "%s", s.output)
			Expect(s.sum.AffectedIMPUs).NotTo(BeEmpty())
			for _, u := range s.sum.AffectedIMPUs {
				var rereg, firstOK int64
				for _, rec := range s.records {
					switch {
					case rec.TNs < s.faultNs || rec.IMPU != u:
					case rec.Type == "register" && rec.Result == "ok" && rereg == 0:
						rereg = rec.TNs
					case rec.Type == "call" && rec.Direction == "mo" && rec.Result == "ok" && firstOK == 0:
						firstOK = rec.TNs
					}
				}
				Expect(rereg).NotTo(BeZero(), "%s registered again after the kill", u)
				if firstOK != 0 {
					Expect(firstOK).To(BeNumerically(">", rereg), "%s placed a call before it registered again", u)
				}
				// Once registered again at a member of ours, the user has restoration data in the HSS: a takeover
				// after that is the quasi-pool at work, one before it would have come from nothing.
				for _, n := range []string{"scscf1", "scscf3"} {
					for _, e := range s.events[n] {
						Expect(e.Kind == "takeover" && e.IMPU == u && e.TNs >= s.faultNs && e.TNs < rereg).To(BeFalse(),
							"%s restored %s before it registered again, when only Kamailio had held it: from what?", n, u)
					}
				}
			}
		})
	})

	Context("mixed-scscf-ours-kill", Label("full"), func() {
		BeforeAll(requireKamailio)
		r := runFor("mixed-scscf-ours-kill", 60*time.Second)
		It("passes its expectations: our scscf3 restores our scscf1's users from the HSS; Kamailio restores none", func() {
			s := r()
			Expect(scenario.ExitCode(s.outcome, nil)).To(Equal(scenario.ExitPassed), "%s", s.output)
			restored := map[string]bool{}
			for _, e := range s.events["scscf3"] {
				if e.Kind == "takeover" && slices.Contains(s.sum.AffectedIMPUs, e.IMPU) {
					restored[e.IMPU] = true
				}
			}
			Expect(2*len(restored)).To(BeNumerically(">=", len(s.sum.AffectedIMPUs)),
				"scscf3 restored at least half of scscf1's users (%d of %v)", len(restored), s.sum.AffectedIMPUs)
			Expect(s.events).NotTo(HaveKey("scscf2"), "Kamailio writes no events of ours")
			// A user the I-CSCF handed to Kamailio for a terminating call: Kamailio assigns itself (SAR
			// UNREGISTERED_USER) and answers 404 (docs/mixed-pool.md). How many is up to the run; it is printed.
			hijacked := map[string]bool{}
			for _, a := range s.cx {
				if a.Cmd == "SAR" && a.SAT != nil && *a.SAT == 3 && a.TNs >= s.faultNs && strings.HasPrefix(a.Peer, "scscf2.") {
					hijacked[a.IMPU] = true
				}
			}
			GinkgoWriter.Printf("mixed-scscf-ours-kill: scscf3 restored %d of %d affected users; Kamailio assigned "+
				"itself %d users (SAR UNREGISTERED_USER): %v\n", len(restored), len(s.sum.AffectedIMPUs), len(hijacked),
				slices.Sorted(maps.Keys(hijacked)))
		})
	})
})
