package repl_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestRepl(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Repl Suite")
}
