package study_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestStudy(t *testing.T) {
	testtier.RunSpecs(t, "study Suite")
}
