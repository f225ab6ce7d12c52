package pcscf_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestPCSCF(t *testing.T) {
	testtier.RunSpecs(t, "pcscf Suite")
}
