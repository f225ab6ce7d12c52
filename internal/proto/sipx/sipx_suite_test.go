package sipx_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestSipx(t *testing.T) {
	testtier.RunSpecs(t, "sipx Suite")
}
