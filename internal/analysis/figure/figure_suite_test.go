package figure_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestFigure(t *testing.T) {
	testtier.RunSpecs(t, "figure")
}
