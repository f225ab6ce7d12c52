package cx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/sm"

	"github.com/imslab/quasipool/internal/runtime/overload"
)

// Handler answers the Cx requests an HSS receives. Implementations return a typed answer (whose Result may be any
// success or Cx error result) or an error: a *RequestError answers with its result and Failed-AVP, any other error
// answers DIAMETER_UNABLE_TO_COMPLY.
type Handler interface {
	UserAuthorization(ctx context.Context, req *UAR) (*UAA, error)
	LocationInfo(ctx context.Context, req *LIR) (*LIA, error)
	MultimediaAuth(ctx context.Context, req *MAR) (*MAA, error)
	ServerAssignment(ctx context.Context, req *SAR) (*SAA, error)
}

// Exchange describes one answered request, for events and metrics.
type Exchange struct {
	Command        string // "UAR", "SAR", … or "unknown"
	Peer           string // Origin-Host of the requester
	Remote         string // transport address of the requester
	SessionID      string
	UserName       string                 // private identity, when the request has one
	PublicIdentity string                 // first public identity, when the request has one
	AuthType       *UserAuthorizationType // UAR and LIR
	AssignmentType *ServerAssignmentType  // SAR
	Result         Result
	ServerName     string // Server-Name in the request (MAR/SAR) or the answer (UAA/LIA)
	Duration       time.Duration
	Error          string // Error-Message, if the answer carried one
}

// ServerConfig configures the Diameter side of a Cx server.
type ServerConfig struct {
	OriginHost  string
	OriginRealm string
	ProductName string
	// MaxConcurrentHandlers bounds the requests handled at once per connection (default 256). Requests on one
	// connection are handled concurrently so that the HSS can group its disk writes.
	MaxConcurrentHandlers int
	// RequestTimeout bounds the time a handler may take (default 5s).
	RequestTimeout time.Duration
	// MaxMessageSize closes connections that announce a larger message (default 1 MiB).
	MaxMessageSize int
	// Peers are the clients allowed to connect. A CER whose Origin-Host is not listed, or comes from another
	// address, is answered DIAMETER_UNKNOWN_PEER and the connection closed.
	Peers []Peer
	// AllowAnyPeer admits a CER from any Origin-Host that is not listed (tools and tests). Listed peers keep
	// their address check and rights.
	AllowAnyPeer bool
	// CERTimeout closes a connection that sends no CER in time (default 5s).
	CERTimeout time.Duration
	// Watchdog is the device watchdog run on each connection after its CER (watchdog.go): a DWR after Tw of
	// silence, the connection closed after MaxMissed unanswered ones.
	Watchdog WatchdogConfig
	// MaxConnections closes connections accepted beyond this many open ones (default 64).
	MaxConnections int
}

// Validate checks the configuration and names the bad field.
func (c *ServerConfig) Validate() error {
	if c.OriginHost == "" {
		return errors.New("cx server: origin_host: must be set")
	}
	if c.OriginRealm == "" {
		return errors.New("cx server: origin_realm: must be set")
	}
	if c.MaxConcurrentHandlers < 0 {
		return errors.New("cx server: max_concurrent_handlers: must not be negative")
	}
	if c.RequestTimeout < 0 {
		return errors.New("cx server: request_timeout: must not be negative")
	}
	if c.CERTimeout < 0 {
		return errors.New("cx server: cer_timeout: must not be negative")
	}
	if err := c.Watchdog.Validate("cx server: watchdog"); err != nil {
		return err
	}
	if c.MaxConnections < 0 {
		return errors.New("cx server: max_connections: must not be negative")
	}
	if len(c.Peers) == 0 && !c.AllowAnyPeer {
		return errors.New("cx server: peers: none configured (allow_any_peer admits anyone, for tools and tests)")
	}
	return validatePeers(c.Peers)
}

func (c *ServerConfig) defaults() {
	if c.ProductName == "" {
		c.ProductName = "imslab-hss"
	}
	if c.MaxConcurrentHandlers == 0 {
		c.MaxConcurrentHandlers = 256
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 1 << 20
	}
	if c.CERTimeout == 0 {
		c.CERTimeout = 5 * time.Second
	}
	c.Watchdog = c.Watchdog.WithDefaults()
	if c.MaxConnections == 0 {
		c.MaxConnections = 64
	}
}

// Server serves Cx over Diameter/TCP: capabilities exchange (advertising only Cx), watchdog, and the four requests
// an HSS answers. Malformed input is answered with a Diameter error where the framing allows it; otherwise only
// that connection is closed.
type Server struct {
	cfg       ServerConfig
	handler   Handler
	observe   func(Exchange)
	onRefusal func(Refusal)
	peers     map[string]*Peer
	trace     func(dir, src, dst string, data []byte)
	overload  *overload.Controller
	log       *slog.Logger
	sm        *sm.StateMachine
	mu        sync.Mutex
	srv       *diam.Server
	stopping  bool
}

