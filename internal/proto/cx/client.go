package cx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	"github.com/fiorix/go-diameter/v4/diam/sm"
)

// Errors of the client that are not Diameter answers.
var (
	ErrNotConnected   = errors.New("cx: no connection to the HSS")
	ErrConnectionLost = errors.New("cx: connection to the HSS lost before the answer")
)

// ClientConfig configures a Cx client (the I-CSCF and S-CSCF side).
type ClientConfig struct {
	Addr             string // host:port of the HSS; ignored when a resolver is given
	OriginHost       string
	OriginRealm      string
	DestinationRealm string
	DestinationHost  string // optional
	ProductName      string
	RequestTimeout   time.Duration // applied when the caller's context has no deadline (default 2s)
	DialTimeout      time.Duration // a connection attempt in all: TCP handshake and capabilities exchange (default 2s)
	// ConnectTimeout bounds the TCP handshake of an attempt (default 300ms). An HSS whose host is gone (a stopped
	// container: its address answers nothing, not even a reset) would otherwise hold each attempt for the whole
	// DialTimeout, and the kernel's SYN retransmission (1 s) would set when its return is noticed; on a LAN the
	// handshake of a live HSS takes well under a millisecond.
	ConnectTimeout   time.Duration
	WatchdogInterval time.Duration // DWR interval (default 5s)
	ReconnectMin     time.Duration // first reconnect delay (default 100ms), doubled up to ReconnectMax
	ReconnectMax     time.Duration // default 2s
	// FailFastAfter: once the connection has been down this long, a request fails at once with ErrNotConnected
	// instead of waiting for the HSS (default 2s; negative: always wait). A restarted HSS is back well within it,
	// so requests made meanwhile still wait and go out; an HSS that is down does not hold every SIP transaction
	// that needs it until its timeout, and its return is not met by a burst of every request queued meanwhile.
	// A request that fails fast first asks for a connection attempt on demand (at most one per ReconnectMin) and
	// waits for it, and for the one after it when an attempt was already under way (at most
	// 2×(ConnectTimeout+ReconnectMin) in all), so the HSS's return is noticed by the first request after it, not
	// at the next backoff tick (up to ReconnectMax later).
	FailFastAfter time.Duration
}

// Validate checks the configuration and names the bad field.
func (c *ClientConfig) Validate() error {
	switch {
	case c.OriginHost == "":
		return errors.New("cx client: origin_host: must be set")
	case c.OriginRealm == "":
		return errors.New("cx client: origin_realm: must be set")
	case c.DestinationRealm == "":
		return errors.New("cx client: destination_realm: must be set")
	case c.RequestTimeout < 0 || c.DialTimeout < 0 || c.ConnectTimeout < 0 || c.WatchdogInterval < 0 || c.ReconnectMin < 0 ||
		c.ReconnectMax < 0:
		return errors.New("cx client: timers: must not be negative")
	}
	return nil
}

func (c *ClientConfig) defaults() {
	if c.ProductName == "" {
		c.ProductName = "imslab-cscf"
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 2 * time.Second
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = 2 * time.Second
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 300 * time.Millisecond
	}
	c.ConnectTimeout = min(c.ConnectTimeout, c.DialTimeout)
	if c.WatchdogInterval == 0 {
		c.WatchdogInterval = 5 * time.Second
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = 100 * time.Millisecond
	}
	if c.FailFastAfter == 0 {
		c.FailFastAfter = 2 * time.Second
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = 2 * time.Second
	}
}

// Resolver returns the address to dial (for example from a DNS SRV lookup of _diameter._tcp.hss.<domain>).
type Resolver func(ctx context.Context) (string, error)

// Client keeps one Diameter connection to the HSS, reconnecting whenever it is lost (an HSS restart, a watchdog
// failure), and sends Cx requests over it. It is safe for concurrent use.
type Client struct {
	cfg     ClientConfig
	log     *slog.Logger
	resolve Resolver

	hbh     atomic.Uint32
	sid     atomic.Uint64
	sidBase string

	mu         sync.Mutex
	conn       diam.Conn
	connected  chan struct{} // closed while a connection is up; replaced when it goes down
	downSince  time.Time     // when the last connection was lost (zero: up, or never connected yet)
	attempting bool          // a connection attempt is under way
	attempted  chan struct{} // closed when the next connection attempt has ended; replaced by each attempt
	pending    map[uint32]chan *diam.Message

	kick chan struct{} // a request asks Run for a connection attempt now instead of at the next backoff tick

	// connectTCP makes the TCP connection of an attempt (tests replace it with an address that answers nothing).
	connectTCP func(ctx context.Context, addr string) (net.Conn, error)
}

