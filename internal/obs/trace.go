package obs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// TraceLine is one recorded message (docs/architecture.md, "Message trace").
type TraceLine struct {
	TNs   int64  `json:"t_ns"`
	Node  string `json:"node"`
	Proto string `json:"proto"` // "sip" or "diameter"
	Dir   string `json:"dir"`   // "in" or "out"
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Data  []byte `json:"data"` // base64 in JSON
}

// Tracer appends every message a node sends or receives to a JSON-lines file. Writes are buffered and flushed
// every 100 ms (and on Close): a node killed with SIGKILL loses at most its last 100 ms of trace. A nil *Tracer
// records nothing.
type Tracer struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	node string
	stop chan struct{}
	done chan struct{}
}

// OpenTracer appends to path ("" = no tracing).
func OpenTracer(path, node string) (*Tracer, error) {
	if path == "" {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { // e.g. a fresh container volume
		return nil, fmt.Errorf("trace file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trace file: %w", err)
	}
	t := &Tracer{f: f, w: bufio.NewWriterSize(f, 64<<10), node: node, stop: make(chan struct{}), done: make(chan struct{})}
	go t.flusher()
	return t, nil
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
			_ = t.w.Flush()
			t.mu.Unlock()
		}
	}
}

// Record appends one message. data is copied.
func (t *Tracer) Record(proto, dir, src, dst string, data []byte) {
	if t == nil {
		return
	}
	b, err := json.Marshal(TraceLine{TNs: time.Now().UnixNano(), Node: t.node, Proto: proto, Dir: dir, Src: src, Dst: dst, Data: data})
	if err != nil {
		return
	}
	t.mu.Lock()
	_, _ = t.w.Write(b)
	_ = t.w.WriteByte('\n')
	t.mu.Unlock()
}

// Close flushes and closes the file.
func (t *Tracer) Close() error {
	if t == nil {
		return nil
	}
	close(t.stop)
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.w.Flush()
	return t.f.Close()
}
