package obs

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// TraceFile is the name of a run's one trace: every node's segments merged, gzip-compressed (Wireshark and
// tshark open it as it is).
const TraceFile = "trace.pcapng.gz"

// wrappedComment marks, in the merged trace, the interface of a node whose trace wrapped.
const wrappedComment = "imslab: trace wrapped (oldest segments dropped to stay within the budget)"

// MergeTrace merges every segment of a run's trace directory into one gzip-compressed pcapng file at out, with
// one interface per node (its name) and the packets in time order, byte for byte as the nodes captured them
// (direction in the SLL header, each node's own TCP sequence numbers). A node whose trace wrapped keeps that
// note as its interface's comment. It returns the packets written and the warnings of torn segments; with no
// segment it writes nothing and returns 0.
func MergeTrace(dir, out string) (packets int, warnings []string, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.pcapng"))
	if err != nil {
		return 0, nil, fmt.Errorf("trace: %w", err)
	}
	if len(paths) == 0 {
		return 0, nil, nil
	}
	sort.Strings(paths)
	_, wrapped, _, err := ReadTraceDir(dir)
	if err != nil {
		return 0, nil, err
	}
	type packet struct {
		ci   gopacket.CaptureInfo
		node string
		data []byte
	}
	var pkts []packet
	var nodes []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, nil, fmt.Errorf("trace: %w", err)
		}
		r, err := pcapgo.NewNgReader(bufio.NewReaderSize(f, 256<<10), pcapgo.DefaultNgReaderOptions)
		if err != nil {
			f.Close()
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				continue // killed before the header reached the disk
			}
			return 0, nil, fmt.Errorf("trace: %s: %w", p, err)
		}
		for {
			data, ci, err := r.ReadPacketData()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				warnings = append(warnings, fmt.Sprintf("%s ends in a torn block (node killed while writing)", filepath.Base(p)))
				break
			}
			node := ""
			if intf, err := r.Interface(ci.InterfaceIndex); err == nil {
				node = intf.Name
			}
			if !slices.Contains(nodes, node) {
				nodes = append(nodes, node)
			}
			pkts = append(pkts, packet{ci: ci, node: node, data: slices.Clone(data)})
		}
		f.Close()
	}
	slices.SortStableFunc(pkts, func(a, b packet) int { return a.ci.Timestamp.Compare(b.ci.Timestamp) })
	slices.Sort(nodes)

	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600) // the trace may hold credentials
	if err != nil {
		return 0, nil, fmt.Errorf("trace: %w", err)
	}
	defer os.Remove(tmp) // gone after the rename
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	bw := bufio.NewWriterSize(zw, 256<<10)
	intf := func(node string) pcapgo.NgInterface {
		i := pcapgo.NgInterface{Name: node, LinkType: layers.LinkTypeLinuxSLL, TimestampResolution: 9}
		for _, w := range wrapped {
			if filepath.Base(w) == node || strings.HasSuffix(w, "/"+node) {
				i.Comment = wrappedComment
			}
		}
		return i
	}
	w, err := pcapgo.NewNgWriterInterface(bw, intf(nodes[0]), pcapgo.NgWriterOptions{
		SectionInfo: pcapgo.NgSectionInfo{Application: "imslab", OS: runtime.GOOS, Hardware: runtime.GOARCH}})
	if err != nil {
		f.Close()
		return 0, nil, fmt.Errorf("trace: %w", err)
	}
	ids := map[string]int{nodes[0]: 0}
	for _, n := range nodes[1:] {
		id, err := w.AddInterface(intf(n))
		if err != nil {
			f.Close()
			return 0, nil, fmt.Errorf("trace: %w", err)
		}
		ids[n] = id
	}
	for _, p := range pkts {
		ci := p.ci
		ci.InterfaceIndex = ids[p.node]
		if err := w.WritePacket(ci, p.data); err != nil {
			f.Close()
			return 0, nil, fmt.Errorf("trace: %w", err)
		}
	}
	err = errors.Join(w.Flush(), bw.Flush(), zw.Close(), f.Close())
	if err != nil {
		return 0, nil, fmt.Errorf("trace: %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return 0, nil, fmt.Errorf("trace: %w", err)
	}
	return len(pkts), warnings, nil
}

// ReadTraceFile reads a merged trace (MergeTrace; gzip-compressed or not) and returns its messages and the nodes
// whose trace wrapped before the merge.
func ReadTraceFile(path string) (lines []TraceLine, wrapped []string, skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	var in io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("trace: %s: %w", path, err)
		}
		defer zr.Close()
		in = bufio.NewReaderSize(zr, 256<<10)
	}
	r, err := pcapgo.NewNgReader(in, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("trace: %s: %w", path, err)
	}
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return lines, wrapped, skipped, fmt.Errorf("trace: %s: %w", path, err)
		}
		node := ""
		if intf, err := r.Interface(ci.InterfaceIndex); err == nil {
			node = intf.Name
			if intf.Comment == wrappedComment && !slices.Contains(wrapped, node) {
				wrapped = append(wrapped, node)
			}
		}
		l, ok := parseFrame(data)
		if !ok {
			skipped++
			continue
		}
		l.TNs, l.Node = ci.Timestamp.UnixNano(), node
		lines = append(lines, l)
	}
	sort.Strings(wrapped)
	return lines, wrapped, skipped, nil
}
