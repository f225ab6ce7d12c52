package overload_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestOverload(t *testing.T) {
	testtier.RunSpecs(t, "overload")
}
