package obs

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// DefaultTraceMaxBytes is a node's trace budget when its configuration gives none: the node keeps at most this
// many bytes of trace files (its newest messages) on disk.
const DefaultTraceMaxBytes int64 = 128 << 20

// TraceLine is one recorded message (docs/architecture.md, "Message trace").
type TraceLine struct {
	TNs   int64  `json:"t_ns"`
	Node  string `json:"node"`
	Proto string `json:"proto"` // "sip" or "diameter"
	Dir   string `json:"dir"`   // "in" or "out"
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Data  []byte `json:"data"`
}

// Tracer records every message a node sends or receives as a packet of a pcapng file that Wireshark and tshark
// open directly: one interface named after the node, link type Linux cooked capture (SLL) whose packet type says
// the direction ("sent by us" = out, "unicast to us" = in), then IPv4/IPv6 and UDP (SIP) or TCP (Diameter, with
// sequence numbers per direction so that Wireshark reassembles the stream; no handshake). Checksums are left 0.
//
// The trace is bounded: files are segments trace/<base>.<NNN>.pcapng; when the current segment passes an eighth
// of the budget a new one is started and the oldest segments of the node are deleted until the node's files fit
// the budget again. A run's report notices the missing first segments and says the trace wrapped. A process started
// again (failback) starts a new segment, so no file ever holds a torn block in its middle.
//
// Writes are buffered and flushed every 100 ms (and on Close): a node killed with SIGKILL loses at most its last
// 100 ms of trace, and its last segment may end in a torn block, which readers skip. A nil *Tracer records nothing.
type Tracer struct {
	mu       sync.Mutex
	prefix   string // path without ".NNN.pcapng"
	node     string
	maxBytes int64
	seg      int
	f        *os.File
	bw       *bufio.Writer
	w        *pcapgo.NgWriter
	counter  *countWriter
	seq      map[[2]netip.AddrPort]uint32
	buf      []byte
	err      error // the first write error; tracing stops after it
	stop     chan struct{}
	done     chan struct{}
}

