package netfault

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The delay line runs in a process of its own: the applying program started
// again (os.Executable) with envDelayLine set, which init below turns into
// the delay line's main before anything else of that program runs.
//
// In the applying process the consumer shared the Go scheduler with
// everything else there: on a loaded machine, with a busy process (the lab
// runner's phones, a race-built test binary), its thread came back from
// ppoll(2) and waited for a P behind the other goroutines, for seconds at
// worst. Packets held in the queue stay charged to the sending socket, so a
// stalled consumer filled the send buffers of the nodes that sent across
// the link and blocked those nodes' sockets for every peer, the ones not
// behind the link too (a compose run saw every P-CSCF stop answering the
// BAC's probes at once). In its own process the consumer is scheduled by
// the kernel alone, at nice -10.
//
// The parent talks to it over pipes, one line each way:
//
//	child → parent  "ready <queue>"       the queue is bound (or "error <text>")
//	parent → child  "stats"               the child answers "stats <received> <released> <errors>"
//	parent closes stdin                   the child releases everything, answers "stopped <r> <r> <e>", exits
//
// The child ignores SIGINT and SIGHUP (a terminal's ^C reaches the parent,
// which heals in order) and stops on SIGTERM or when its stdin closes, so a
// parent that dies takes its delay lines with it; with no socket bound the
// rules' --queue-bypass lets packets through.

// envDelayLine carries the child's arguments (lineArgs as JSON).
const envDelayLine = "IMSLAB_NETFAULT_DELAY_LINE"

type lineArgs struct {
	NS     string        `json:"ns"`
	Delay  time.Duration `json:"delay"`
	Jitter time.Duration `json:"jitter"`
	Queue  uint16        `json:"queue"` // the first queue number to try
}

func init() {
	v := os.Getenv(envDelayLine)
	if v == "" {
		return
	}
	os.Exit(delayLineMain(v, os.Stdin, os.Stdout))
}

// delayLineMain is the child's main: it binds the queue, reports it, answers
// stats requests, and stops when in closes or on SIGTERM.
func delayLineMain(arg string, in io.Reader, out io.Writer) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	var a lineArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		fmt.Fprintf(out, "error %s: %v\n", envDelayLine, err)
		return 2
	}
	if a.Queue >= queueBase {
		nextQueue.Store(uint32(a.Queue - queueBase))
	}
	l, err := startLocalDelayLine(a.NS, a.Delay, a.Jitter)
	if err != nil {
		fmt.Fprintf(out, "error %s\n", oneLine(err.Error()))
		return 1
	}
	fmt.Fprintf(out, "ready %d\n", l.queue)
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	for stop := false; !stop; {
		select {
		case s, ok := <-lines:
			if !ok {
				stop = true
			} else if s == "stats" {
				st := l.stats()
				fmt.Fprintf(out, "stats %d %d %d\n", st.Received, st.Released, st.Errors)
			}
		case <-term:
			stop = true
		}
	}
	l.stop()
	st := l.stats()
	fmt.Fprintf(out, "stopped %d %d %d\n", st.Received, st.Released, st.Errors)
	return 0
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", "; ") }

// lineProc is the parent's handle on a delay line's process.
type lineProc struct {
	queue uint16
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // the child's answers; closed when its stdout closes
	done  chan struct{}

	mu   sync.Mutex
	last QueueStats // the last counters the child reported
}

// lineStartTimeout bounds the child's start: exec, binding the queue.
const lineStartTimeout = 15 * time.Second

// startDelayLine starts a delay line's process for the namespace behind
// nsPath and waits until it has bound its queue.
func startDelayLine(nsPath string, delay, jitter time.Duration) (*lineProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("delay line: this program's executable, to run the delay line in: %w", err)
	}
	arg, err := json.Marshal(lineArgs{NS: nsPath, Delay: delay, Jitter: jitter, Queue: allocQueue()})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	// One P: the child has one busy goroutine (the consumer, on its locked thread) and an idle reader of its stdin;
	// more Ps only add scheduler threads that wake and spin with every packet.
	cmd.Env = append(os.Environ(), envDelayLine+"="+string(arg), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	// Its own process group: a terminal's signals go to the parent, which heals in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("delay line: starting %s: %w", exe, err)
	}
	p := &lineProc{cmd: cmd, stdin: stdin, lines: make(chan string, 4), done: make(chan struct{})}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	fail := func(err error) (*lineProc, error) {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		<-p.done
		return nil, err
	}
	select {
	case s, ok := <-p.lines:
		var q uint16
		switch {
		case !ok:
			return fail(errors.New("delay line: its process exited before binding a queue (see its stderr)"))
		case strings.HasPrefix(s, "error "):
			return fail(fmt.Errorf("delay line: %s", strings.TrimPrefix(s, "error ")))
		default:
			if _, err := fmt.Sscanf(s, "ready %d", &q); err != nil {
				return fail(fmt.Errorf("delay line: unexpected first line %q from its process", s))
			}
		}
		p.queue = q
		p.last.Queue = q
		return p, nil
	case <-time.After(lineStartTimeout):
		return fail(fmt.Errorf("delay line: its process did not bind a queue within %s", lineStartTimeout))
	}
}

// parseCounts reads "<word> <received> <released> <errors>" into p.last.
func (p *lineProc) parseCounts(s, word string) bool {
	var st QueueStats
	if _, err := fmt.Sscanf(s, word+" %d %d %d", &st.Received, &st.Released, &st.Errors); err != nil {
		return false
	}
	st.Queue = p.queue
	p.last = st
	return true
}

// stats asks the child for its counters; once it has exited, the last ones.
func (p *lineProc) stats() QueueStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.stdin, "stats\n"); err != nil {
		return p.last
	}
	select {
	case s, ok := <-p.lines:
		if ok {
			p.parseCounts(s, "stats")
		}
	case <-time.After(5 * time.Second):
	}
	return p.last
}

// stop closes the child's stdin: it releases every held packet and what still
// arrives, reports its counters and exits. A child that does not exit within
// 10 s is killed (the queue goes with its socket; --queue-bypass lets packets
// through).
func (p *lineProc) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.stdin.Close()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s, ok := <-p.lines:
			if !ok {
				select {
				case <-p.done:
				case <-timeout:
					_ = p.cmd.Process.Kill()
					<-p.done
				}
				return
			}
			p.parseCounts(s, "stopped")
		case <-timeout:
			_ = p.cmd.Process.Kill()
			<-p.done
			return
		}
	}
}
