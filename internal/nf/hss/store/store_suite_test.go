package store_test

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/imslab/quasipool/internal/testtier"

	. "github.com/onsi/ginkgo/v2"
)

func TestStore(t *testing.T) {
	testtier.RunSpecs(t, "HSS store suite")
}

// newTestLogger logs to GinkgoWriter, which shows the output only for failing specs.
func newTestLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(GinkgoWriter, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
