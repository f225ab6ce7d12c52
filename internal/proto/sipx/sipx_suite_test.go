package sipx_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSipx(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "sipx Suite")
}
