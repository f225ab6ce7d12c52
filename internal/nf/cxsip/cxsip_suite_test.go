package cxsip_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestCxsip(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "cxsip Suite")
}
