// Package obs is the testbed's observability glue: slog setup with the project's fixed attribute keys and the
// event recorder that every node writes one JSON line to per finished transaction or state change. Reports and
// checks read events, never log text.
package obs

import (
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

// Event is one event of the catalogue (catalogue.go): a type per kind, whose fields are the line's keys next to
// the envelope (ts, t_ns, node, kind). Only the catalogue's types are events.
type Event interface {
	Kind() string
	sealed()
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

// Emit records one event: {"ts": RFC3339Nano, "t_ns": unix nanoseconds, "node", "kind", the event's fields...},
// keys in sorted order, values encoded as encoding/json does. An event whose value cannot be encoded (a NaN) is
// not recorded.
func (r *Recorder) Emit(ev Event) {
	if r == nil || ev == nil {
		return
	}
	bp := lineBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 { // an outsized event's buffer is left to the collector
			lineBufs.Put(bp)
		}
	}()
	b, err := AppendEvent((*bp)[:0], r.now(), r.node, ev)
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
