// Package interop_test runs our HSS under an IMS core nobody here wrote: Kamailio's IMS I-CSCF and S-CSCF, as
// Debian ships them, with SIPp phones, and checks the Cx exchange in a capture decoded by tshark (issue 34,
// docs/interop.md).
package interop_test

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/testutil"
	"github.com/imslab/quasipool/internal/testtier"
)

// hssBin is our cmd/hss, built once per test run (testutil.BinDir).
var hssBin string

func TestInterop(t *testing.T) {
	testtier.RunSpecs(t, "Interop Suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	if !tierRunsLabSpecs() {
		return // the fast tier runs only the decoder's specs: no build
	}
	dir, err := testutil.BinDir(ctx, false)
	Expect(err).NotTo(HaveOccurred())
	hssBin = filepath.Join(dir, "hss")
}, NodeTimeout(10*time.Minute))

// tierRunsLabSpecs tells whether the label filter in effect selects the e2e specs.
func tierRunsLabSpecs() bool {
	suite, _ := GinkgoConfiguration()
	f := suite.LabelFilter
	if f == "" {
		var err error
		if f, err = testtier.Filter(); err != nil {
			return true
		}
	}
	return Label("e2e").MatchesLabelFilter(f)
}
