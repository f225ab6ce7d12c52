// Package testtier decides which specs a plain `go test` runs, so that the default run stays in-process and the
// suites that start real labs run only when asked for (never imported by production code).
//
// The tiers, chosen with IMSLAB_TIER (or overridden by an explicit -ginkgo.label-filter):
//
//	fast (default)  unit and integration specs: in-process, fake peers; what `go test -race ./...` runs
//	lab             specs that start real labs, namespaces or containers (labels e2e, netns, docker), but not
//	                those labelled full (the quick study and the Kamailio interop suite among them); what
//	                `make test-lab` runs, without -race, on nodes built once
//	full            every spec: the whole matrix of shipped scenarios and backends, repeated comparisons and
//	                the bench smoke; what `make test-full` runs
package testtier

import (
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// Labels of the tiers. A spec that starts anything outside the test process carries E2E, Netns or Docker; a
// spec too slow for CI's lab tier also carries Full.
const (
	E2E    = "e2e"
	Netns  = "netns"
	Docker = "docker"
	Cgroup = "cgroup"
	Bench  = "bench"
	Full   = "full"
)

// Filters maps a tier to its Ginkgo label filter.
var Filters = map[string]string{
	"fast": "!(e2e || netns || docker || cgroup || bench || full)",
	"lab":  "(e2e || netns || docker || cgroup) && !(bench || full)",
	"full": "",
}

// Env is the environment variable that names the tier.
const Env = "IMSLAB_TIER"

// Filter returns the label filter of the tier named by IMSLAB_TIER (fast when unset).
func Filter() (string, error) {
	tier := os.Getenv(Env)
	if tier == "" {
		tier = "fast"
	}
	f, ok := Filters[tier]
	if !ok {
		return "", fmt.Errorf("%s=%q: want fast, lab or full", Env, tier)
	}
	return f, nil
}

// Name returns the tier in effect (fast when unset).
func Name() string {
	if t := os.Getenv(Env); t != "" {
		return t
	}
	return "fast"
}

// RunSpecs registers Gomega's fail handler and runs the package's suite with the tier's label filter, unless
// -ginkgo.label-filter was given on the command line.
func RunSpecs(t *testing.T, description string) bool {
	t.Helper()
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	if suite.LabelFilter == "" {
		f, err := Filter()
		if err != nil {
			t.Fatal(err)
		}
		suite.LabelFilter = f
	}
	return ginkgo.RunSpecs(t, description, suite, reporter)
}
