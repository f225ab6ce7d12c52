package cx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// go-diameter v4.3.0 closes a connection whenever a message fails to decode, including a request for an unknown
// command or application, and can panic on some malformed AVPs. The guard sits between the socket and go-diameter:
// it reads whole messages, decodes each one (recovering from panics) and answers the ones that cannot be served
// itself, so a bad request costs one error answer and not the connection. Only broken framing (wrong version or an
// impossible length) closes the connection, because nothing after it can be trusted.

const headerLen = 20

var errBadFraming = errors.New("cx: diameter framing lost")

type guardListener struct {
	net.Listener
	s     *Server
	mu    sync.Mutex
	conns map[*guardConn]struct{}
}

// Accept returns the next connection within the connection cap; connections beyond it are closed at once.
func (l *guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		gc := &guardConn{Conn: c, s: l.s, l: l, accepted: time.Now()}
		gc.wd = &watchdog{c: gc, cfg: l.s.cfg.Watchdog}
		l.mu.Lock()
		if l.conns == nil {
			l.conns = map[*guardConn]struct{}{}
		}
		full := len(l.conns) >= l.s.cfg.MaxConnections
		if !full {
			l.conns[gc] = struct{}{}
		}
		l.mu.Unlock()
		if !full {
			return gc, nil
		}
		_ = c.Close()
		l.s.refuse(Refusal{Remote: c.RemoteAddr().String(), Reason: RefusedConnectionCap,
			Detail: fmt.Sprintf("%d connections open", l.s.cfg.MaxConnections)})
	}
}

// closeAll closes every connection still open (go-diameter's Server.Close closes only the listener).
func (l *guardListener) closeAll() {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		c.wd.stop()
		_ = c.Conn.Close()
	}
}

type guardConn struct {
	net.Conn
	s       *Server
	l       *guardListener
	closed  sync.Once
	wmu     sync.Mutex
	pending []byte
	hdr     [headerLen]byte

	accepted time.Time
	cp       connPeer  // what the CER established
	wd       *watchdog // runs from the CER on

	// go-diameter's CER handler writes the CEA before it records the peer as handshaken, and with concurrent
	// dispatch a request read right after the CER can be handled in between and is then silently dropped. So
	// after a CER nothing more is read until the CER handler has returned (handshakeDone).
	gateMu sync.Mutex
	gate   chan struct{}
}

func (c *guardConn) handshakeDone() {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	if c.gate != nil {
		close(c.gate)
		c.gate = nil
	}
}

func (c *guardConn) waitHandshake() {
	c.gateMu.Lock()
	g := c.gate
	c.gateMu.Unlock()
	if g == nil {
		return
	}
	select {
	case <-g:
	case <-time.After(5 * time.Second):
		c.handshakeDone()
	}
}

