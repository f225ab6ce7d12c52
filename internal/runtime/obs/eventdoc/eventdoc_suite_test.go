package eventdoc_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestEventdoc(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "eventdoc")
}