// ClientOption configures optional collaborators.
type ClientOption func(*Client)

// WithClientLogger sets the logger (default slog.Default()).
func WithClientLogger(l *slog.Logger) ClientOption { return func(c *Client) { c.log = l } }

// WithResolver makes the client look up the HSS address before every connection attempt.
func WithResolver(r Resolver) ClientOption { return func(c *Client) { c.resolve = r } }

// NewClient builds a client. Call Run to connect.
func NewClient(cfg ClientConfig, opts ...ClientOption) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	c := &Client{cfg: cfg, log: slog.Default(), connected: make(chan struct{}), attempted: make(chan struct{}),
		pending: map[uint32]chan *diam.Message{}, kick: make(chan struct{}, 1),
		connectTCP: func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}}
	for _, o := range opts {
		o(c)
	}
	if c.resolve == nil {
		if cfg.Addr == "" {
			return nil, errors.New("cx client: addr: must be set when no resolver is given")
		}
		addr := cfg.Addr
		c.resolve = func(context.Context) (string, error) { return addr, nil }
	}
	c.hbh.Store(rand.Uint32())
	c.sidBase = fmt.Sprintf("%s;%d;", cfg.OriginHost, time.Now().Unix())
	return c, nil
}

// Run connects and keeps the connection up until ctx is done. While the HSS cannot be reached it retries with a
// delay doubled from ReconnectMin up to ReconnectMax; a request waiting for the HSS cuts the delay short, but
// attempts stay at least ReconnectMin apart.
func (c *Client) Run(ctx context.Context) error {
	delay := c.cfg.ReconnectMin
	for {
		last := time.Now()
		c.setAttempting()
		conn, err := c.dial(ctx)
		if err == nil {
			c.log.Info("cx: connected to the HSS", "peer", conn.RemoteAddr().String())
			c.setConn(conn)
		}
		c.attemptEnded()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.log.Warn("cx: cannot connect to the HSS", "err", err, "retry_in", delay.String())
			timer := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
			case <-c.kick:
				timer.Stop()
				if wait := c.cfg.ReconnectMin - time.Since(last); wait > 0 {
					select {
					case <-ctx.Done():
						return nil
					case <-time.After(wait):
					}
				}
			}
			delay = min(delay*2, c.cfg.ReconnectMax)
			continue
		}
		delay = c.cfg.ReconnectMin
		select {
		case <-ctx.Done():
			conn.Close()
			c.dropConn(conn)
			return nil
		case <-conn.(diam.CloseNotifier).CloseNotify():
			c.log.Warn("cx: connection to the HSS closed", "peer", conn.RemoteAddr().String())
			c.dropConn(conn)
		}
	}
}

// Connected returns a channel that is closed while a connection is up.
func (c *Client) Connected() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected
}

func (c *Client) dial(ctx context.Context) (diam.Conn, error) {
	addr, err := c.resolve(ctx)
	if err != nil {
		return nil, fmt.Errorf("resolve hss: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	raw, err := c.connectTCP(cctx, addr)
	if err != nil {
		return nil, err
	}
	// A fresh state machine per connection: go-diameter's client handshake registers its handlers on it.
	mux := sm.New(&sm.Settings{
		OriginHost:       datatype.DiameterIdentity(c.cfg.OriginHost),
		OriginRealm:      datatype.DiameterIdentity(c.cfg.OriginRealm),
		VendorID:         datatype.Unsigned32(Vendor3GPP),
		ProductName:      datatype.UTF8String(c.cfg.ProductName),
		OriginStateID:    datatype.Unsigned32(time.Now().Unix()),
		FirmwareRevision: 1,
		Dict:             Dict(),
	})
	for _, code := range []uint32{CmdUA, CmdSA, CmdLI, CmdMA} {
		mux.HandleIdx(diam.CommandIndex{AppID: AppID, Code: code, Request: false}, diam.HandlerFunc(c.deliver))
	}
	go func() {
		for e := range mux.ErrorReports() {
			c.log.Warn("cx: diameter error report", "err", e.Error)
		}
	}()
	cli := &sm.Client{
		Dict:               Dict(),
		Handler:            mux,
		MaxRetransmits:     1,
		RetransmitInterval: c.cfg.DialTimeout / 2,
		EnableWatchdog:     true,
		WatchdogInterval:   c.cfg.WatchdogInterval,
		SupportedVendorID:  []*diam.AVP{m0(avpSupportedVendorID, datatype.Unsigned32(Vendor3GPP))},
		VendorSpecificApplicationID: []*diam.AVP{m0(avpVendorSpecificApplicationID, grp(
			m0(avpVendorID, datatype.Unsigned32(Vendor3GPP)),
			m0(avpAuthApplicationID, datatype.Unsigned32(AppID))))},
	}
	conn, err := cli.NewConn(raw, addr)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("capabilities exchange with %s: %w", addr, err)
	}
	return conn, nil
}

func (c *Client) setAttempting() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempting = true
}

