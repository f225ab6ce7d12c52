// Package docs_test checks the repository's documentation as a reader meets it: every relative link resolves, and
// docs/results.md is what the committed runs give.
package docs_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestDocs(t *testing.T) {
	testtier.RunSpecs(t, "Docs Suite")
}
