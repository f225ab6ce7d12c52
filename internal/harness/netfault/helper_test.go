package netfault_test

// The test binary doubles as the traffic helper: started under
// `ip netns exec NS` with IMSLAB_NETFAULT_HELPER set, it runs one of the
// modes below inside that namespace instead of the specs.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

const helperEnv = "IMSLAB_NETFAULT_HELPER"

func runHelper(mode string, args []string) int {
	var err error
	switch mode {
	case "echo":
		err = helperEcho(args[0])
	case "probe":
		err = helperProbe(args)
	case "bulk":
		err = helperBulk(args)
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// helperEcho listens on addr (UDP), prints "ready", then for every datagram
// "TAG:..." prints "rx TAG LEN UNIXNANO" and echoes it unless TAG starts with
// "bulk".
func helperEcho(addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	buf := make([]byte, 65536)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return err
		}
		now := time.Now().UnixNano()
		tag, _, _ := strings.Cut(string(buf[:min(n, 64)]), ":")
		fmt.Fprintf(out, "rx %s %d %d\n", tag, n, now)
		out.Flush()
		if !strings.HasPrefix(tag, "bulk") {
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}
}

type probeResult struct {
	Sent  int     `json:"sent"`
	Recv  int     `json:"recv"`
	RTTus []int64 `json:"rtt_us"`
}

// helperProbe: TARGET TAG N INTERVAL WAIT — sends N datagrams "TAG:SEQ" every
// INTERVAL, counts distinct echoes until WAIT after the last send, prints a
// probeResult as JSON.
func helperProbe(a []string) error {
	target, tag := a[0], a[1]
	n, _ := strconv.Atoi(a[2])
	interval, _ := time.ParseDuration(a[3])
	wait, _ := time.ParseDuration(a[4])
	conn, err := net.ListenPacket("udp", ":0")
	if err != nil {
		return err
	}
	dst, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return err
	}
	sentAt := make([]time.Time, n)
	got := make(map[int]bool)
	res := probeResult{Sent: n}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			k, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			f := strings.Split(string(buf[:k]), ":")
			if len(f) < 2 || f[0] != tag {
				continue
			}
			seq, err := strconv.Atoi(f[1])
			if err != nil || seq < 0 || seq >= n || got[seq] {
				continue
			}
			got[seq] = true
			res.Recv++
			res.RTTus = append(res.RTTus, time.Since(sentAt[seq]).Microseconds())
		}
	}()
	next := time.Now()
	for i := 0; i < n; i++ {
		sentAt[i] = time.Now()
		_, _ = conn.WriteTo([]byte(fmt.Sprintf("%s:%d:", tag, i)), dst)
		next = next.Add(interval)
		time.Sleep(time.Until(next))
	}
	time.Sleep(wait)
	conn.Close()
	<-done
	return json.NewEncoder(os.Stdout).Encode(res)
}

// helperBulk: TARGET TAG BITS_PER_SECOND DURATION SIZE — sends SIZE-byte
// datagrams paced at the given rate for DURATION.
func helperBulk(a []string) error {
	target, tag := a[0], a[1]
	bps, _ := strconv.ParseFloat(a[2], 64)
	dur, _ := time.ParseDuration(a[3])
	size, _ := strconv.Atoi(a[4])
	conn, err := net.Dial("udp", target)
	if err != nil {
		return err
	}
	defer conn.Close()
	payload := make([]byte, size)
	copy(payload, tag+":")
	gap := time.Duration(float64(size*8) / bps * float64(time.Second))
	start := time.Now()
	next := start
	sent := 0
	for time.Since(start) < dur {
		_, _ = conn.Write(payload)
		sent++
		next = next.Add(gap)
		time.Sleep(time.Until(next))
	}
	fmt.Println(sent)
	return nil
}
