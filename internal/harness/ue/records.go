package ue

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Record is one line of the records file: one per registration procedure (REGISTER, and the challenged
// REGISTER after a 401) and one per call, from the caller's side ("mo") and from the callee's ("mt").
// The KPIs of SPEC §6 are computed from these lines and the nodes' events.
type Record struct {
	Type   string `json:"type"`    // "register" or "call"
	IMPU   string `json:"impu"`    // the phone's public identity (the callee's for "mt")
	CallID string `json:"call_id"` // SIP Call-ID
	Start  string `json:"start"`   // RFC 3339 time (nanoseconds) the procedure started
	TNs    int64  `json:"t_ns"`    // the same instant, Unix nanoseconds
	// Result is "ok" or the failure: the final status code ("403", "487", …), "timeout" (no final answer
	// in time; for calls the caller then CANCELs), "transport", "aborted" (shutdown) or "error".
	Result string `json:"result"`
	Status int    `json:"status"` // final status code received or sent (0 = none)
	// RetryAfterS is the Retry-After of a 503 the phone got (seconds; 0 = none): the network shed the request
	// and told the phone when to come back.
	RetryAfterS int `json:"retry_after_s,omitempty"`

	// Registrations.
	Kind    string `json:"kind,omitempty"`    // "initial", "refresh" or "deregister"
	Expires int    `json:"expires,omitempty"` // registration period granted, seconds

	// Calls.
	Direction string   `json:"direction,omitempty"` // "mo" (this phone called) or "mt" (this phone was called)
	From      string   `json:"from,omitempty"`      // caller (mt)
	To        string   `json:"to,omitempty"`        // callee
	Setup180  *float64 `json:"setup_ms_180,omitempty"`
	Setup200  *float64 `json:"setup_ms_200,omitempty"`
	// DurationMs is, for an answered call, the time from the 200 OK to the end of the BYE transaction; for a
	// failed call or a registration, the time from the first request to the final answer (or giving up).
	DurationMs float64 `json:"duration_ms"`
	ByeStatus  int     `json:"bye_status,omitempty"` // final answer to the BYE this phone sent (0 = none)
	ByeResult  string  `json:"bye_result,omitempty"` // "ok" or why the BYE failed
	// Ended says how an answered call ended: "local" (this phone hung up), "remote", "shutdown", or "cut" (its
	// session could not be kept up: Config.SessionExpires); CutNs is when this phone noticed (Unix ns), and
	// RefreshResult what the failed refresh got ("timeout", "408", …; "expired": the callee heard none in time).
	Ended         string `json:"ended,omitempty"`
	CutNs         int64  `json:"cut_ns,omitempty"`
	RefreshResult string `json:"refresh_result,omitempty"`
	// Refreshes counts the caller's successful session refreshes (UPDATE); LastRefreshNs is the last one's answer.
	Refreshes     int   `json:"refreshes,omitempty"`
	LastRefreshNs int64 `json:"last_refresh_ns,omitempty"`

	// Where it went when known: the host names found in Record-Route, Via, Path or Service-Route.
	PCSCF string `json:"pcscf,omitempty"`
	SCSCF string `json:"scscf,omitempty"`

	// Probe marks a reachability probe (Config.Reachability), not the users' own traffic: "mt" (a prober
	// called ProbeUser), "mo" (ProbeUser called a prober), or "prober" (a prober phone's registration). Both
	// legs of a probe call carry it; ProbeUser is set on the caller's record.
	Probe     string `json:"probe,omitempty"`
	ProbeUser string `json:"probe_user,omitempty"`
}

func stamp(r *Record, start time.Time) {
	r.Start = start.UTC().Format(time.RFC3339Nano)
	r.TNs = start.UnixNano()
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func msp(d time.Duration) *float64 {
	v := ms(d)
	return &v
}

// recordWriter appends records as JSON lines, each with one write call and no user-space buffering, so a
// process killed with SIGKILL loses no line it had written. A nil *recordWriter writes nothing.
type recordWriter struct {
	mu sync.Mutex
	w  io.Writer
	c  io.Closer
}

func openRecords(path string) (*recordWriter, error) {
	switch path {
	case "":
		return nil, nil
	case "-":
		return &recordWriter{w: os.Stdout}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { // e.g. a fresh container volume
		return nil, fmt.Errorf("ue: records file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ue: records file: %w", err)
	}
	return &recordWriter{w: f, c: f}, nil
}

func (r *recordWriter) write(rec *Record) {
	if r == nil {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	b = append(b, '\n')
	r.mu.Lock()
	_, _ = r.w.Write(b)
	r.mu.Unlock()
}

func (r *recordWriter) close() error {
	if r == nil || r.c == nil {
		return nil
	}
	return r.c.Close()
}
