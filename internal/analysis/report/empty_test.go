package report_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/report"
)

var _ = It("builds a report of an empty run directory", Label("unit"), func() {
	s, err := report.Build(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	Expect(s.AffectedUsers).To(BeZero())
})
