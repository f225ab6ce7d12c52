package netfault

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

const (
	// queueBase is the first NFQUEUE number the delay line uses; numbers from
	// here to 65535 are this package's (state.go leaves rules that send to
	// them out of the snapshot comparison).
	queueBase = 17000
	// queueMaxLen is how many packets one queue holds in the kernel at once:
	// at 10000 packets/s, a full second of delay.
	queueMaxLen = 10000
	// queueRcvBuf is the netlink socket's receive buffer: the packets the
	// kernel has queued but the consumer has not read yet.
	queueRcvBuf = 8 << 20
)

// nextQueue hands out queue numbers, one per delay line of this process.
var nextQueue atomic.Uint32

func allocQueue() uint16 {
	n := nextQueue.Add(1) - 1
	return uint16(queueBase + n%(65536-queueBase))
}

// QueueStats counts what one NFQUEUE delay line did.
type QueueStats struct {
	Queue    uint16 // the NFQUEUE number
	Received uint64 // packets read from the queue
	Released uint64 // accept verdicts sent
	Errors   uint64 // receive errors and refused verdicts
}

// delayLine is the consumer of one NFQUEUE: it holds each packet in the
// kernel (only its id comes to user space) for the delay ± jitter and then
// accepts it. Verdicts may be given out of order.
//
// One goroutine does everything on its own OS thread, locked and given a
// higher scheduling priority (nice -10, where permitted): it waits in
// ppoll(2) for the socket or the next due verdict, reads every queued
// packet, and sends each verdict when it is due, with plain syscalls. Go
// timers and the netpoller would each add a hop through another thread,
// and on a loaded machine every hop is a wait for a CPU.
type delayLine struct {
	queue         uint16
	delay, jitter time.Duration
	conn          *netlink.Conn
	fd            int // the socket, valid until conn is closed after run returns
	stopfd        int // eventfd: stop() writes it

	received, released, errs atomic.Uint64
	done                     chan struct{}
}

// startLocalDelayLine opens, in this process, a netfilter netlink socket inside the namespace behind
// nsPath, binds a free queue number (trying the next ones when another
// socket owns a number) and starts reading.
func startLocalDelayLine(nsPath string, delay, jitter time.Duration) (*delayLine, error) {
	nsf, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("delay line: namespace: %w", err)
	}
	defer nsf.Close()
	// netlink.Dial with NetNS creates the socket on a locked OS thread that
	// has entered the namespace with setns(2), and leaves it again.
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(nsf.Fd())})
	if err != nil {
		return nil, fmt.Errorf("delay line: netfilter socket in %s: %w", nsPath, err)
	}
	ok := false
	defer func() {
		if !ok {
			conn.Close()
		}
	}()
	_ = conn.SetOption(netlink.NoENOBUFS, true)
	if err := setRcvBuf(conn, queueRcvBuf); err != nil {
		return nil, fmt.Errorf("delay line: receive buffer: %w", err)
	}
	var queue uint16
	for try := 0; ; try++ {
		queue = allocQueue()
		m, err := queueConfig{Queue: queue, MaxLen: queueMaxLen}.message()
		if err != nil {
			return nil, err
		}
		_, err = conn.Execute(m)
		if err == nil {
			break
		}
		// EPERM: another socket has bound this number.
		if (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBUSY)) && try < 64 {
			continue
		}
		return nil, fmt.Errorf("delay line: bind queue %d: %w", queue, err)
	}
	l := &delayLine{queue: queue, delay: delay, jitter: jitter, conn: conn, done: make(chan struct{})}
	rc, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	if err := rc.Control(func(fd uintptr) { l.fd = int(fd) }); err != nil {
		return nil, err
	}
	if l.stopfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("delay line: eventfd: %w", err)
	}
	ok = true
	go l.run(20 * time.Millisecond)
	return l, nil
}

// setRcvBuf sets SO_RCVBUFFORCE (root may exceed net.core.rmem_max), or
// SO_RCVBUF as far as allowed when that is refused.
func setRcvBuf(conn *netlink.Conn, n int) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
	}); err != nil {
		return err
	}
	if serr != nil {
		return conn.SetReadBuffer(n)
	}
	return nil
}

