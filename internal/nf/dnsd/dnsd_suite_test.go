package dnsd_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestDNSD(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "DNSD Suite")
}
