package netfault

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
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
type delayLine struct {
	queue         uint16
	delay, jitter time.Duration
	conn          *netlink.Conn

	mu       sync.Mutex
	pending  map[uint32]*time.Timer
	draining bool // release at once from now on
	closed   atomic.Bool

	received, released, errs atomic.Uint64
	done                     chan struct{}
}

// startDelayLine opens a netfilter netlink socket inside the namespace behind
// nsPath, binds a free queue number (trying the next ones when another
// socket owns a number) and starts reading.
func startDelayLine(nsPath string, delay, jitter time.Duration) (*delayLine, error) {
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
	l := &delayLine{queue: queue, delay: delay, jitter: jitter, conn: conn,
		pending: map[uint32]*time.Timer{}, done: make(chan struct{})}
	ok = true
	go l.run()
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

func (l *delayLine) run() {
	defer close(l.done)
	for {
		msgs, err := l.conn.Receive()
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EBADF) {
				return
			}
			// ENOBUFS (the socket overflowed: those packets were accepted
			// undelayed, the queue is fail-open) or an NLMSG_ERROR for a
			// verdict on a packet the kernel no longer holds.
			l.errs.Add(1)
			continue
		}
		now := time.Now()
		for _, m := range msgs {
			p, err := parsePacket(m)
			if err != nil {
				if !errors.Is(err, errNotPacket) {
					l.errs.Add(1)
				}
				continue
			}
			l.received.Add(1)
			l.schedule(p.ID, l.hold()-time.Since(now))
		}
	}
}

func (l *delayLine) schedule(id uint32, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.draining || d <= 0 {
		l.verdict(id)
		return
	}
	l.pending[id] = time.AfterFunc(d, func() {
		l.mu.Lock()
		_, mine := l.pending[id]
		delete(l.pending, id)
		l.mu.Unlock()
		if mine {
			l.verdict(id)
		}
	})
}

func (l *delayLine) verdict(id uint32) {
	if _, err := l.conn.Send(verdictMessage(l.queue, id)); err != nil {
		l.errs.Add(1)
		return
	}
	l.released.Add(1)
}

// stop releases every held packet at once, keeps releasing what still
// arrives for quiet (the rules are gone by now; packets already in the socket
// buffer would be dropped by the kernel when the socket closes), then closes
// the socket, which destroys the queue.
func (l *delayLine) stop(quiet time.Duration) {
	l.mu.Lock()
	l.draining = true
	ids := make([]uint32, 0, len(l.pending))
	for id, t := range l.pending {
		// A timer that already fired sends its own verdict.
		if t.Stop() {
			ids = append(ids, id)
			delete(l.pending, id)
		}
	}
	l.mu.Unlock()
	for _, id := range ids {
		l.verdict(id)
	}
	for last := l.received.Load(); ; {
		time.Sleep(quiet)
		if n := l.received.Load(); n != last {
			last = n
			continue
		}
		break
	}
	l.closed.Store(true)
	l.conn.Close()
	<-l.done
}

func (l *delayLine) stats() QueueStats {
	return QueueStats{Queue: l.queue, Received: l.received.Load(), Released: l.released.Load(), Errors: l.errs.Load()}
}
