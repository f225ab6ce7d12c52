package ue_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestUE(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "UE Suite")
}
