package sipx_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
)

var _ = Describe("the error to SIP status mapping", Label("unit"), func() {
	DescribeTable("Cx answers",
		func(res cx.Result, code int) {
			err := fmt.Errorf("lookup: %w", &cx.Error{Command: "LIR", Result: res})
			got, _ := sipx.StatusOf(err)
			Expect(got).To(Equal(code))
		},
		Entry("an overloaded HSS (DIAMETER_TOO_BUSY) is 503: come back later", cx.TooBusy, 503),
		Entry("an unknown user is 404", cx.ErrorUserUnknown, 404),
		Entry("an unregistered identity is 480", cx.ErrorIdentityNotRegistered, 480),
		Entry("any other Cx failure is 500", cx.UnableToComply, 500),
	)
	It("answers 504 when the HSS did not answer at all", func() {
		got, _ := sipx.StatusOf(fmt.Errorf("lir: %w", sipx.ErrNoAnswer))
		Expect(got).To(Equal(504))
	})
})
