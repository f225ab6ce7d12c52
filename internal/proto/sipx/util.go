package sipx

import (
	"fmt"
	"net"
	"strconv"
)

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("sipx: address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("sipx: address %q: bad port", addr)
	}
	return h, port, nil
}

func isIP(h string) bool { return net.ParseIP(h) != nil }
