package stats_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestStats(t *testing.T) {
	testtier.RunSpecs(t, "stats")
}
