package obs

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
)

// Envelope is the part of every event line that is not the kind's own: when, who and what kind.
type Envelope struct {
	TS   string `json:"ts"`   // RFC 3339 with nanoseconds, UTC
	TNs  int64  `json:"t_ns"` // Unix nanoseconds (the time base of the run's files)
	Node string `json:"node"` // the node that wrote it ("lab" for the lab, "ue" for the phones)
	Kind string `json:"kind"` // the event's kind: which type of the catalogue the other keys are
}

// ErrUnknownKind is wrapped by DecodeEvent's error for a line whose kind is not in the catalogue; ErrMalformed
// by the error for a line that is no event (not JSON, no kind, a field of the wrong type).
var (
	ErrUnknownKind = errors.New("unknown event kind")
	ErrMalformed   = errors.New("malformed event")
)

// DecodeEvent reads one event line: the envelope, then the kind's type of the catalogue (a value, e.g. SIPTx).
// Keys the type does not have are ignored; a key of the wrong JSON type is an error.
func DecodeEvent(line []byte) (Envelope, Event, error) {
	var env Envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return env, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if env.Kind == "" {
		return env, nil, fmt.Errorf("%w: no kind", ErrMalformed)
	}
	k, ok := byKind[env.Kind]
	if !ok {
		return env, nil, fmt.Errorf("%w %q", ErrUnknownKind, env.Kind)
	}
	p := reflect.New(reflect.TypeOf(k.ev))
	if err := json.Unmarshal(line, p.Interface()); err != nil {
		return env, nil, fmt.Errorf("%w: kind %s: %v", ErrMalformed, env.Kind, err)
	}
	return env, p.Elem().Interface().(Event), nil
}

// KindInfo describes one kind of the catalogue.
type KindInfo struct {
	Kind   string
	Type   reflect.Type // the event's Go type (a struct)
	Legacy bool         // no node writes it any more; runs recorded before have it
}

// Kinds returns the catalogue, sorted by kind.
func Kinds() []KindInfo {
	out := make([]KindInfo, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, KindInfo{Kind: k.ev.Kind(), Type: reflect.TypeOf(k.ev), Legacy: k.legacy})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