// hold returns how long to hold one packet: delay ± a uniform jitter.
func (l *delayLine) hold() time.Duration {
	d := l.delay
	if l.jitter > 0 {
		d += time.Duration(rand.Int64N(int64(2*l.jitter)+1)) - l.jitter
	}
	return d
}

// held is one packet waiting for its verdict.
type held struct {
	due time.Time
	id  uint32
}

// heldHeap orders held packets by due time.
type heldHeap []held

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h heldHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heldHeap) Push(x any)        { *h = append(*h, x.(held)) }
func (h *heldHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// run is the delay line's loop (see delayLine). After stop() it releases
// everything it holds and what still arrives, until nothing has arrived for
// quiet, then returns.
func (l *delayLine) run(quiet time.Duration) {
	defer close(l.done)
	// The thread keeps its raised priority, so it is never handed back: it
	// ends with this goroutine.
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), -10)
	var (
		pending  heldHeap
		buf      = make([]byte, 1<<16)
		fds      = []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}, {Fd: int32(l.stopfd), Events: unix.POLLIN}}
		stopping bool
		lastRx   time.Time
	)
	for {
		var timeout *unix.Timespec
		if stopping {
			ts := unix.NsecToTimespec(int64(quiet))
			timeout = &ts
		} else if len(pending) > 0 {
			ts := unix.NsecToTimespec(max(int64(time.Until(pending[0].due)), 0))
			timeout = &ts
		}
		if _, err := unix.Ppoll(fds, timeout, nil); err != nil && err != unix.EINTR {
			l.errs.Add(1)
			time.Sleep(time.Millisecond)
		}
		if len(fds) > 1 && fds[1].Revents != 0 {
			stopping, fds = true, fds[:1]
			for _, h := range pending {
				l.verdict(h.id)
			}
			pending = pending[:0]
			lastRx = time.Now()
		}
		now := time.Now()
		for _, p := range l.read(buf) {
			l.received.Add(1)
			lastRx = now
			d := l.hold()
			if stopping || d <= 0 {
				l.verdict(p.ID)
				continue
			}
			heap.Push(&pending, held{due: now.Add(d), id: p.ID})
		}
		if stopping && time.Since(lastRx) >= quiet {
			return
		}
		for len(pending) > 0 && !time.Now().Before(pending[0].due) {
			l.verdict(heap.Pop(&pending).(held).id)
		}
	}
}

// read returns every packet message waiting on the socket.
func (l *delayLine) read(buf []byte) []queuedPacket {
	var out []queuedPacket
	for {
		n, _, err := unix.Recvfrom(l.fd, buf, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			return out
		}
		if err != nil {
			// ENOBUFS: the socket overflowed; those packets were accepted
			// undelayed (the queue is fail-open).
			l.errs.Add(1)
			return out
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			l.errs.Add(1)
			continue
		}
		for _, m := range msgs {
			if m.Header.Type == unix.NLMSG_ERROR {
				// A refused verdict (the kernel no longer holds the id).
				l.errs.Add(1)
				continue
			}
			p, err := parsePacket(netlink.Message{
				Header: netlink.Header{Length: m.Header.Len, Type: netlink.HeaderType(m.Header.Type),
					Flags: netlink.HeaderFlags(m.Header.Flags), Sequence: m.Header.Seq, PID: m.Header.Pid},
				Data: m.Data,
			})
			if err != nil {
				if !errors.Is(err, errNotPacket) {
					l.errs.Add(1)
				}
				continue
			}
			out = append(out, p)
		}
	}
}

func (l *delayLine) verdict(id uint32) {
	m := verdictMessage(l.queue, id)
	m.Header.Length = uint32(16 + len(m.Data))
	b, err := m.MarshalBinary()
	if err == nil {
		err = unix.Sendto(l.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	}
	if err != nil {
		l.errs.Add(1)
		return
	}
	l.released.Add(1)
}

// stop makes run release every held packet at once and what still arrives
// (the rules are gone by now; packets left in the socket buffer would be
// dropped by the kernel when the socket closes), waits for it, then closes
// the socket, which destroys the queue.
func (l *delayLine) stop() {
	_, _ = unix.Write(l.stopfd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	<-l.done
	l.conn.Close()
	unix.Close(l.stopfd)
}

func (l *delayLine) stats() QueueStats {
	return QueueStats{Queue: l.queue, Received: l.received.Load(), Released: l.released.Load(), Errors: l.errs.Load()}
}
