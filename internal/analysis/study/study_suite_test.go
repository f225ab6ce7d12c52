package study_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestStudy(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "study Suite")
}
