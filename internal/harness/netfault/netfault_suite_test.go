package netfault_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestNetfault(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Netfault Suite")
}
