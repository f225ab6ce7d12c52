package pcscf_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestPCSCF(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "pcscf Suite")
}
