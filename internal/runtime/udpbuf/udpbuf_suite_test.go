package udpbuf_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestUDPBuf(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "udpbuf")
}
