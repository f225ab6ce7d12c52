package repl_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestRepl(t *testing.T) {
	testtier.RunSpecs(t, "Repl Suite")
}
