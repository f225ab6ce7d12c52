// Package obs is the testbed's observability glue: slog setup with the project's fixed attribute keys and the
// event recorder that every node writes one JSON line to per finished transaction or state change. Reports and
// checks read events, never log text.
package obs

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// LogConfig selects the log format and level.
type LogConfig struct {
	Format string // "text" (default) or "json"
	Level  string // "debug", "info" (default), "warn", "error"
}

// NewLogger returns a logger that writes to w and tags every line with the node name.
func NewLogger(w io.Writer, cfg LogConfig, node string) (*slog.Logger, error) {
	var lvl slog.Level
	switch strings.ToLower(cfg.Level) {
	case "", "info":
		lvl = slog.LevelInfo
	case "debug":
		lvl = slog.LevelDebug
	case "warn", "warning":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	default:
		return nil, fmt.Errorf("log level %q: must be debug, info, warn or error", cfg.Level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch strings.ToLower(cfg.Format) {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: must be text or json", cfg.Format)
	}
	return slog.New(h).With("node", node), nil
}

// Event is one line of an events file. Fields are flattened next to the fixed keys.
type Event struct {
	Time   time.Time
	Node   string
	Kind   string
	Fields map[string]any
}

// MarshalJSON writes {"ts": RFC3339Nano, "t_ns": unix nanoseconds, "node", "kind", fields...}.
func (e Event) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(e.Fields)+4)
	for k, v := range e.Fields {
		m[k] = v
	}
	m["ts"] = e.Time.UTC().Format(time.RFC3339Nano)
	m["t_ns"] = e.Time.UnixNano()
	m["node"] = e.Node
	m["kind"] = e.Kind
	return json.Marshal(m)
}

// Recorder appends events as JSON lines. Each event is written with one write call and no user-space buffering,
// so a node killed with SIGKILL loses no event it had recorded. A nil *Recorder records nothing.
type Recorder struct {
	mu   sync.Mutex
	w    io.Writer
	c    io.Closer
	node string
	now  func() time.Time
}

// OpenRecorder appends to the events file at path ("" records nothing; "-" writes to stdout).
func OpenRecorder(path, node string) (*Recorder, error) {
	switch path {
	case "":
		return nil, nil
	case "-":
		return &Recorder{w: os.Stdout, node: node, now: time.Now}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { // e.g. a fresh container volume
		return nil, fmt.Errorf("events file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("events file: %w", err)
	}
	return &Recorder{w: f, c: f, node: node, now: time.Now}, nil
}

// NewRecorder writes events to w.
func NewRecorder(w io.Writer, node string) *Recorder {
	return &Recorder{w: w, node: node, now: time.Now}
}

// Emit records one event.
func (r *Recorder) Emit(kind string, fields map[string]any) {
	if r == nil {
		return
	}
	bp := lineBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 { // an outsized event's buffer is left to the collector
			lineBufs.Put(bp)
		}
	}()
	b, err := appendEvent((*bp)[:0], r.now(), r.node, kind, fields)
	if err != nil {
		return
	}
	b = append(b, '\n')
	*bp = b
	r.mu.Lock()
	_, _ = r.w.Write(b)
	r.mu.Unlock()
}

// Close closes the underlying file, if the recorder opened one.
func (r *Recorder) Close() error {
	if r == nil || r.c == nil {
		return nil
	}
	return r.c.Close()
}
