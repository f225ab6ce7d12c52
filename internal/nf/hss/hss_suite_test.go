package hss_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestHSS(t *testing.T) {
	testtier.RunSpecs(t, "HSS Suite")
}
