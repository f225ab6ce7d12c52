package stats_test

import (
	"math"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/stats"
)

var _ = Describe("a number in a generated table", Label("unit"), func() {
	DescribeTable("read as they always did (shortest digits, an exponent only for the very small or large)",
		func(x float64, want string) { Expect(stats.Short(x)).To(Equal(want)) },
		Entry("an integer", 33570.0, "33570"),
		Entry("a million", 1e6, "1000000"),
		Entry("a rounded fraction", 2.31, "2.31"),
		Entry("microseconds", 0.567245, "0.567245"),
		Entry("a float sum's rounding error", 0.30000000000000004, "0.30000000000000004"),
		Entry("1e-4 is still a decimal", 0.0001, "0.0001"),
		Entry("below it, an exponent", 0.00001, "1e-05"),
		Entry("1e16 and above, an exponent", 1e16, "1e+16"),
		Entry("zero", 0.0, "0"),
		Entry("negative", -1.5, "-1.5"),
		Entry("negative zero (a change that rounds to nothing)", math.Copysign(0, -1), "-0"),
	)
})
