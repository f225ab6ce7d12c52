package bac_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestBAC(t *testing.T) {
	testtier.RunSpecs(t, "bac Suite")
}
