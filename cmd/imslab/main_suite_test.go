package main_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

var bin string

func TestImslabCommand(t *testing.T) {
	testtier.RunSpecs(t, "imslab command Suite")
}

var _ = SynchronizedBeforeSuite(func() []byte {
	b, err := gexec.Build("github.com/imslab/quasipool/cmd/imslab")
	Expect(err).NotTo(HaveOccurred())
	return []byte(b)
}, func(b []byte) { bin = string(b) })

var _ = SynchronizedAfterSuite(func() {}, func() { gexec.CleanupBuildArtifacts() })
