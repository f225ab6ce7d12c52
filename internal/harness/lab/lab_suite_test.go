package lab_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestLab(t *testing.T) {
	testtier.RunSpecs(t, "Lab Suite")
}
