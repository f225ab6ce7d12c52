package main

import (
	"bytes"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/bench"
)

var _ = Describe("imslab bench flags", Label("unit"), func() {
	parse := func(args ...string) (*bench.Config, error) { return parseBenchFlags(args, GinkgoWriter) }

	It("runs every kind by default, with sizes a 2-core machine runs in well under an hour", func() {
		c, err := parse()
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Kinds).To(Equal([]string{"proxy", "capacity", "registration", "memory"}))
		Expect(c.CallRates).To(Equal([]float64{100, 300, 500}))
		Expect(c.RegRates).To(Equal([]float64{300, 1000}))
		Expect(c.Phones).To(Equal([]int{10000, 100000}))
		// the memory point at 100k phones registers at mem-reg-rate: it dominates the run's length
		Expect(float64(c.Phones[1])/c.MemRegRate + c.MemHold.Seconds()).To(BeNumerically("<", 25*60))
	})

	It("takes the kinds and the sizes of each kind", func() {
		c, err := parse("--kinds", "memory, capacity,memory", "--call-rates", "5,7.5", "--reg-rates", "20",
			"--phones", "30,60", "--port-base", "41000")
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Kinds).To(Equal([]string{"memory", "capacity"}))
		Expect(c.Kinds).NotTo(ContainElement("proxy"))
		Expect(c.CallRates).To(Equal([]float64{5, 7.5}))
		Expect(c.RegRates).To(Equal([]float64{20}))
		Expect(c.Phones).To(Equal([]int{30, 60}))
		Expect(c.PortBase).To(Equal(41000))
	})

	DescribeTable("refuses bad input with an error naming the flag",
		func(want string, args ...string) {
			_, err := parse(args...)
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry("unknown kind", `--kinds: unknown kind "cpu"`, "--kinds", "proxy,cpu"),
		Entry("empty kind", `--kinds: unknown kind ""`, "--kinds", "proxy,"),
		Entry("zero call rate", `--call-rates "0": must be a positive number of calls per second`, "--call-rates", "100,0"),
		Entry("text call rate", `--call-rates "fast"`, "--call-rates", "fast"),
		Entry("NaN registration rate", `--reg-rates "NaN": must be a positive number of registrations`, "--reg-rates", "NaN"),
		Entry("infinite proxy rate", `--rate "Inf"`, "--rate", "Inf"),
		Entry("negative phones", `--phones "-5": must be a whole number of phones`, "--phones", "-5"),
		Entry("fractional phones", `--phones "1.5"`, "--phones", "1.5"),
		Entry("too many phones", `--phones "2000000"`, "--phones", "2000000"),
		Entry("short step", "--call-duration 500ms: must be at least 1s", "--call-duration", "500ms"),
		Entry("short memory hold", "--mem-hold 0s: must be at least 1s", "--mem-hold", "0s"),
		Entry("negative hold", "--call-hold -1s: must not be negative", "--call-hold", "-1s"),
		Entry("zero memory registration rate", "--mem-reg-rate 0: must be a positive", "--mem-reg-rate", "0"),
		Entry("privileged port base", "--port-base 80: must be 0 or from 1024", "--port-base", "80"),
		Entry("port base too high", "--port-base 65500", "--port-base", "65500"),
		Entry("more registration phones than the lab has", "phones: the lab provisions at most", "--reg-rates", "100000", "--reg-duration", "60s"),
		Entry("unknown proxy", `--steps: unknown proxy "opensips"`, "--steps", "kamailio,opensips"),
		Entry("stray argument", `unexpected arguments ["extra"]`, "extra"),
		Entry("unknown flag", "flag provided but not defined: -calls", "--calls", "5"),
	)
})

var _ = Describe("imslab memory", Label("unit"), func() {
	It("refuses a directory that is not a finished run with exit status 2, naming what is missing", func() {
		var stderr bytes.Buffer
		Expect(memory([]string{GinkgoT().TempDir()}, &bytes.Buffer{}, &stderr)).To(Equal(2))
		Expect(stderr.String()).To(ContainSubstring("not a run directory"))
	})
})
