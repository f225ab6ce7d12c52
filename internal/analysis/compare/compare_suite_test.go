package compare_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestCompare(t *testing.T) {
	testtier.RunSpecs(t, "compare Suite")
}
