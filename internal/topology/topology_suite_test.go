package topology_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestTopology(t *testing.T) {
	testtier.RunSpecs(t, "Topology Suite")
}
