package api_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestAPI(t *testing.T) {
	testtier.RunSpecs(t, "HSS API suite")
}
