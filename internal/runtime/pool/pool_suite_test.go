package pool_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestPool(t *testing.T) {
	testtier.RunSpecs(t, "Pool Suite")
}
