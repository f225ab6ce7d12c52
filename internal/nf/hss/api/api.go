// Package api is the HSS's HTTP JSON API for provisioning subscribers and inspecting registrations (the
// S-CSCF name and the stored SCSCF-Restoration-Info). It is a thin layer over store.DB.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DefaultAddr is where the API listens unless configured otherwise: loopback only (see Guard for the checks).
const DefaultAddr = "127.0.0.1:8090"

// Config configures the API listener.
type Config struct {
	Addr string `json:"addr" yaml:"addr"` // host:port; default DefaultAddr
}

// SetDefaults fills unset fields.
func (c *Config) SetDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
}

// Validate checks the config and names the bad field.
func (c Config) Validate() error {
	_, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("api: addr: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("api: addr: invalid port %q", port)
	}
	return nil
}

// RestorationDecoder turns the raw SCSCF-Restoration-Info AVP stored for a user into a JSON-encodable value.
// It is provided by the caller (the Cx code knows the AVP); a nil decoder shows the raw bytes in base64.
type RestorationDecoder func(raw []byte) (any, error)

// Serve serves h on ln until ctx ends, then shuts down gracefully (at most 5s) and returns nil.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("api: serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api: serve %s: %w", ln.Addr(), err)
	}
	return nil
}