// attemptEnded wakes the requests waiting for the outcome of a connection attempt.
func (c *Client) attemptEnded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempting = false
	close(c.attempted)
	c.attempted = make(chan struct{})
}

func (c *Client) setConn(conn diam.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = conn
	c.downSince = time.Time{}
	close(c.connected)
}

func (c *Client) dropConn(conn diam.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != conn {
		return
	}
	c.conn = nil
	c.downSince = time.Now()
	c.connected = make(chan struct{})
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
}

func (c *Client) deliver(_ diam.Conn, m *diam.Message) {
	c.mu.Lock()
	ch, ok := c.pending[m.Header.HopByHopID]
	delete(c.pending, m.Header.HopByHopID)
	c.mu.Unlock()
	if !ok {
		c.log.Warn("cx: answer for no pending request", "cmd", m.Header.CommandCode, "hop_by_hop", m.Header.HopByHopID)
		return
	}
	ch <- m
}

// NewSessionID returns a Session-Id per RFC 6733 §8.8: <DiameterIdentity>;<high 32 bits>;<low 32 bits>.
func (c *Client) NewSessionID() string {
	return c.sidBase + strconv.FormatUint(c.sid.Add(1), 10)
}

// roundTrip sends a request and waits for its answer. It waits for a connection while ctx allows, so a request
// made while the client reconnects to a restarted HSS goes out as soon as it is back.
func (c *Client) roundTrip(ctx context.Context, code uint32, env *Envelope, payload []*diam.AVP) (*diam.Message, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
	}
	name := CommandName(code)
	if env.SessionID == "" {
		env.SessionID = c.NewSessionID()
	}
	env.OriginHost, env.OriginRealm = c.cfg.OriginHost, c.cfg.OriginRealm
	if env.DestinationRealm == "" {
		env.DestinationRealm = c.cfg.DestinationRealm
	}
	if env.DestinationHost == "" {
		env.DestinationHost = c.cfg.DestinationHost
	}
	conn, err := c.awaitConn(ctx, name)
	if err != nil {
		return nil, err
	}
	id := c.hbh.Add(1)
	m := diam.NewMessage(code, diam.RequestFlag|diam.ProxiableFlag, AppID, id, rand.Uint32(), Dict())
	m.AddAVP(m0(avpSessionID, datatype.UTF8String(env.SessionID)))
	m.AddAVP(m0(avpVendorSpecificApplicationID, grp(
		m0(avpVendorID, datatype.Unsigned32(Vendor3GPP)),
		m0(avpAuthApplicationID, datatype.Unsigned32(AppID)))))
	m.AddAVP(m0(avpAuthSessionState, datatype.Enumerated(AuthStateless)))
	for _, a := range env.avps() {
		m.AddAVP(a)
	}
	for _, a := range payload {
		m.AddAVP(a)
	}
	ch := make(chan *diam.Message, 1)
	c.mu.Lock()
	c.pending[id] = ch
	c.mu.Unlock()
	if _, err := m.WriteTo(conn); err != nil {
		c.forget(id)
		conn.Close()
		return nil, fmt.Errorf("%s: send: %w", name, err)
	}
	select {
	case ans, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s: %w", name, ErrConnectionLost)
		}
		return ans, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, fmt.Errorf("%s: no answer: %w", name, ctx.Err())
	}
}

