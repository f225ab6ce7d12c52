package hss_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestHSS(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "HSS Suite")
}
