package nfrun_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestNfrun(t *testing.T) {
	testtier.RunSpecs(t, "nfrun Suite")
}
