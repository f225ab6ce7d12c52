package vocab

import "strings"

// SplitList splits a header value on commas that are outside angle brackets and quotes (a Contact, Path,
// Service-Route or P-Associated-URI list).
func SplitList(v string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, c := range v {
		switch {
		case c == '"':
			quoted = !quoted
		case c == '<' && !quoted:
			depth++
		case c == '>' && !quoted && depth > 0:
			depth--
		case c == ',' && !quoted && depth == 0:
			if s := strings.TrimSpace(v[start:i]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(v[start:]); s != "" {
		out = append(out, s)
	}
	return out
}
