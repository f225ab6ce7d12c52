package icscf_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestIcscf(t *testing.T) {
	testtier.RunSpecs(t, "icscf Suite")
}
