package scenario_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
	"github.com/imslab/quasipool/topologies"
)

// recordingLab is a fakeLab that also records the faults' events and can limit CPU.
type recordingLab struct {
	fakeLab
	evMu   sync.Mutex
	events []map[string]any
}

func (r *recordingLab) Event(ev obs.Event) {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	fields := fieldsOf(ev)
	fields["kind"] = ev.Kind()
	r.events = append(r.events, fields)
}

// fieldsOf is ev's fields as the events file has them: by JSON name, an omitempty field that is zero left out.
func fieldsOf(ev obs.Event) map[string]any {
	v := reflect.ValueOf(ev)
	m := map[string]any{}
	for i := range v.NumField() {
		name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if opts == "omitempty" && v.Field(i).IsZero() {
			continue
		}
		m[name] = v.Field(i).Interface()
	}
	return m
}

func (r *recordingLab) Throttle(n string, pct int) error {
	return r.do("throttle " + n + " " + map[int]string{5: "5", 50: "50"}[pct])
}
func (r *recordingLab) Unthrottle(n string) error { return r.do("unthrottle " + n) }

func (r *recordingLab) kinds() []string {
	r.evMu.Lock()
	defer r.evMu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e["kind"].(string)+" "+e["fault"].(string)+" "+e["target"].(string))
	}
	return out
}

// twoSites is a scenario on topologies/two-sites.yaml with the given faults.
func twoSites(faults string) *scenario.Scenario {
	GinkgoHelper()
	var topo strings.Builder
	for _, l := range strings.Split(string(topologies.TwoSites), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") || strings.TrimSpace(l) == "" {
			continue
		}
		topo.WriteString("  " + l + "\n")
	}
	s, err := scenario.Parse([]byte("name: t\nduration: 30s\ntraffic: {phones: 4}\ntopology:\n" + topo.String() +
		"faults:\n" + faults))
	Expect(err).NotTo(HaveOccurred())
	return s
}

var _ = Describe("fault kinds of issue 11", Label("unit"), func() {
	It("resolves pool and site targets and the HSS and DNS defaults", func() {
		s := twoSites("  - {kind: site-down, target: \"site:south\", at: 1s, for: 2s}\n" +
			"  - {kind: hss-down, at: 5s}\n  - {kind: dns-down, at: 5s, for: 1s}\n  - {kind: pause, target: scscf, at: 10s}\n")
		Expect(s.Faults[0].Nodes).To(Equal([]string{"pcscf3", "pcscf4", "scscf3", "scscf4"}))
		Expect(s.Faults[1].Target).To(Equal("hss"))
		Expect(s.Faults[2].Target).To(Equal("dnsd"))
		Expect(s.Faults[3].Nodes).To(Equal([]string{"scscf1", "scscf2", "scscf3", "scscf4"}))
	})

	It("takes a site down at one instant, brings it back after for, and records inject and heal", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: site-down, target: \"site:south\", at: 100ms, for: 300ms}\n")
		lab := &recordingLab{}
		t0 := time.Now()
		scenario.NewInjector(lab, s.Faults, t0).Run(ctx, func(err error) { Fail(err.Error()) })
		ops := lab.ops()
		Expect(ops[:4]).To(ConsistOf("kill pcscf3", "kill pcscf4", "kill scscf3", "kill scscf4"))
		Expect(ops[4:]).To(ConsistOf("start pcscf3", "start pcscf4", "start scscf3", "start scscf4"))
		first, last := lab.calls[0].at.Sub(t0), lab.calls[3].at.Sub(t0)
		Expect(last-first).To(BeNumerically("<", 20*time.Millisecond), "the kills happen together")
		Expect(lab.kinds()).To(Equal([]string{"fault site-down site:south", "fault_heal site-down site:south"}))
		Expect(lab.events[0]["nodes"]).To(Equal([]string{"pcscf3", "pcscf4", "scscf3", "scscf4"}))
	})

	It("pauses the HSS in mode pause and resumes it", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: hss-down, mode: pause, at: 50ms, for: 100ms}\n  - {kind: dns-down, at: 50ms, for: 100ms}\n")
		lab := &recordingLab{}
		scenario.NewInjector(lab, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(lab.ops()).To(ConsistOf("pause hss", "resume hss", "kill dnsd", "start dnsd"))
		Expect(lab.kinds()).To(ConsistOf("fault hss-down hss", "fault_heal hss-down hss", "fault dns-down dnsd",
			"fault_heal dns-down dnsd"))
	})

	It("flaps a member every period for for and leaves it running", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: flap, target: scscf1, at: 100ms, for: 500ms, period: 100ms}\n")
		lab := &recordingLab{}
		t0 := time.Now()
		scenario.NewInjector(lab, s.Faults, t0).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(lab.ops()).To(Equal([]string{"kill scscf1", "start scscf1", "kill scscf1", "start scscf1", "kill scscf1",
			"start scscf1"}))
		for i, c := range lab.calls {
			want := time.Duration(i+1) * 100 * time.Millisecond
			Expect(c.at.Sub(t0)).To(BeNumerically("~", want, 40*time.Millisecond), c.op)
		}
		Expect(lab.kinds()).To(Equal([]string{"fault flap scscf1", "fault_heal flap scscf1"}))
	})

	It("slows a member through the lab and heals it; a lab that cannot limit CPU is an error", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: slow, target: pcscf3, at: 50ms, for: 100ms, cpu_percent: 5}\n")
		lab := &recordingLab{}
		scenario.NewInjector(lab, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(lab.ops()).To(Equal([]string{"throttle pcscf3 5", "unthrottle pcscf3"}))
		Expect(lab.events[0]["cpu_percent"]).To(Equal(5))

		var errs []error
		scenario.NewInjector(&fakeLab{}, s.Faults, time.Now()).Run(ctx, func(err error) { errs = append(errs, err) })
		Expect(errs).To(HaveLen(1))
		Expect(errors.Is(errs[0], scenario.ErrUnsupported)).To(BeTrue())
	})

	It("failback kills a member and starts it again", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: failback, target: pcscf1, at: 50ms, for: 100ms}\n")
		lab := &recordingLab{}
		scenario.NewInjector(lab, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(lab.ops()).To(Equal([]string{"kill pcscf1", "start pcscf1"}))
		Expect(lab.kinds()).To(Equal([]string{"fault failback pcscf1", "fault_heal failback pcscf1"}))
	})

	It("records nothing new for the older kinds", SpecTimeout(10*time.Second), func(ctx SpecContext) {
		s := twoSites("  - {kind: kill, target: pcscf1, at: 50ms, for: 100ms}\n")
		lab := &recordingLab{}
		scenario.NewInjector(lab, s.Faults, time.Now()).Run(ctx, func(err error) { Fail(err.Error()) })
		Expect(lab.ops()).To(Equal([]string{"kill pcscf1", "start pcscf1"}))
		Expect(lab.kinds()).To(BeEmpty(), "the lab's own kill event stays the only record, as before")
	})
})

var _ = Describe("the site-loss scenario", Label("unit"), func() {
	It("has the sites, links and pools of topologies/two-sites.yaml", func() {
		s, err := scenario.Load("../../../scenarios/site-loss.yaml")
		Expect(err).NotTo(HaveOccurred())
		t, err := topology.Parse(topologies.TwoSites)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.Topology.Sites).To(Equal(t.Sites))
		Expect(s.Topology.Links()).To(Equal(t.Links()))
		Expect(s.Topology.Pools).To(Equal(t.Pools))
		Expect(s.Faults[0].Nodes).To(Equal([]string{"pcscf3", "pcscf4", "scscf3", "scscf4"}))
	})
})
