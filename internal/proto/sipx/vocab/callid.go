package vocab

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/emiago/sipgo/sip"
)

// CallID returns the Call-ID of a message, "" when it has none.
func CallID(m sip.Message) string {
	if h := m.CallID(); h != nil {
		return h.Value()
	}
	return ""
}

// NewCallID returns a fresh Call-ID, 24 random hex digits at host (RFC 3261 §8.1.1.4: globally unique).
func NewCallID(host string) string { return randHex(12) + "@" + host }

// NewTag returns a fresh From or To tag, 12 random hex digits (RFC 3261 §19.3).
func NewTag() string { return randHex(6) }

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
