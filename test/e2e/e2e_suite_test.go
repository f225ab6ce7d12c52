// Package e2e holds suites that start the real binaries and kill them for real.
package e2e_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/imslab/quasipool/internal/harness/testutil"
	"github.com/imslab/quasipool/internal/testtier"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var (
	hssBin string
	// binaries and raceBinaries map a command to its binary, built once per test run (testutil.BinDir);
	// raceBinaries were built with the race detector (the smoke lab under real concurrency).
	binaries     = map[string]string{}
	raceBinaries = map[string]string{}
)

func TestE2E(t *testing.T) {
	testtier.RunSpecs(t, "E2E Suite")
}

var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	dir, err := testutil.BinDir(ctx, false)
	Expect(err).NotTo(HaveOccurred())
	race, err := testutil.BinDir(ctx, true)
	Expect(err).NotTo(HaveOccurred())
	return []byte(dir + "\n" + race)
}, func(data []byte) {
	dir, race, _ := strings.Cut(string(data), "\n")
	for _, name := range []string{"hss", "dnsd", "bac", "pcscf", "icscf", "scscf"} {
		binaries[name] = filepath.Join(dir, name)
		raceBinaries[name] = filepath.Join(race, name)
	}
	hssBin = binaries["hss"]
}, NodeTimeout(10*time.Minute))
