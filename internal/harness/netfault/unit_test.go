package netfault_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/netfault"
)

// recorder is an Exec that records commands and answers from a script.
type recorder struct {
	calls  [][]string
	answer func(argv []string) ([]byte, error)
}

func (r *recorder) exec(_ context.Context, argv ...string) ([]byte, error) {
	r.calls = append(r.calls, argv)
	if r.answer != nil {
		return r.answer(argv)
	}
	return nil, nil
}

var _ = Describe("fault parameters", Label("unit"), func() {
	noop := func(context.Context, ...string) ([]byte, error) { return nil, nil }
	pfx := netip.MustParsePrefix

	DescribeTable("invalid faults are refused by New",
		func(spec netfault.Spec) {
			_, err := netfault.New(noop, spec)
			Expect(errors.Is(err, netfault.ErrInvalid)).To(BeTrue(), "err = %v", err)
		},
		Entry("partition without peers", netfault.Partition{}),
		Entry("partition with a bad direction", netfault.Partition{Peers: []netip.Prefix{pfx("10.0.0.1/32")}, Direction: 7}),
		Entry("loss of 0 %", netfault.Loss{Percent: 0}),
		Entry("loss over 100 %", netfault.Loss{Percent: 101}),
		Entry("loss finer than 0.01 %", netfault.Loss{Percent: 1.005}),
		Entry("rate without a unit", netfault.Rate{Device: "eth0", Rate: "1000"}),
		Entry("rate in bytes", netfault.Rate{Device: "eth0", Rate: "1mbps"}),
		Entry("rate on a bad device name", netfault.Rate{Device: "eth0; rm", Rate: "1mbit"}),
		Entry("delay with jitter over delay", netfault.Delay{Device: "eth0", Delay: time.Millisecond, Jitter: 2 * time.Millisecond}),
		Entry("delay of zero", netfault.Delay{Device: "eth0"}),
	)

	It("builds one nft transaction per partition that replaces the table and drops silently", func(ctx SpecContext) {
		r := &recorder{answer: func(argv []string) ([]byte, error) {
			if len(argv) > 2 && argv[1] == "-s" {
				return []byte("table inet imslab_fault_partition_x {\n}\n"), nil
			}
			return nil, nil
		}}
		f, err := netfault.New(r.exec, netfault.Partition{Peers: []netip.Prefix{pfx("10.200.0.2/32"), pfx("fd00::/64"), pfx("fd00::1/128"), pfx("10.200.0.2/32")}, Direction: netfault.In})
		Expect(err).NotTo(HaveOccurred())
		_ = f.Apply(ctx) // the fake ruleset does not list the real name, so Apply reports it
		var script string
		for _, c := range r.calls {
			if c[0] == "nft" && len(c) == 2 && strings.Contains(c[1], "hook input") {
				script = c[1]
			}
		}
		Expect(script).To(ContainSubstring("ip saddr { 10.200.0.2 } drop"))
		// Duplicates and prefixes inside others are left out (nft refuses overlaps).
		Expect(script).To(ContainSubstring("ip6 saddr { fd00::/64 } drop"))
		Expect(script).NotTo(ContainSubstring("hook output"))
		Expect(script).NotTo(ContainSubstring("reject"))
		Expect(script).To(MatchRegexp(`(?s)^table inet (imslab_fault_partition_\w+) \{\}\ndelete table inet \w+\ntable inet \w+ \{`))
	})

	DescribeTable("loss uses numgen with the finest needed modulus",
		func(pct float64, want string) {
			r := &recorder{}
			f, err := netfault.New(r.exec, netfault.Loss{Percent: pct, Direction: netfault.Out})
			Expect(err).NotTo(HaveOccurred())
			_ = f.Apply(context.Background())
			Expect(r.calls).To(ContainElement(ContainElement(ContainSubstring(want))))
		},
		Entry("30 %", 30.0, `oifname != "lo" numgen random mod 100 < 30 drop`),
		Entry("0.5 %", 0.5, `numgen random mod 10000 < 50 drop`),
		Entry("12.34 %", 12.34, `numgen random mod 10000 < 1234 drop`),
	)

	It("removes what it added when an apply fails half way", func(ctx SpecContext) {
		r := &recorder{answer: func(argv []string) ([]byte, error) {
			if argv[0] == "tc" && argv[2] == "replace" {
				return nil, errors.New("boom")
			}
			return nil, nil
		}}
		f, err := netfault.New(r.exec, netfault.Rate{Device: "veth0", Rate: "1mbit"})
		Expect(err).NotTo(HaveOccurred())
		Expect(f.Apply(ctx)).To(MatchError(ContainSubstring("boom")))
		Expect(f.Applied()).To(BeFalse())
		// After the failure the fault looked for its qdisc to delete it.
		last := r.calls[len(r.calls)-1]
		Expect(strings.Join(last, " ")).To(Equal("tc qdisc show"))
	})
})
