package icscf_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestIcscf(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "icscf Suite")
}
