package report

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// msg is one message of the run after deduplication, decoded just enough for labels and selection.
type msg struct {
	traceLine
	// SIP
	callID string
	label  string // "INVITE", "100 Trying", "LIR (UAT 2)", "LIA 2001"
	// Diameter
	request      bool
	cmd          uint32
	hopByHop     uint32
	endToEnd     uint32
	users        []string // user parts of User-Name and Public-Identity
	originHost   string
	resultCode   uint32
	experimental uint32
}

// dedup drops the receiver's copy of every message whose sender recorded it too (same protocol, addresses and
// bytes, the "in" line matched to an unmatched "out" line within 5 s), so each message appears once. The input is in
// time order; so is the output. It returns the number of lines dropped.
func dedup(lines []traceLine) ([]traceLine, int) {
	type key struct{ proto, src, dst, data string }
	outs := map[key][]int{} // indexes of "out" lines not yet matched
	for i, l := range lines {
		if l.Dir == "out" {
			k := key{l.Proto, l.Src, l.Dst, string(l.Data)}
			outs[k] = append(outs[k], i)
		}
	}
	keep := make([]traceLine, 0, len(lines))
	dropped := 0
	for _, l := range lines {
		if l.Dir == "in" {
			k := key{l.Proto, l.Src, l.Dst, string(l.Data)}
			if q := outs[k]; len(q) > 0 {
				best := -1
				for j, idx := range q {
					if d := lines[idx].TNs - l.TNs; d <= 5e9 && d >= -5e9 {
						best = j
						break
					}
				}
				if best >= 0 {
					outs[k] = append(q[:best:best], q[best+1:]...)
					dropped++
					continue
				}
			}
		}
		keep = append(keep, l)
	}
	return keep, dropped
}

func decode(l traceLine) msg {
	m := msg{traceLine: l}
	switch l.Proto {
	case "sip":
		m.decodeSIP()
	case "diameter":
		m.decodeDiameter()
	default:
		m.label = l.Proto
	}
	return m
}

func (m *msg) decodeSIP() {
	data := m.Data
	head := data
	if i := bytes.Index(data, []byte("\r\n\r\n")); i >= 0 {
		head = data[:i]
	}
	lines := strings.Split(string(head), "\n")
	first := strings.TrimSpace(lines[0])
	if strings.HasPrefix(first, "SIP/2.0 ") {
		m.label = strings.TrimSpace(strings.TrimPrefix(first, "SIP/2.0 "))
	} else if f := strings.Fields(first); len(f) > 0 {
		m.label = f[0]
		m.request = true
	}
	for _, h := range lines[1:] {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "call-id", "i":
			m.callID = strings.TrimSpace(value)
		case "cseq":
			if !m.request { // "200 OK (BYE)" tells which request it answers; INVITE is the default
				if f := strings.Fields(value); len(f) == 2 && f[1] != "INVITE" {
					m.label += " (" + f[1] + ")"
				}
			}
		}
	}
	if m.label == "" {
		m.label = "SIP"
	}
}

// Diameter AVP codes read for labels (RFC 6733, TS 29.229).
const (
	avpUserName            = 1
	avpOriginHost          = 264
	avpResultCode          = 268
	avpExperimentalResult  = 297
	avpExperimentalCode    = 298
	avpPublicIdentity      = 601
	avpServerName          = 602
	avpServerAssignmentTyp = 614
	avpUserAuthorizationTy = 623
)

func (m *msg) decodeDiameter() {
	b := m.Data
	if len(b) < 20 || b[0] != 1 {
		m.label = "Diameter?"
		return
	}
	flags := b[4]
	m.request = flags&0x80 != 0
	m.cmd = uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])
	m.hopByHop = binary.BigEndian.Uint32(b[12:16])
	m.endToEnd = binary.BigEndian.Uint32(b[16:20])
	n := int(uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	n = min(n, len(b))
	var uat, sat = -1, -1
	walkAVPs(b[20:n], func(code uint32, data []byte) {
		switch code {
		case avpUserName, avpPublicIdentity:
			m.users = append(m.users, userPart(string(data)))
		case avpOriginHost:
			m.originHost = string(data)
		case avpResultCode:
			if len(data) == 4 {
				m.resultCode = binary.BigEndian.Uint32(data)
			}
		case avpExperimentalResult:
			walkAVPs(data, func(c uint32, d []byte) {
				if c == avpExperimentalCode && len(d) == 4 {
					m.experimental = binary.BigEndian.Uint32(d)
				}
			})
		case avpUserAuthorizationTy:
			if len(data) == 4 {
				uat = int(binary.BigEndian.Uint32(data))
			}
		case avpServerAssignmentTyp:
			if len(data) == 4 {
				sat = int(binary.BigEndian.Uint32(data))
			}
		}
	})
	name := cmdName(m.cmd, m.request)
	switch {
	case m.request && uat >= 0:
		m.label = fmt.Sprintf("%s (UAT %d)", name, uat)
	case m.request && sat >= 0:
		m.label = fmt.Sprintf("%s (SAT %d)", name, sat)
	case !m.request && m.experimental != 0:
		m.label = fmt.Sprintf("%s %d", name, m.experimental)
	case !m.request && m.resultCode != 0:
		m.label = fmt.Sprintf("%s %d", name, m.resultCode)
	default:
		m.label = name
	}
}

// walkAVPs calls f for every AVP in b (RFC 6733 §4.1: code, flags, 24-bit length, optional vendor, padded data).
func walkAVPs(b []byte, f func(code uint32, data []byte)) {
	for len(b) >= 8 {
		code := binary.BigEndian.Uint32(b[0:4])
		flags := b[4]
		l := int(uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]))
		hdr := 8
		if flags&0x80 != 0 {
			hdr = 12
		}
		if l < hdr || l > len(b) {
			return
		}
		f(code, b[hdr:l])
		p := (l + 3) &^ 3
		if p > len(b) {
			return
		}
		b = b[p:]
	}
}

func cmdName(code uint32, request bool) string {
	base := map[uint32]string{257: "CE", 280: "DW", 282: "DP", 300: "UA", 301: "SA", 302: "LI", 303: "MA", 304: "RT", 305: "PP"}[code]
	if base == "" {
		if request {
			return fmt.Sprintf("cmd-%d-R", code)
		}
		return fmt.Sprintf("cmd-%d-A", code)
	}
	if request {
		return base + "R"
	}
	return base + "A"
}

// addressBook maps ip:port to node names: node configurations, then the trace itself (the recording node owns the
// source of what it sends and the destination of what it receives), then a Diameter request's Origin-Host.
type addressBook map[string]string

func newAddressBook(r *run, msgs []msg) addressBook {
	ab := addressBook{}
	for _, c := range r.nodes {
		if c.Listen != "" {
			ab[c.Listen] = c.Name
		}
		if c.HSS != nil && c.HSS.DiameterListen != "" {
			ab[c.HSS.DiameterListen] = c.Name
		}
	}
	for _, l := range r.trace {
		own := l.Src
		if l.Dir == "in" {
			own = l.Dst
		}
		if _, ok := ab[own]; !ok && l.Node != "" {
			ab[own] = l.Node
		}
	}
	for _, m := range msgs {
		if m.Proto == "diameter" && m.request && m.originHost != "" {
			if _, ok := ab[m.Src]; !ok {
				ab[m.Src] = hostNode(m.originHost)
			}
		}
	}
	return ab
}

// name returns the node of addr; addresses nobody owns are the phones ("ue").
func (ab addressBook) name(addr string) string {
	if n, ok := ab[addr]; ok {
		return n
	}
	return "ue"
}
