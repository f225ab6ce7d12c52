package obs_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestObs(t *testing.T) {
	testtier.RunSpecs(t, "obs")
}
