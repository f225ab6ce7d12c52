package scenario_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestScenario(t *testing.T) {
	testtier.RunSpecs(t, "scenario Suite")
}
