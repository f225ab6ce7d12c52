package cx

import (
	"context"
	"fmt"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
)

// HandleFrame answers one whole Diameter frame the way a connection whose CER named originHost would: the
// guard's screening and peer checks, then the request decoder, the handler and the answer encoder. Unlike a
// connection it does not recover from a panic in the Cx decoders, the handler or the encoder, so a fuzzer sees
// it (go-diameter's own decoding keeps the guard's recover: its known panics are answered as errors in
// production too). It returns the answer frame, or nil for a message that gets no Cx answer (base protocol
// messages, which go-diameter's state machine answers, and answers).
func (s *Server) HandleFrame(ctx context.Context, originHost string, frame []byte) ([]byte, error) {
	if len(frame) < headerLen || frame[0] != 1 || len(frame)%4 != 0 ||
		int(uint32(frame[1])<<16|uint32(frame[2])<<8|uint32(frame[3])) != len(frame) {
		return nil, errBadFraming
	}
	peer, ok := s.peers[originHost]
	if !ok && !s.cfg.AllowAnyPeer {
		return nil, fmt.Errorf("cx: %q is not a configured peer", originHost)
	}
	cp := &connPeer{}
	cp.set(originHost, peer)
	m, rej := screen(frame)
	if rej != nil {
		if !rej.isRequest {
			return nil, nil
		}
		hdr, err := diam.DecodeHeader(frame[:headerLen])
		if err != nil {
			return nil, err
		}
		return s.errorAnswer(hdr, rawSessionID(frame[headerLen:]), rej.res, rej.msg)
	}
	if m.Header.CommandFlags&diam.RequestFlag == 0 || m.Header.ApplicationID == 0 {
		return nil, nil
	}
	if r := s.authorize(cp, m, "fuzz"); r != nil {
		return s.errorAnswer(m.Header, rawSessionID(frame[headerLen:]), r.Result, r.Detail)
	}
	code := m.Header.CommandCode
	switch code {
	case CmdUA, CmdLI, CmdMA, CmdSA:
	default:
		return s.answer(m, CommandUnsupported, nil, "not supported", nil).Serialize()
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	x := Exchange{Command: CommandName(code), Remote: "fuzz"}
	start := time.Now()
	payload, res, errMsg, failed := s.handle(ctx, code, m, &x, peer)
	x.Result, x.Error, x.Duration = res, errMsg, time.Since(start)
	return s.answer(m, res, payload, errMsg, failed).Serialize()
}