// ServerOption configures optional collaborators.
type ServerOption func(*Server)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) ServerOption { return func(s *Server) { s.log = l } }

// WithTrace receives every Diameter message the server reads or writes, whole (dir "in" or "out").
func WithTrace(f func(dir, src, dst string, data []byte)) ServerOption {
	return func(s *Server) { s.trace = f }
}

// WithObserver is called once for every answered request, including error answers.
func WithObserver(f func(Exchange)) ServerOption { return func(s *Server) { s.observe = f } }

// WithRefusals is called once for every refused connection or request (unknown peer, timeouts, rights, …).
func WithRefusals(f func(Refusal)) ServerOption { return func(s *Server) { s.onRefusal = f } }

// WithOverload sheds requests the server cannot serve in time: each request is admitted by c, and a request it
// rejects is answered DIAMETER_TOO_BUSY (3004, E bit) at once, without reaching the handler (RFC 6733 §7.1.3; the
// client backs off or tries another peer).
func WithOverload(c *overload.Controller) ServerOption { return func(s *Server) { s.overload = c } }

// NewServer builds a Cx server around h.
func NewServer(cfg ServerConfig, h Handler, opts ...ServerOption) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	s := &Server{cfg: cfg, handler: h, log: slog.Default(), peers: map[string]*Peer{}}
	for i := range cfg.Peers {
		p := cfg.Peers[i]
		s.peers[p.OriginHost] = &p
	}
	for _, o := range opts {
		o(s)
	}
	s.sm = sm.New(&sm.Settings{
		OriginHost:       datatype.DiameterIdentity(cfg.OriginHost),
		OriginRealm:      datatype.DiameterIdentity(cfg.OriginRealm),
		VendorID:         datatype.Unsigned32(Vendor3GPP),
		ProductName:      datatype.UTF8String(cfg.ProductName),
		OriginStateID:    datatype.Unsigned32(time.Now().Unix()),
		FirmwareRevision: 1,
		Dict:             Dict(),
	})
	s.sm.HandleIdx(diam.CommandIndex{AppID: AppID, Code: CmdUA, Request: true}, s.wrap(CmdUA))
	s.sm.HandleIdx(diam.CommandIndex{AppID: AppID, Code: CmdLI, Request: true}, s.wrap(CmdLI))
	s.sm.HandleIdx(diam.CommandIndex{AppID: AppID, Code: CmdMA, Request: true}, s.wrap(CmdMA))
	s.sm.HandleIdx(diam.CommandIndex{AppID: AppID, Code: CmdSA, Request: true}, s.wrap(CmdSA))
	s.sm.HandleIdx(diam.CommandIndex{AppID: 0, Code: diam.DisconnectPeer, Request: true}, diam.HandlerFunc(s.handleDPR))
	// Everything else that the dictionary knows but nobody handles (an RTR/PPR sent to the HSS, accounting, …).
	s.sm.Handle("ALL", diam.HandlerFunc(s.handleUnsupported))
	return s, nil
}

// Serve accepts connections on ln until ctx is done, then closes the listener and every connection.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	s.srv = &diam.Server{
		Network:               ln.Addr().Network(),
		Addr:                  ln.Addr().String(),
		Handler:               handshakeGate{s.sm},
		Dict:                  Dict(),
		MaxConcurrentHandlers: s.cfg.MaxConcurrentHandlers,
	}
	srv := s.srv
	s.mu.Unlock()
	go s.drainErrors(ctx)
	errc := make(chan error, 1)
	gl := &guardListener{Listener: ln, s: s}
	go func() { errc <- srv.Serve(gl) }()
	select {
	case <-ctx.Done():
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		_ = srv.Close()
		_ = ln.Close()
		<-errc
		gl.closeAll()
		return nil
	case err := <-errc:
		return fmt.Errorf("cx server: %w", err)
	}
}

func (s *Server) drainErrors(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-s.sm.ErrorReports():
			if !ok {
				return
			}
			attrs := []any{"err", e.Error}
			if e.Conn != nil {
				attrs = append(attrs, "peer", e.Conn.RemoteAddr().String())
			}
			if e.Message != nil {
				attrs = append(attrs, "cmd", e.Message.Header.CommandCode)
			}
			s.log.Warn("diameter error report", attrs...)
		}
	}
}

// handshakeGate releases a connection's guard once the CER handler has returned (see guardConn.gate).
type handshakeGate struct{ *sm.StateMachine }

