package bac

import (
	"net"
	"strconv"
)

func hostOnly(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

func portOnly(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}
