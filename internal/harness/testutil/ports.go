// Package testutil holds helpers shared by the test suites (never imported by production code).
package testutil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
)

// FreeBlock returns the first of n consecutive ports that are free on 127.0.0.1 for both UDP and TCP, below the
// kernel's ephemeral range so that no outgoing connection takes one of them later. Suites that start a whole lab
// use it to run side by side with other packages' suites.
func FreeBlock(n int) (int, error) {
	for try := 0; try < 200; try++ {
		base := 20000 + rand.IntN(12000-n)
		if blockFree(base, n) {
			return base, nil
		}
	}
	return 0, errors.New("testutil: no block of free ports")
}

func blockFree(base, n int) bool {
	for p := base; p < base+n; p++ {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		t, err := net.Listen("tcp", addr)
		u.Close()
		if err != nil {
			return false
		}
		t.Close()
	}
	return true
}
