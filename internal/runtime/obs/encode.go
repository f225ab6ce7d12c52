package obs

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// AppendEvent appends the JSON line of ev (without the newline) to dst: the envelope keys ts (RFC 3339 with
// nanoseconds, UTC), t_ns (Unix nanoseconds), node and kind, and the event's fields, all keys in sorted order and
// every value as encoding/json writes it (strings HTML-escaped, its default). This is byte for byte what the
// recorder wrote when events were maps (json.Marshal of the map), so old and new lines read the same. Strings,
// integers, booleans, floats and pointers to them are written here from a per-type plan made once; any other
// value (slices, structs) through json.Marshal.
func AppendEvent(dst []byte, t time.Time, node string, ev Event) ([]byte, error) {
	v := reflect.ValueOf(ev)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	p := plans[v.Type()]
	if p == nil {
		return dst, fmt.Errorf("event %T: not in the catalogue", ev)
	}
	dst = append(dst, '{')
	first := true
	for i := range p.fields {
		f := &p.fields[i]
		var fv reflect.Value
		if f.env == envNone {
			fv = v.Field(f.index)
			if f.omitEmpty && isEmptyValue(fv) {
				continue
			}
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, f.key...)
		switch f.env {
		case envTS:
			dst = append(dst, '"')
			dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
			dst = append(dst, '"')
			continue
		case envTNs:
			dst = strconv.AppendInt(dst, t.UnixNano(), 10)
			continue
		case envNode:
			dst = appendJSONString(dst, node)
			continue
		case envKind:
			dst = appendJSONString(dst, ev.Kind())
			continue
		}
		var err error
		if dst, err = appendValue(dst, fv, f.direct); err != nil {
			return dst, fmt.Errorf("event %s, field %s: %w", ev.Kind(), f.name, err)
		}
	}
	return append(dst, '}'), nil
}

const (
	envNone = iota
	envTS
	envTNs
	envNode
	envKind
)

// plan is how a catalogue type is written: its fields and the envelope's, in key order.
type plan struct {
	fields []planField
}

type planField struct {
	name      string
	key       []byte // "name":
	env       int    // envNone for a field of the type
	index     int
	omitEmpty bool
	direct    bool // written here (a string, number or bool, or a pointer to one), not by json.Marshal
}

var (
	plans   = map[reflect.Type]*plan{} // read-only after init
	byKind  = map[string]kindSpec{}
	envKeys = map[string]int{"ts": envTS, "t_ns": envTNs, "node": envNode, "kind": envKind}
)

// kindSpec is one entry of the catalogue.
type kindSpec struct {
	ev     Event
	legacy bool // no node writes it any more; old runs have it
}

func init() {
	for _, k := range kinds {
		t := reflect.TypeOf(k.ev)
		if _, dup := byKind[k.ev.Kind()]; dup {
			panic("obs: event kind " + k.ev.Kind() + " twice in the catalogue")
		}
		byKind[k.ev.Kind()] = k
		plans[t] = makePlan(t)
	}
}

// makePlan reads t's exported fields and their json tags as encoding/json does (a field tagged "-" is left out,
// an untagged one is named as in Go). A field named like an envelope key is a mistake in the catalogue.
func makePlan(t reflect.Type) *plan {
	p := &plan{}
	for name, env := range envKeys {
		p.fields = append(p.fields, planField{name: name, env: env})
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		if _, ok := envKeys[name]; ok {
			panic("obs: event " + t.Name() + ": field " + name + " is an envelope key")
		}
		p.fields = append(p.fields, planField{name: name, index: i,
			omitEmpty: slices.Contains(strings.Split(opts, ","), "omitempty"), direct: isDirect(sf.Type)})
	}
	slices.SortFunc(p.fields, func(a, b planField) int { return strings.Compare(a.name, b.name) })
	for i := range p.fields {
		f := &p.fields[i]
		f.key = append(appendJSONString(nil, f.name), ':')
	}
	return p
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func isDirect(t reflect.Type) bool {
	if t.Implements(jsonMarshaler) || t.Implements(textMarshaler) {
		return false
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	case reflect.Pointer:
		return isDirect(t.Elem())
	}
	return false
}

func appendValue(dst []byte, v reflect.Value, direct bool) ([]byte, error) {
	if !direct {
		b, err := json.Marshal(v.Interface())
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
	switch v.Kind() {
	case reflect.String:
		return appendJSONString(dst, v.String()), nil
	case reflect.Bool:
		return strconv.AppendBool(dst, v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.AppendUint(dst, v.Uint(), 10), nil
	case reflect.Float32:
		return appendFloat(dst, v.Float(), 32)
	case reflect.Float64:
		return appendFloat(dst, v.Float(), 64)
	case reflect.Pointer:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		return appendValue(dst, v.Elem(), true)
	}
	return dst, fmt.Errorf("cannot encode %s", v.Type())
}

// appendFloat is encoding/json's float encoding: format 'f', or 'e' for magnitudes below 1e-6 or from 1e21 on,
// with a two-digit negative exponent shortened (1e-07 → 1e-7); NaN and infinities are an error.
func appendFloat(dst []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, fmt.Errorf("unsupported value: %s", strconv.FormatFloat(f, 'g', -1, bits))
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, nil
}

// isEmptyValue is encoding/json's test for omitempty.
func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's string encoding with HTML escaping (its default): ", \ and control
// characters escaped, <, > and & as \u003c, \u003e, \u0026, U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// lineBufs are the buffers event lines are built in.
var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