// OpenTracer records to segments next to path ("" = no tracing): path's extension is dropped, so
// trace/pcscf1.pcapng and the older trace/pcscf1.jsonl both give trace/pcscf1.001.pcapng, … maxBytes bounds the
// node's trace files (0: DefaultTraceMaxBytes; negative: unbounded).
func OpenTracer(path, node string, maxBytes int64) (*Tracer, error) {
	if path == "" {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { // e.g. a fresh container volume
		return nil, fmt.Errorf("trace file: %w", err)
	}
	if maxBytes == 0 {
		maxBytes = DefaultTraceMaxBytes
	}
	prefix := strings.TrimSuffix(strings.TrimSuffix(path, ".pcapng"), ".jsonl")
	t := &Tracer{prefix: prefix, node: node, maxBytes: maxBytes, seq: map[[2]netip.AddrPort]uint32{},
		stop: make(chan struct{}), done: make(chan struct{})}
	segs, err := TraceSegments(prefix)
	if err != nil {
		return nil, err
	}
	if len(segs) > 0 {
		t.seg = segs[len(segs)-1].N
	}
	if err := t.rotate(); err != nil {
		return nil, err
	}
	go t.flusher()
	return t, nil
}

// Segment is one trace file of a node.
type Segment struct {
	Path string
	N    int // its number: 1 for the first segment of a run
	Size int64
}

// TraceSegments returns the segments of prefix (trace/<base>) in order.
func TraceSegments(prefix string) ([]Segment, error) {
	paths, err := filepath.Glob(prefix + ".*.pcapng")
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	var out []Segment
	for _, p := range paths {
		num := strings.TrimSuffix(strings.TrimPrefix(p, prefix+"."), ".pcapng")
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 {
			continue // another node's prefix (pcscf1 vs pcscf1-access) or a foreign file
		}
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		out = append(out, Segment{Path: p, N: n, Size: st.Size()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	return out, nil
}

// rotate closes the current segment, starts the next and deletes the oldest segments beyond the budget. Called
// with mu held (or before the flusher starts).
func (t *Tracer) rotate() error {
	if t.f != nil {
		_ = t.w.Flush() // the pcapng writer buffers too
		_ = t.bw.Flush()
		_ = t.f.Close()
	}
	t.seg++
	path := fmt.Sprintf("%s.%03d.pcapng", t.prefix, t.seg)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("trace file: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	cw := &countWriter{w: bw}
	w, err := pcapgo.NewNgWriterInterface(cw, pcapgo.NgInterface{
		Name: t.node, Description: "imslab message trace of " + t.node, OS: runtime.GOOS,
		LinkType: layers.LinkTypeLinuxSLL, TimestampResolution: 9, SnapLength: 0,
	}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "imslab", OS: runtime.GOOS, Hardware: runtime.GOARCH}})
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("trace file: %w", err)
	}
	t.f, t.bw, t.w = f, bw, w
	t.counter = cw
	// TCP sequence numbers restart with the segment (Wireshark treats each file alone).
	clear(t.seq)
	if t.maxBytes > 0 {
		t.prune(path)
	}
	return nil
}

// segmentBytes is the size at which a segment is closed: an eighth of the budget, so that deleting the oldest
// segment gives up at most an eighth of the node's trace.
func (t *Tracer) segmentBytes() int64 { return max(t.maxBytes/8, 4<<10) }

// prune deletes the oldest segments (not current) while the node's files exceed the budget minus the room the
// current segment may still take.
func (t *Tracer) prune(current string) {
	segs, err := TraceSegments(t.prefix)
	if err != nil {
		return
	}
	var total int64
	for _, s := range segs {
		if s.Path != current {
			total += s.Size
		}
	}
	for _, s := range segs {
		if total+t.segmentBytes() <= t.maxBytes || s.Path == current {
			break
		}
		if os.Remove(s.Path) == nil {
			total -= s.Size
		}
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

func (t *Tracer) flusher() {
	defer close(t.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.mu.Lock()
			if t.w != nil {
				_ = t.w.Flush()
				_ = t.bw.Flush()
			}
			t.mu.Unlock()
		}
	}
}

// Record appends one message; src and dst are "ip:port". A message whose addresses do not parse is dropped.
func (t *Tracer) Record(proto, dir, src, dst string, data []byte) {
	if t == nil {
		return
	}
	s, err1 := netip.ParseAddrPort(src)
	d, err2 := netip.ParseAddrPort(dst)
	if err1 != nil || err2 != nil {
		return
	}
	t.RecordAddr(proto, dir, s, d, data)
}

// RecordAddr appends one message (proto "sip" over UDP or "diameter" over TCP; dir "in" or "out").
func (t *Tracer) RecordAddr(proto, dir string, src, dst netip.AddrPort, data []byte) {
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil || t.w == nil {
		return
	}
	if t.maxBytes > 0 && t.counter.n >= t.segmentBytes() {
		if err := t.rotate(); err != nil {
			t.err = err
			return
		}
	}
	t.buf = frame(t.buf[:0], proto, dir, src, dst, data, t.seq)
	ci := gopacket.CaptureInfo{Timestamp: now, CaptureLength: len(t.buf), Length: len(t.buf)}
	if err := t.w.WritePacket(ci, t.buf); err != nil {
		t.err = err
	}
}

// Close flushes and closes the current segment.
func (t *Tracer) Close() error {
	if t == nil {
		return nil
	}
	close(t.stop)
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w == nil {
		return nil
	}
	_ = t.w.Flush()
	_ = t.bw.Flush()
	err := t.f.Close()
	t.w = nil
	return err
}

// Linux cooked capture (SLL) packet types.
const (
	sllHost     = 0 // to us: "in"
	sllOutgoing = 4 // sent by us: "out"
)

// frame appends the SLL, IP and UDP/TCP headers and the payload of one message to b. seq holds the next TCP
// sequence number per direction.
func frame(b []byte, proto, dir string, src, dst netip.AddrPort, data []byte, seq map[[2]netip.AddrPort]uint32) []byte {
	pt := uint16(sllHost)
	if dir == "out" {
		pt = sllOutgoing
	}
	v6 := !src.Addr().Is4() || !dst.Addr().Is4()
	etherType := uint16(0x0800)
	if v6 {
		etherType = 0x86DD
	}
	// SLL: packet type, ARPHRD_NONE-ish hatype (0xFFFE = none), address length 0, 8 address bytes, protocol.
	b = binary.BigEndian.AppendUint16(b, pt)
	b = binary.BigEndian.AppendUint16(b, 0xFFFE)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, etherType)

	ipProto, l4 := byte(17), 8
	if proto == "diameter" {
		ipProto, l4 = 6, 20
	}
	payload := l4 + len(data)
	if v6 {
		b = append(b, 0x60, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(payload))
		b = append(b, ipProto, 64)
		s, d := src.Addr().As16(), dst.Addr().As16()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
	} else {
		b = append(b, 0x45, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(min(20+payload, 0xFFFF)))
		b = append(b, 0, 0, 0x40, 0) // id 0, don't fragment
		b = append(b, 64, ipProto, 0, 0)
		s, d := src.Addr().As4(), dst.Addr().As4()
		b = append(b, s[:]...)
		b = append(b, d[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	if proto == "diameter" {
		fw, bw := [2]netip.AddrPort{src, dst}, [2]netip.AddrPort{dst, src}
		if _, ok := seq[fw]; !ok {
			seq[fw] = 1
		}
		if _, ok := seq[bw]; !ok {
			seq[bw] = 1
		}
		b = binary.BigEndian.AppendUint32(b, seq[fw])
		b = binary.BigEndian.AppendUint32(b, seq[bw])
		seq[fw] += uint32(len(data))
		b = append(b, 5<<4, 0x18) // data offset 5 words; PSH|ACK
		b = binary.BigEndian.AppendUint16(b, 65535)
		b = append(b, 0, 0, 0, 0) // checksum, urgent pointer
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(min(payload, 0xFFFF)))
		b = append(b, 0, 0) // checksum
	}
	return append(b, data...)
}

// ErrTornTrace is returned with the lines read so far when a segment ends in the middle of a block (a node killed
// while writing).
var ErrTornTrace = errors.New("trace segment ends in a torn block")

// ReadTrace reads one pcapng segment written by a Tracer. Messages it cannot decode are skipped and counted.
func ReadTrace(path string) (lines []TraceLine, skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(bufio.NewReaderSize(f, 256<<10), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, 0, nil // killed before the header reached the disk
		}
		return nil, 0, fmt.Errorf("trace: %s: %w", path, err)
	}
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return lines, skipped, nil
		}
		if err != nil {
			return lines, skipped, fmt.Errorf("%w: %s: %v", ErrTornTrace, path, err)
		}
		node := ""
		if intf, err := r.Interface(ci.InterfaceIndex); err == nil {
			node = intf.Name
		}
		l, ok := parseFrame(data)
		if !ok {
			skipped++
			continue
		}
		l.TNs, l.Node = ci.Timestamp.UnixNano(), node
		lines = append(lines, l)
	}
}

// parseFrame decodes what frame wrote (a copy of the payload).
func parseFrame(b []byte) (TraceLine, bool) {
	var l TraceLine
	if len(b) < 16 {
		return l, false
	}
	switch binary.BigEndian.Uint16(b[0:2]) {
	case sllHost:
		l.Dir = "in"
	case sllOutgoing:
		l.Dir = "out"
	default:
		return l, false
	}
	et := binary.BigEndian.Uint16(b[14:16])
	b = b[16:]
	var src, dst netip.Addr
	var proto byte
	switch et {
	case 0x0800:
		if len(b) < 20 || b[0]>>4 != 4 {
			return l, false
		}
		ihl := int(b[0]&0xF) * 4
		if ihl < 20 || len(b) < ihl {
			return l, false
		}
		proto = b[9]
		src = netip.AddrFrom4([4]byte(b[12:16]))
		dst = netip.AddrFrom4([4]byte(b[16:20]))
		b = b[ihl:]
	case 0x86DD:
		if len(b) < 40 {
			return l, false
		}
		proto = b[6]
		src = netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		dst = netip.AddrFrom16([16]byte(b[24:40])).Unmap()
		b = b[40:]
	default:
		return l, false
	}
	var hdr int
	switch proto {
	case 17:
		l.Proto, hdr = "sip", 8
	case 6:
		if len(b) < 20 {
			return l, false
		}
		l.Proto, hdr = "diameter", int(b[12]>>4)*4
	default:
		return l, false
	}
	if len(b) < hdr || hdr < 8 {
		return l, false
	}
	sp, dp := binary.BigEndian.Uint16(b[0:2]), binary.BigEndian.Uint16(b[2:4])
	l.Src = netip.AddrPortFrom(src, sp).String()
	l.Dst = netip.AddrPortFrom(dst, dp).String()
	l.Data = append([]byte(nil), b[hdr:]...)
	return l, true
}

// ReadTraceDir reads every segment in dir (a run's trace/ directory), in file order, and reports the nodes whose
// first segment is gone (their trace wrapped: the oldest messages were dropped to stay within the budget) and the
// segments that ended in a torn block.
func ReadTraceDir(dir string) (lines []TraceLine, wrapped []string, warnings []string, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.pcapng"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("trace: %w", err)
	}
	sort.Strings(paths)
	first := map[string]int{}
	for _, p := range paths {
		base := filepath.Base(p)
		stem := strings.TrimSuffix(base, ".pcapng")
		i := strings.LastIndexByte(stem, '.')
		if i < 0 {
			continue
		}
		n, err := strconv.Atoi(stem[i+1:])
		if err != nil {
			continue
		}
		if f, ok := first[stem[:i]]; !ok || n < f {
			first[stem[:i]] = n
		}
		ls, skipped, err := ReadTrace(p)
		switch {
		case errors.Is(err, ErrTornTrace):
			warnings = append(warnings, fmt.Sprintf("%s ends in a torn block (node killed while writing); %d messages read", base, len(ls)))
		case err != nil:
			return nil, nil, nil, err
		}
		if skipped > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %d packets not decoded", base, skipped))
		}
		lines = append(lines, ls...)
	}
	for prefix, n := range first {
		if n > 1 {
			wrapped = append(wrapped, prefix)
		}
	}
	sort.Strings(wrapped)
	return lines, wrapped, warnings, nil
}

// DirSize returns the bytes of the regular files under dir.
func DirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: not counted
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total, err
}
