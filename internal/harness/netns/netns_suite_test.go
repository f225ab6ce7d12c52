package netns_test

import (
	"os"
	"testing"

	"github.com/imslab/quasipool/internal/testtier"

	. "github.com/onsi/ginkgo/v2"

	"github.com/imslab/quasipool/internal/harness/netns"
)

func TestNetns(t *testing.T) {
	testtier.RunSpecs(t, "Netns Suite")
}

// requireNetns skips the spec when this process cannot build namespaces, or fails it when
// IMSLAB_REQUIRE_NETNS is set.
func requireNetns() {
	GinkgoHelper()
	if err := netns.Check(); err != nil {
		if os.Getenv("IMSLAB_REQUIRE_NETNS") != "" {
			Fail("network namespaces are required (IMSLAB_REQUIRE_NETNS is set): " + err.Error())
		}
		Skip(err.Error())
	}
}
