package nfrun_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestNfrun(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "nfrun Suite")
}
