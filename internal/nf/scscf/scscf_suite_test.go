package scscf_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestScscf(t *testing.T) {
	testtier.RunSpecs(t, "scscf Suite")
}