func (g handshakeGate) ServeDIAM(c diam.Conn, m *diam.Message) {
	g.StateMachine.ServeDIAM(c, m)
	if m.Header.CommandCode == diam.CapabilitiesExchange && m.Header.CommandFlags&diam.RequestFlag != 0 {
		if gc, ok := c.Connection().(*guardConn); ok {
			gc.handshakeDone()
		}
	}
}

// wrap builds the diam handler of one Cx command: decode, call the handler, encode, observe.
func (s *Server) wrap(code uint32) diam.HandlerFunc {
	return func(c diam.Conn, m *diam.Message) {
		start := time.Now()
		x := Exchange{Command: CommandName(code), Remote: c.RemoteAddr().String()}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		var peer *Peer
		if gc, ok := c.Connection().(*guardConn); ok {
			_, peer, _ = gc.cp.get()
		}
		var (
			payload []*diam.AVP
			res     Result
			errMsg  string
			failed  []*diam.AVP
		)
		if ok, _ := s.overload.Admit(); ok {
			payload, res, errMsg, failed = s.dispatch(ctx, code, m, &x, peer)
			s.overload.Done()
		} else {
			res, errMsg = TooBusy, "overloaded: try again later"
		}
		x.Result = res
		x.Error = errMsg
		ans := s.answer(m, res, payload, errMsg, failed)
		if _, err := ans.WriteTo(c); err != nil {
			s.log.Warn("cx: write answer", "cmd", x.Command, "peer", x.Peer, "session_id", x.SessionID, "err", err)
		}
		x.Duration = time.Since(start)
		if s.observe != nil {
			s.observe(x)
		}
	}
}

// dispatch runs handle and turns a panic into DIAMETER_UNABLE_TO_COMPLY, so one bad request cannot take the
// HSS down. Fuzzing goes through HandleFrame, which calls handle directly so that panics stay visible.
func (s *Server) dispatch(ctx context.Context, code uint32, m *diam.Message, x *Exchange, peer *Peer) (payload []*diam.AVP, res Result, errMsg string, failed []*diam.AVP) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("cx: handler panic", "cmd", x.Command, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			payload, res, errMsg, failed = nil, UnableToComply, "internal error", nil
		}
	}()
	return s.handle(ctx, code, m, x, peer)
}

// handle decodes a Cx request, checks a MAR's or SAR's Server-Name against the peer (nil: no check) and calls
// the handler. An error answer echoes the request's identities (see echoIdentities).
func (s *Server) handle(ctx context.Context, code uint32, m *diam.Message, x *Exchange, peer *Peer) (payload []*diam.AVP, res Result, errMsg string, failed []*diam.AVP) {
	var (
		out any
		err error
	)
	defer func() {
		if !res.IsSuccess() && len(payload) == 0 {
			payload = echoIdentities(x)
		}
	}()
	switch code {
	case CmdUA:
		q, rerr := decodeUAR(m)
		x.Peer, x.SessionID, x.UserName, x.PublicIdentity = q.OriginHost, q.SessionID, q.UserName, q.PublicIdentity
		t := q.AuthorizationType
		x.AuthType = &t
		if rerr != nil {
			return nil, rerr.Result, rerr.Message, rerr.Failed
		}
		var a *UAA
		if a, err = s.handler.UserAuthorization(ctx, q); err == nil {
			x.ServerName = a.ServerName
			out, res, payload = a, a.Result, a.avps()
		}
	case CmdLI:
		q, rerr := decodeLIR(m)
		x.Peer, x.SessionID, x.PublicIdentity, x.AuthType = q.OriginHost, q.SessionID, q.PublicIdentity, q.AuthorizationType
		if rerr != nil {
			return nil, rerr.Result, rerr.Message, rerr.Failed
		}
		var a *LIA
		if a, err = s.handler.LocationInfo(ctx, q); err == nil {
			x.ServerName = a.ServerName
			out, res, payload = a, a.Result, a.avps()
		}
	case CmdMA:
		q, rerr := decodeMAR(m)
		x.Peer, x.SessionID, x.UserName, x.PublicIdentity, x.ServerName = q.OriginHost, q.SessionID, q.UserName, q.PublicIdentity, q.ServerName
		if rerr != nil {
			return nil, rerr.Result, rerr.Message, rerr.Failed
		}
		if r := s.checkServerName(peer, "MAR", q.ServerName, x.Remote); r != nil {
			s.refuse(*r)
			return nil, r.Result, r.Detail, nil
		}
		var a *MAA
		if a, err = s.handler.MultimediaAuth(ctx, q); err == nil {
			out, res, payload = a, a.Result, a.avps()
		}
	case CmdSA:
		q, rerr := decodeSAR(m)
		x.Peer, x.SessionID, x.UserName, x.ServerName = q.OriginHost, q.SessionID, q.UserName, q.ServerName
		if len(q.PublicIdentities) > 0 {
			x.PublicIdentity = q.PublicIdentities[0]
		}
		t := q.AssignmentType
		x.AssignmentType = &t
		if rerr != nil {
			return nil, rerr.Result, rerr.Message, rerr.Failed
		}
		if r := s.checkServerName(peer, "SAR", q.ServerName, x.Remote); r != nil {
			s.refuse(*r)
			return nil, r.Result, r.Detail, nil
		}
		var a *SAA
		if a, err = s.handler.ServerAssignment(ctx, q); err == nil {
			res = a.Result
			out = a
			payload, err = a.avps()
		}
	}
	_ = out
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			return nil, re.Result, re.Message, re.Failed
		}
		s.log.Error("cx: handler failed", "cmd", x.Command, "session_id", x.SessionID, "impi", x.UserName, "err", err)
		return nil, UnableToComply, "unable to comply", nil
	}
	return payload, res, "", nil
}

