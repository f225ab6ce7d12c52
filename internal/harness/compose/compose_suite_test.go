package compose_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestCompose(t *testing.T) {
	testtier.RunSpecs(t, "Compose Suite")
}
