package netfault_test

import (
	"os"
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestNetfault(t *testing.T) {
	testtier.RunSpecs(t, "Netfault Suite")
}
