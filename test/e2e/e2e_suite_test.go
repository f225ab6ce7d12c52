// Package e2e holds suites that start the real binaries and kill them for real.
package e2e_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

var hssBin string

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "E2E Suite")
}

var _ = SynchronizedBeforeSuite(func() []byte {
	bin, err := gexec.Build("github.com/imslab/quasipool/cmd/hss")
	Expect(err).NotTo(HaveOccurred())
	return []byte(bin)
}, func(bin []byte) {
	hssBin = string(bin)
})

var _ = SynchronizedAfterSuite(func() {}, func() {
	gexec.CleanupBuildArtifacts()
})
