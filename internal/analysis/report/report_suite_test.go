package report_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestReport(t *testing.T) {
	testtier.RunSpecs(t, "Report Suite")
}
