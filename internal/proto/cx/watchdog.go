package cx

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
)

// The server runs the Diameter device watchdog (RFC 6733 §5.5, RFC 3539 §3.4.1) on each connection once its CER is
// admitted. When nothing has been received for Tw, it sends a DWR; anything received (an answer to it, a request,
// the peer's own DWR) counts as life and starts Tw again. It closes the connection only after MaxMissed DWRs in a
// row went unanswered, so a dead peer is dropped (MaxMissed+1)·Tw after its last message: about 90 s with the
// defaults. The peer's own DWRs are answered by go-diameter's state machine (DWA 2001).
//
// Clients run the same watchdog with the same default Tw (Kamailio's cdp sends its first DWR after 30–36 s of
// silence), so the server must not close a silent connection before its peers probe it; the idle timeout it
// replaces did exactly that.

// Watchdog defaults: RFC 3539's Tw and its ± 2 s jitter.
const (
	DefaultWatchdogInterval  = 30 * time.Second
	DefaultWatchdogMaxMissed = 2
)

// WatchdogConfig configures the device watchdog of a server's connections.
type WatchdogConfig struct {
	// Interval is Tw, the silence after which a DWR is sent (default 30s). RFC 3539 asks for at least 6 s; shorter
	// values are for tests.
	Interval time.Duration `yaml:"interval,omitempty"`
	// Jitter: each Tw is drawn anew, uniformly in Interval ± Jitter (default Interval/15, the RFC's ± 2 s at 30 s).
	Jitter time.Duration `yaml:"jitter,omitempty"`
	// MaxMissed is how many DWRs in a row may go unanswered before the connection is closed (default 2).
	MaxMissed int `yaml:"max_missed,omitempty"`
}

// Validate checks the configuration as it will be used (zero fields take their defaults) and names the bad field
// after prefix (e.g. "hss config: watchdog").
func (w WatchdogConfig) Validate(prefix string) error {
	switch {
	case w.Interval < 0:
		return fmt.Errorf("%s.interval: must not be negative, is %s", prefix, w.Interval)
	case w.Jitter < 0:
		return fmt.Errorf("%s.jitter: must not be negative, is %s", prefix, w.Jitter)
	case w.MaxMissed < 0:
		return fmt.Errorf("%s.max_missed: must not be negative (0: default %d), is %d", prefix, DefaultWatchdogMaxMissed, w.MaxMissed)
	}
	d := w.WithDefaults()
	if d.Jitter >= d.Interval {
		return fmt.Errorf("%s.jitter: %s must be less than the interval (%s)", prefix, d.Jitter, d.Interval)
	}
	return nil
}

// WithDefaults returns the configuration with its zero fields set to their defaults.
func (w WatchdogConfig) WithDefaults() WatchdogConfig {
	if w.Interval == 0 {
		w.Interval = DefaultWatchdogInterval
	}
	if w.Jitter == 0 {
		w.Jitter = w.Interval / 15
	}
	if w.MaxMissed == 0 {
		w.MaxMissed = DefaultWatchdogMaxMissed
	}
	return w
}

// tw draws one Tw: Interval ± Jitter, uniformly.
func (w WatchdogConfig) tw() time.Duration {
	if w.Jitter <= 0 {
		return w.Interval
	}
	return w.Interval - w.Jitter + rand.N(2*w.Jitter+1)
}

// watchdog is the device watchdog of one connection. alive is called for every message received after the CER. A
// nil watchdog does nothing (a guardConn built without a listener, as the fuzzer does).
type watchdog struct {
	c   *guardConn
	cfg WatchdogConfig

	mu      sync.Mutex
	timer   *time.Timer
	due     time.Time // when the current Tw runs out
	lastRx  time.Time
	missed  int // DWRs sent since the last message received
	stopped bool
}

// alive records a message received: the count of unanswered DWRs is reset and a new Tw starts.
func (w *watchdog) alive() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	now := time.Now()
	tw := w.cfg.tw()
	w.lastRx, w.missed, w.due = now, 0, now.Add(tw)
	if w.timer == nil {
		w.timer = time.AfterFunc(tw, w.expire)
	} else {
		w.timer.Reset(tw)
	}
}

// stop ends the watchdog (the connection is closing).
func (w *watchdog) stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// expire runs when a Tw may have run out: it sends a DWR, or closes the connection after MaxMissed unanswered ones.
func (w *watchdog) expire() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	now := time.Now()
	if now.Before(w.due) { // a message arrived while the timer fired
		w.timer.Reset(w.due.Sub(now))
		w.mu.Unlock()
		return
	}
	if w.missed >= w.cfg.MaxMissed {
		missed, silent := w.missed, now.Sub(w.lastRx)
		w.stopped = true
		w.mu.Unlock()
		host, _, _ := w.c.cp.get()
		w.c.s.refuse(Refusal{Peer: host, Remote: w.c.RemoteAddr().String(), Reason: RefusedWatchdog,
			Detail: fmt.Sprintf("closing the connection: %d DWRs unanswered, nothing received for %s",
				missed, silent.Round(time.Millisecond))})
		_ = w.c.Close()
		return
	}
	w.missed++
	tw := w.cfg.tw()
	w.due = now.Add(tw)
	w.timer.Reset(tw)
	w.mu.Unlock()
	// Outside the lock: a write to a peer that stopped reading may block until the next expiry closes the
	// connection.
	if err := w.c.s.writeDWR(w.c); err != nil {
		host, _, _ := w.c.cp.get()
		w.c.s.log.Warn("cx: watchdog: cannot send DWR", "peer", host, "remote", w.c.RemoteAddr().String(), "err", err)
	}
}

// writeDWR sends a Device-Watchdog-Request (RFC 6733 §5.5.1) with the state machine's identity.
func (s *Server) writeDWR(c *guardConn) error {
	st := s.sm.Settings()
	m := diam.NewRequest(diam.DeviceWatchdog, 0, Dict())
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, st.OriginHost)
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, st.OriginRealm)
	if st.OriginStateID != 0 {
		m.NewAVP(avp.OriginStateID, avp.Mbit, 0, datatype.Unsigned32(st.OriginStateID))
	}
	_, err := m.WriteTo(c)
	return err
}
