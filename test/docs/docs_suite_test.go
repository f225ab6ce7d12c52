// Package docs_test checks the repository's documentation as a reader meets it: every relative link resolves, and
// docs/results.md is what the committed runs give.
package docs_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestDocs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Docs Suite")
}