// awaitConn returns the connection, waiting for it while ctx allows. Once the HSS has been unreachable for
// FailFastAfter it asks for an attempt on demand and waits for that attempt only (bounded by
// 2×(ConnectTimeout+ReconnectMin)).
func (c *Client) awaitConn(ctx context.Context, name string) (diam.Conn, error) {
	for {
		c.mu.Lock()
		conn, up, downSince := c.conn, c.connected, c.downSince
		c.mu.Unlock()
		if conn != nil {
			return conn, nil
		}
		if c.cfg.FailFastAfter > 0 && !downSince.IsZero() && time.Since(downSince) >= c.cfg.FailFastAfter {
			return c.attemptNow(ctx, name, downSince)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w (%w)", name, ErrNotConnected, ctx.Err())
		case <-up:
		}
	}
}

func (c *Client) attemptNow(ctx context.Context, name string, downSince time.Time) (diam.Conn, error) {
	c.mu.Lock()
	up, attempted, busy := c.connected, c.attempted, c.attempting
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default: // an attempt is already asked for
	}
	grace := time.NewTimer(2 * (c.cfg.ConnectTimeout + c.cfg.ReconnectMin))
	defer grace.Stop()
	// An attempt under way when this request came may have started before the HSS was back: wait for the one
	// after it too (the one asked for), within the grace.
	for waits := 1 + btoi(busy); waits > 0; waits-- {
		select {
		case <-up:
			waits = 0
		case <-attempted:
			c.mu.Lock()
			attempted = c.attempted
			c.mu.Unlock()
		case <-grace.C:
			waits = 0
		case <-ctx.Done():
			waits = 0
		}
	}
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		return conn, nil
	}
	return nil, fmt.Errorf("%s: %w (down for %s)", name, ErrNotConnected, time.Since(downSince).Round(time.Millisecond))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *Client) forget(id uint32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// resultOf reads Result-Code or Experimental-Result from an answer and turns an error result into an *Error.
func resultOf(name string, m *diam.Message) (Result, error) {
	var res Result
	if a := findAVP(m.AVP, avpResultCode, 0); a != nil {
		if code, ok := uint32Of(a); ok {
			res = Result{Code: code}
		}
	} else if a := findAVP(m.AVP, avpExperimentalResult, 0); a != nil {
		if g, ok := groupOf(a); ok {
			if rc := findAVP(g, avpExperimentalResultCode, 0); rc != nil {
				if code, ok := uint32Of(rc); ok {
					res = Result{Code: code, Experimental: true}
				}
			}
		}
	}
	if res.Code == 0 {
		return res, &Error{Command: name, Result: res, Message: "answer without Result-Code or Experimental-Result"}
	}
	if !res.IsSuccess() {
		msg := ""
		if a := findAVP(m.AVP, avpErrorMessage, 0); a != nil {
			msg, _ = stringOf(a)
		}
		return res, &Error{Command: name, Result: res, Message: msg}
	}
	return res, nil
}

// UserAuthorization sends a UAR. A Cx error result comes back as an *Error (see ResultOf).
func (c *Client) UserAuthorization(ctx context.Context, req *UAR) (*UAA, error) {
	m, err := c.roundTrip(ctx, CmdUA, &req.Envelope, req.avps())
	if err != nil {
		return nil, err
	}
	a := decodeUAA(m)
	a.Result, err = resultOf("UAR", m)
	return a, err
}

// LocationInfo sends a LIR.
func (c *Client) LocationInfo(ctx context.Context, req *LIR) (*LIA, error) {
	m, err := c.roundTrip(ctx, CmdLI, &req.Envelope, req.avps())
	if err != nil {
		return nil, err
	}
	a := decodeLIA(m)
	a.Result, err = resultOf("LIR", m)
	return a, err
}

// MultimediaAuth sends a MAR.
func (c *Client) MultimediaAuth(ctx context.Context, req *MAR) (*MAA, error) {
	m, err := c.roundTrip(ctx, CmdMA, &req.Envelope, req.avps())
	if err != nil {
		return nil, err
	}
	a := decodeMAA(m)
	a.Result, err = resultOf("MAR", m)
	return a, err
}

// ServerAssignment sends a SAR.
func (c *Client) ServerAssignment(ctx context.Context, req *SAR) (*SAA, error) {
	m, err := c.roundTrip(ctx, CmdSA, &req.Envelope, req.avps())
	if err != nil {
		return nil, err
	}
	a, derr := decodeSAA(m)
	if a == nil {
		return nil, fmt.Errorf("SAR: decode answer: %w", derr)
	}
	a.Result, err = resultOf("SAR", m)
	if err == nil && derr != nil {
		err = fmt.Errorf("SAR: decode answer: %w", derr)
	}
	return a, err
}
