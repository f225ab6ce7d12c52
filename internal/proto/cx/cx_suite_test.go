package cx

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestCx(t *testing.T) {
	testtier.RunSpecs(t, "Cx Suite")
}
