package figure_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestFigure(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "figure")
}
