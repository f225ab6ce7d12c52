package cxsip_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/nf/cxsip"
	"github.com/imslab/quasipool/internal/proto/cx"
)

var _ = Describe("the Cx to SIP status mapping", Label("unit"), func() {
	DescribeTable("Cx answers",
		func(res cx.Result, code int) {
			err := fmt.Errorf("lookup: %w", &cx.Error{Command: "LIR", Result: res})
			got, _ := cxsip.Status(err)
			Expect(got).To(Equal(code))
		},
		Entry("an overloaded HSS (DIAMETER_TOO_BUSY) is 503: come back later", cx.TooBusy, 503),
		Entry("an unknown user is 404", cx.ErrorUserUnknown, 404),
		Entry("identities that do not match are 403", cx.ErrorIdentitiesDontMatch, 403),
		Entry("an unregistered identity is 480", cx.ErrorIdentityNotRegistered, 480),
		Entry("any other Cx failure is 500", cx.UnableToComply, 500),
	)
	It("answers 504 when the HSS did not answer at all", func() {
		got, reason := cxsip.Status(fmt.Errorf("lir: %w", context.DeadlineExceeded))
		Expect(got).To(Equal(504))
		Expect(reason).To(Equal("HSS Unreachable"))
	})
})
