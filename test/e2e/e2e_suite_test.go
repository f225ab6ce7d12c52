// Package e2e holds suites that start the real binaries and kill them for real.
package e2e_test

import (
	"strings"
	"testing"

	"github.com/imslab/quasipool/internal/testtier"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
)

var (
	hssBin   string
	binaries = map[string]string{}
)

func TestE2E(t *testing.T) {
	testtier.RunSpecs(t, "E2E Suite")
}

var _ = SynchronizedBeforeSuite(func() []byte {
	var out []string
	for _, name := range []string{"hss", "dnsd", "bac", "pcscf", "icscf", "scscf"} {
		bin, err := gexec.Build("github.com/imslab/quasipool/cmd/" + name)
		Expect(err).NotTo(HaveOccurred())
		out = append(out, name+"="+bin)
	}
	return []byte(strings.Join(out, "\n"))
}, func(data []byte) {
	for _, line := range strings.Split(string(data), "\n") {
		name, bin, _ := strings.Cut(line, "=")
		binaries[name] = bin
	}
	hssBin = binaries["hss"]
})

var _ = SynchronizedAfterSuite(func() {}, func() {
	gexec.CleanupBuildArtifacts()
})
