package sipx_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
)

var _ = Describe("the error to SIP status mapping", Label("unit"), func() {
	It("answers 504 when the HSS did not answer at all", func() {
		got, _ := sipx.StatusOf(fmt.Errorf("lir: %w", sipx.ErrNoAnswer))
		Expect(got).To(Equal(504))
	})
})
