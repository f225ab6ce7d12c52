package obs

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// appendEvent appends the JSON of Event{t, node, kind, fields} to dst, byte for byte what json.Marshal of the
// Event writes (keys sorted, strings escaped as encoding/json does by default, HTML characters included), without
// the map copy and the reflection of the general path: strings, integers, booleans and nil are written here,
// any other value through json.Marshal. The fixed keys win over fields of the same name, as in MarshalJSON.
func appendEvent(dst []byte, t time.Time, node, kind string, fields map[string]any) ([]byte, error) {
	var arr [24]string
	keys := arr[:0]
	for k := range fields {
		switch k {
		case "ts", "t_ns", "node", "kind":
			continue
		}
		keys = append(keys, k)
	}
	keys = append(keys, "ts", "t_ns", "node", "kind")
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		switch k {
		case "ts":
			dst = append(dst, '"')
			dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
			dst = append(dst, '"')
			continue
		case "t_ns":
			dst = strconv.AppendInt(dst, t.UnixNano(), 10)
			continue
		case "node":
			dst = appendJSONString(dst, node)
			continue
		case "kind":
			dst = appendJSONString(dst, kind)
			continue
		}
		var err error
		if dst, err = appendJSONValue(dst, fields[k]); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

func appendJSONValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendJSONString(dst, x), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
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
