package dnsd_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestDNSD(t *testing.T) {
	testtier.RunSpecs(t, "DNSD Suite")
}
