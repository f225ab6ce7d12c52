package cx

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestCx(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Cx Suite")
}
