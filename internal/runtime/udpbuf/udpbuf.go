// Package udpbuf sizes the kernel's receive buffer of the lab's UDP sockets.
//
// Every SIP node and the phones of a run share a machine (and, pinned, one core): when the scheduler leaves a
// node off the CPU for a few tens of milliseconds while a fault's burst arrives (every affected user's requests
// failing over at once), the datagrams queue in its socket. Linux's default receive buffer (net.core.rmem_default,
// 208 KiB, of which a loopback datagram's buffer takes several KiB) holds a few dozen of them; the rest are
// dropped, and each drop costs SIP a retransmission: 0.5 s, 1 s, 2 s later. Those delays are the host's, not the
// design's, and they showed up in the lab's takeover times (docs/sip-core.md, "Socket buffers"). Size grows the
// buffer beyond net.core.rmem_max with SO_RCVBUFFORCE where the process may (root or CAP_NET_ADMIN, as the lab
// runs), else as far as rmem_max lets SO_RCVBUF go, and says what it got.
package udpbuf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultSize is the receive buffer the lab asks for its UDP sockets: about a thousand loopback datagrams.
const DefaultSize = 4 << 20

// EnvSize names the environment variable that overrides DefaultSize for every node and phone of a lab (they
// inherit the runner's environment): a size in bytes, or 0 to leave the kernel's default alone, which is how
// the lab ran before the buffers were sized (docs/results/bench/udpbuf-2026-12-04/run.sh measures the difference).
const EnvSize = "IMSLAB_UDP_RCVBUF"

// Wanted returns the receive buffer to ask for: $IMSLAB_UDP_RCVBUF when it is a number of bytes (0: none),
// DefaultSize otherwise.
func Wanted() int {
	if v, ok := os.LookupEnv(EnvSize); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
			return n
		}
	}
	return DefaultSize
}

// Size sets conn's receive buffer to size bytes and returns what the kernel reports it got (the kernel doubles
// the value it is given for its own bookkeeping, and caps SO_RCVBUF at net.core.rmem_max). forced says whether
// SO_RCVBUFFORCE was allowed. A conn that is not a UDP socket is an error.
func Size(conn net.PacketConn, size int) (got int, forced bool, err error) {
	uc, ok := conn.(*net.UDPConn)
	if !ok {
		return 0, false, fmt.Errorf("udpbuf: %T is not a UDP socket", conn)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, false, fmt.Errorf("udpbuf: %w", err)
	}
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size); e == nil {
			forced = true
		} else if e2 := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, size); e2 != nil {
			serr = e2
			return
		}
		got, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	if err := errors.Join(cerr, serr); err != nil {
		return got, forced, fmt.Errorf("udpbuf: receive buffer: %w", err)
	}
	return got, forced, nil
}

// Drops returns the kernel's count of datagrams dropped on arrival at the UDP socket bound to port (any
// address) in this process's network namespace, read from /proc/net/udp and /proc/net/udp6 (the last column).
// ok is false when no such socket is listed.
func Drops(port int) (drops uint64, ok bool, err error) {
	for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT) {
				continue
			}
			return 0, false, fmt.Errorf("udpbuf: %w", err)
		}
		d, found := parseDrops(string(b), port)
		if found {
			drops += d
			ok = true
		}
	}
	return drops, ok, nil
}

// parseDrops sums the drops column of the lines of a /proc/net/udp table whose local port is port.
func parseDrops(table string, port int) (drops uint64, found bool) {
	lines := strings.Split(table, "\n")
	for _, line := range lines[min(1, len(lines)):] {
		f := strings.Fields(line)
		if len(f) < 13 {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil || int(p) != port {
			continue
		}
		d, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil {
			continue
		}
		drops += d
		found = true
	}
	return drops, found
}

// Watch calls report every interval in which the socket on port dropped datagrams, with the drops in that
// interval and since Watch began, until ctx is done. It reads Drops, so it sees the sockets of this process's
// network namespace; it returns at once when the table cannot be read (no /proc).
func Watch(ctx context.Context, port int, interval time.Duration, report func(delta, total uint64)) {
	base, _, err := Drops(port)
	if err != nil {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := base
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, ok, err := Drops(port)
		if err != nil || !ok || n <= last {
			continue
		}
		report(n-last, n-base)
		last = n
	}
}
