package ue_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestUE(t *testing.T) {
	testtier.RunSpecs(t, "UE Suite")
}
