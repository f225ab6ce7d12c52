package bac_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestBAC(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "bac Suite")
}
