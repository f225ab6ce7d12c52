package scscf_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestScscf(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "scscf Suite")
}