// echoIdentities is the payload of an error answer: the request's User-Name and its first Public-Identity, as
// far as they could be decoded. TS 29.229 makes them optional, but clients read them before the result (Kamailio's
// I-CSCF and S-CSCF report a missing User-Name as "private identity not found" instead of the real cause), and
// they make a failure diagnosable in a capture.
func echoIdentities(x *Exchange) []*diam.AVP {
	var out []*diam.AVP
	if x.UserName != "" {
		out = append(out, m0(avpUserName, datatype.UTF8String(x.UserName)))
	}
	if x.PublicIdentity != "" {
		out = append(out, mv(avpPublicIdentity, datatype.UTF8String(x.PublicIdentity)))
	}
	return out
}

// answer builds an answer in the AVP order of TS 29.229's ABNF. Cx results go in Experimental-Result and then
// Result-Code is absent; base results go in Result-Code.
func (s *Server) answer(req *diam.Message, res Result, payload []*diam.AVP, errMsg string, failed []*diam.AVP) *diam.Message {
	ans := req.Answer(0)
	if sid := findAVP(req.AVP, avpSessionID, 0); sid != nil {
		ans.AddAVP(sid)
	}
	ans.AddAVP(m0(avpVendorSpecificApplicationID, grp(
		m0(avpVendorID, datatype.Unsigned32(Vendor3GPP)),
		m0(avpAuthApplicationID, datatype.Unsigned32(AppID)))))
	if res.Experimental {
		ans.AddAVP(m0(avpExperimentalResult, grp(
			m0(avpVendorID, datatype.Unsigned32(Vendor3GPP)),
			m0(avpExperimentalResultCode, datatype.Unsigned32(res.Code)))))
	} else {
		ans.AddAVP(m0(avpResultCode, datatype.Unsigned32(res.Code)))
		if res.Code >= 3000 && res.Code < 4000 {
			ans.Header.CommandFlags |= diam.ErrorFlag
		}
	}
	ans.AddAVP(m0(avpAuthSessionState, datatype.Enumerated(AuthStateless)))
	ans.AddAVP(m0(avpOriginHost, datatype.DiameterIdentity(s.cfg.OriginHost)))
	ans.AddAVP(m0(avpOriginRealm, datatype.DiameterIdentity(s.cfg.OriginRealm)))
	for _, a := range payload {
		ans.AddAVP(a)
	}
	if errMsg != "" {
		ans.AddAVP(diam.NewAVP(avpErrorMessage, 0, 0, datatype.UTF8String(errMsg)))
	}
	if len(failed) > 0 {
		ans.AddAVP(m0(avpFailedAVP, grp(failed...)))
	}
	return ans
}

func (s *Server) handleDPR(c diam.Conn, m *diam.Message) {
	ans := m.Answer(2001)
	ans.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity(s.cfg.OriginHost))
	ans.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity(s.cfg.OriginRealm))
	_, _ = ans.WriteTo(c)
	s.log.Info("diameter peer disconnecting", "peer", c.RemoteAddr().String())
	go func() { time.Sleep(100 * time.Millisecond); c.Close() }()
}

func (s *Server) handleUnsupported(c diam.Conn, m *diam.Message) {
	if m.Header.CommandFlags&diam.RequestFlag == 0 {
		return // an answer nobody waits for
	}
	x := Exchange{Command: "unknown", Remote: c.RemoteAddr().String(), Result: CommandUnsupported, Error: fmt.Sprintf("command %d of application %d is not supported", m.Header.CommandCode, m.Header.ApplicationID)}
	ans := s.answer(m, CommandUnsupported, nil, x.Error, nil)
	_, _ = ans.WriteTo(c)
	if s.observe != nil {
		s.observe(x)
	}
}

// hostname is used for default Origin-Host values.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}