func (c *guardConn) Close() error {
	c.wd.stop()
	c.closed.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

func (c *guardConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n, err := c.Conn.Write(p)
	if err == nil && c.s.trace != nil {
		c.s.trace("out", c.LocalAddr().String(), c.RemoteAddr().String(), p[:n])
	}
	return n, err
}

func (c *guardConn) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		c.waitHandshake()
		// A peer has CERTimeout from the accept to send its CER; after it, the watchdog watches the silence (a
		// read deadline could fire in the middle of a frame).
		_, _, done := c.cp.get()
		deadline := c.accepted.Add(c.s.cfg.CERTimeout)
		if done {
			deadline = time.Time{}
		}
		_ = c.Conn.SetReadDeadline(deadline)
		frame, err := c.readFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !done {
				c.s.refuse(Refusal{Remote: c.RemoteAddr().String(), Reason: RefusedCERTimeout,
					Detail: "closing the connection: no CER in time"})
			}
			return 0, err
		}
		if c.s.trace != nil {
			c.s.trace("in", c.RemoteAddr().String(), c.LocalAddr().String(), frame)
		}
		ok, err := c.admit(frame)
		if err != nil {
			return 0, err
		}
		if _, _, done := c.cp.get(); done {
			c.wd.alive() // anything received is life, even a request the guard answered itself
		}
		if ok {
			c.pending = frame
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *guardConn) readFrame() ([]byte, error) {
	if _, err := io.ReadFull(c.Conn, c.hdr[:]); err != nil {
		return nil, err
	}
	version := c.hdr[0]
	length := int(uint32(c.hdr[1])<<16 | uint32(c.hdr[2])<<8 | uint32(c.hdr[3]))
	if version != 1 || length < headerLen || length > c.s.cfg.MaxMessageSize || length%4 != 0 {
		c.s.log.Warn("cx: closing connection: bad diameter header", "peer", c.RemoteAddr().String(),
			"version", version, "length", length)
		return nil, errBadFraming
	}
	frame := make([]byte, length)
	copy(frame, c.hdr[:])
	if _, err := io.ReadFull(c.Conn, frame[headerLen:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// errRefused closes a connection after a refused CER or a message before any CER.
var errRefused = errors.New("cx: peer refused")

// admit decides whether go-diameter may see the frame. Requests it cannot serve are answered here. A refused
// CER, or anything before a CER, returns an error: the connection is then closed.
func (c *guardConn) admit(frame []byte) (bool, error) {
	m, rej := screen(frame)
	if rej != nil {
		return c.reject(frame, rej.isRequest, rej.res, rej.msg), nil
	}
	remote := c.RemoteAddr()
	if isCER(m) {
		host := originHost(m)
		if prev, _, done := c.cp.get(); done && prev != host {
			r := Refusal{Peer: host, Remote: remote.String(), Reason: RefusedOriginHostMismatch, Command: "CER",
				Result: UnknownPeer, Detail: fmt.Sprintf("second CER as %q on a connection opened as %q", host, prev)}
			return false, c.refuseCER(m, &r)
		}
		peer, r := c.s.admitCER(host, remote)
		if r != nil {
			return false, c.refuseCER(m, r)
		}
		c.cp.set(host, peer)
		c.gateMu.Lock()
		if c.gate == nil {
			c.gate = make(chan struct{})
		}
		c.gateMu.Unlock()
		return true, nil
	}
	if _, _, done := c.cp.get(); !done {
		c.s.refuse(Refusal{Peer: originHost(m), Remote: remote.String(), Reason: RefusedNoCER,
			Command: commandLabel(m.Header.ApplicationID, m.Header.CommandCode), Detail: "message before the CER: closing"})
		return false, errRefused
	}
	if m.Header.CommandFlags&diam.RequestFlag == 0 {
		return true, nil
	}
	if r := c.s.authorize(&c.cp, m, remote.String()); r != nil {
		c.s.refuse(*r)
		return c.answerError(frame, true, r.Result, r.Detail, true), nil
	}
	return true, nil
}

func (c *guardConn) refuseCER(m *diam.Message, r *Refusal) error {
	c.s.refuse(*r)
	if b, err := c.s.refusalCEA(m.Header, r, c.LocalAddr()); err == nil {
		_, _ = c.Write(b)
	}
	return errRefused
}

// rejection is a request the guard answers itself with res.
type rejection struct {
	isRequest bool
	res       Result
	msg       string
}

// screen checks a whole frame the way the guard does before go-diameter sees it: a known application and
// command, no E bit on a request, and a message go-diameter can decode (its panics are recovered here, as
// go-diameter v4.3.0 has known ones) with fixed-size AVPs of the right size.
func screen(frame []byte) (*diam.Message, *rejection) {
	flags := frame[4]
	code := uint32(frame[5])<<16 | uint32(frame[6])<<8 | uint32(frame[7])
	app := binary.BigEndian.Uint32(frame[8:12])
	isRequest := flags&diam.RequestFlag != 0
	d := Dict()
	if _, err := d.App(app); err != nil && app != 0 {
		return nil, &rejection{isRequest, ApplicationUnsupport, fmt.Sprintf("application %d is not supported", app)}
	}
	if _, err := d.FindCommand(app, code); err != nil {
		return nil, &rejection{isRequest, CommandUnsupported, fmt.Sprintf("command %d is not supported", code)}
	}
	if isRequest && flags&diam.ErrorFlag != 0 {
		return nil, &rejection{isRequest, InvalidHdrBits, "request with the E bit set"}
	}
	m, err := tryDecode(frame)
	if err != nil {
		res := InvalidAVPValue
		if e := err.Error(); strings.Contains(e, "too short") || strings.Contains(e, "length") {
			res = InvalidAVPLength
		}
		return nil, &rejection{isRequest, res, err.Error()}
	}
	return m, nil
}

func isCER(m *diam.Message) bool {
	return m.Header.ApplicationID == 0 && m.Header.CommandCode == diam.CapabilitiesExchange &&
		m.Header.CommandFlags&diam.RequestFlag != 0
}

func originHost(m *diam.Message) string {
	if a := findAVP(m.AVP, avpOriginHost, 0); a != nil {
		if v, ok := a.Data.(datatype.DiameterIdentity); ok {
			return string(v)
		}
	}
	return ""
}

func tryDecode(frame []byte) (m *diam.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			m, err = nil, fmt.Errorf("undecodable message: %v", p)
		}
	}()
	m, err = diam.ReadMessage(bytes.NewReader(frame), Dict())
	if err != nil {
		return nil, err
	}
	return m, checkLengths(m.AVP)
}

// checkLengths rejects fixed-size AVPs with another payload size: go-diameter v4.3.0 silently decodes a 2-byte
// Unsigned32 or Enumerated as 0, which would turn a malformed User-Authorization-Type into REGISTRATION.
func checkLengths(list []*diam.AVP) error {
	for _, a := range list {
		hdr := 8
		if a.Flags&avp.Vbit != 0 {
			hdr = 12
		}
		size := a.Length - hdr
		want := -1
		switch a.Data.(type) {
		case datatype.Unsigned32, datatype.Integer32, datatype.Enumerated, datatype.Float32, datatype.Time:
			want = 4
		case datatype.Unsigned64, datatype.Integer64, datatype.Float64:
			want = 8
		case *diam.GroupedAVP:
			if err := checkLengths(a.Data.(*diam.GroupedAVP).AVP); err != nil {
				return err
			}
		}
		if want >= 0 && size != want {
			return fmt.Errorf("AVP %d has length %d, want %d", a.Code, size, want)
		}
	}
	return nil
}

// reject answers a request with an error result (answers are dropped) and keeps the connection.
func (c *guardConn) reject(frame []byte, isRequest bool, res Result, msg string) bool {
	return c.answerError(frame, isRequest, res, msg, false)
}

// answerError answers a request with an error result; refused says the refusal is already logged.
func (c *guardConn) answerError(frame []byte, isRequest bool, res Result, msg string, refused bool) bool {
	peer := c.RemoteAddr().String()
	if !isRequest {
		c.s.log.Warn("cx: dropped an answer that cannot be decoded", "peer", peer, "err", msg)
		return false
	}
	hdr, err := diam.DecodeHeader(frame[:headerLen])
	if err != nil {
		return false
	}
	sid := rawSessionID(frame[headerLen:])
	b, err := c.s.errorAnswer(hdr, sid, res, msg)
	if err != nil {
		c.s.log.Warn("cx: cannot build error answer", "peer", peer, "err", err)
		return false
	}
	if _, err := c.Write(b); err != nil {
		c.s.log.Warn("cx: write error answer", "peer", peer, "err", err)
	}
	if !refused { // a refusal was logged by Server.refuse
		c.s.log.Warn("cx: rejected request", "peer", peer, "cmd", hdr.CommandCode, "app", hdr.ApplicationID,
			"session_id", sid, "result_code", res.Code, "err", msg)
	}
	if c.s.observe != nil {
		c.s.observe(Exchange{Command: commandLabel(hdr.ApplicationID, hdr.CommandCode), Remote: peer, SessionID: sid, Result: res, Error: msg})
	}
	return false
}

// errorAnswer is the answer to a request the guard refuses: Session-Id, Result-Code, Origin-*, Error-Message.
func (s *Server) errorAnswer(hdr *diam.Header, sid string, res Result, msg string) ([]byte, error) {
	flags := uint8(0)
	if res.Code >= 3000 && res.Code < 4000 {
		flags |= diam.ErrorFlag
	}
	flags |= hdr.CommandFlags & diam.ProxiableFlag
	ans := diam.NewMessage(hdr.CommandCode, flags, hdr.ApplicationID, hdr.HopByHopID, hdr.EndToEndID, Dict())
	if sid != "" {
		ans.AddAVP(m0(avpSessionID, datatype.UTF8String(sid)))
	}
	ans.AddAVP(m0(avpResultCode, datatype.Unsigned32(res.Code)))
	ans.AddAVP(m0(avpOriginHost, datatype.DiameterIdentity(s.cfg.OriginHost)))
	ans.AddAVP(m0(avpOriginRealm, datatype.DiameterIdentity(s.cfg.OriginRealm)))
	ans.AddAVP(diam.NewAVP(avpErrorMessage, 0, 0, datatype.UTF8String(truncate(msg, 200))))
	return ans.Serialize()
}

func commandLabel(app, code uint32) string {
	if app == AppID && code >= CmdUA && code <= CmdPP {
		return CommandName(code)
	}
	return "unknown"
}

// rawSessionID finds a Session-Id AVP (263, vendor 0) among the top-level AVPs without trusting the dictionary.
func rawSessionID(b []byte) string {
	for len(b) >= 8 {
		code := binary.BigEndian.Uint32(b[0:4])
		flags := b[4]
		l := int(uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]))
		if l < 8 || l > len(b) {
			return ""
		}
		hdr := 8
		if flags&0x80 != 0 {
			hdr = 12
		}
		if code == avpSessionID && hdr == 8 {
			return string(b[hdr:l])
		}
		padded := (l + 3) &^ 3
		if padded > len(b) {
			return ""
		}
		b = b[padded:]
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
