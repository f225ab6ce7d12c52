package udpbuf_test

import (
	"testing"

	"github.com/imslab/quasipool/internal/testtier"
)

func TestUDPBuf(t *testing.T) {
	testtier.RunSpecs(t, "udpbuf")
}
