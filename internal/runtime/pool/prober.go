package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// Prober checks that a peer answers. Probe returns nil when the peer is alive; Health bounds each call with
// HealthConfig.Timeout through ctx, and a Prober must return soon after ctx is done.
//
// Errors Health tells apart (for the event's reason): ErrProbeTimeout or context.DeadlineExceeded → "probe_timeout";
// ErrTransport or sip.ErrTransactionTransport → "transport_error"; *StatusError → the status code ("503"); anything
// else → "probe_error".
type Prober interface {
	Probe(ctx context.Context, t Target) error
}

// ProberFunc adapts a function to Prober.
type ProberFunc func(ctx context.Context, t Target) error

// Probe implements Prober.
func (f ProberFunc) Probe(ctx context.Context, t Target) error { return f(ctx, t) }

var (
	// ErrProbeTimeout: no final response within the probe timeout. A local timeout never counts as alive (unlike
	// Kamailio with ds_ping_reply_codes accepting 408, where a dead box never goes down).
	ErrProbeTimeout = errors.New("probe timeout")
	// ErrTransport: the request could not be sent (RFC 3261 §16.9 treats this as a 503).
	ErrTransport = errors.New("transport error")
)

// StatusError is a final response that counts as a failure: 408, 503 or 504 (FailureStatus).
type StatusError struct {
	Code   int
	Reason string
}

func (e *StatusError) Error() string { return "answered " + strconv.Itoa(e.Code) + " " + e.Reason }

// FailureStatus reports whether a final response code marks its sender as failed: 408, 503 and 504, the codes
// after which an initial request is retried at the next target (SPEC §2.2, the ACG rule). Both the OPTIONS prober
// and passive detection use this set, so that a peer live traffic takes down is not brought straight back up by a
// probe answered with the same code.
func FailureStatus(code int) bool { return code == 408 || code == 503 || code == 504 }

// SIPProber probes with SIP OPTIONS through a sipgo client. Any final response other than 408/503/504 means the
// peer is alive, including 4xx such as 405 (a sipgo server without an OPTIONS handler answers 405) and 483; only
// no answer within the timeout, a transport error or 408/503/504 count as a failed probe.
type SIPProber struct {
	client   *sipgo.Client
	fromHost string
}

// NewSIPProber returns a prober that sends OPTIONS sip:<target name> from sip:probe@fromHost through client. The
// client's UA should not be used for anything with a different Timer F expectation: the probe does not rely on
// Timer F (32 s) but terminates its transaction when ctx ends.
func NewSIPProber(client *sipgo.Client, fromHost string) *SIPProber {
	return &SIPProber{client: client, fromHost: fromHost}
}

// Probe implements Prober: one OPTIONS client transaction to t.Addr, terminated when ctx is done.
func (p *SIPProber) Probe(ctx context.Context, t Target) error {
	host := t.Name
	if host == "" {
		h, _, err := net.SplitHostPort(t.Addr)
		if err != nil {
			return fmt.Errorf("pool: probe %s: %w", t.Addr, err)
		}
		host = h
	}
	req := sip.NewRequest(sip.OPTIONS, sip.Uri{Scheme: "sip", Host: host})
	from := &sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: "probe", Host: p.fromHost}, Params: sip.NewParams()}
	from.Params.Add("tag", sip.GenerateTagN(16))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", Host: host}})
	req.SetDestination(t.Addr)

	// No options: sipgo builds Via, Call-ID, CSeq and Max-Forwards. ctx bounds the connection setup only.
	tx, err := p.client.TransactionRequest(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return probeCtxErr(ctx, t)
		}
		return fmt.Errorf("pool: probe %s: %w: %w", t, ErrTransport, err)
	}
	defer tx.Terminate() // sipgo would otherwise keep the transaction until Timer F (32 s)
	for {
		select {
		case res := <-tx.Responses():
			if res.IsProvisional() {
				continue
			}
			if FailureStatus(res.StatusCode) {
				return fmt.Errorf("pool: probe %s: %w", t, &StatusError{Code: res.StatusCode, Reason: res.Reason})
			}
			return nil
		case <-tx.Done():
			err := tx.Err()
			switch {
			case errors.Is(err, sip.ErrTransactionTimeout):
				return fmt.Errorf("pool: probe %s: %w: %w", t, ErrProbeTimeout, err)
			case errors.Is(err, sip.ErrTransactionTransport):
				return fmt.Errorf("pool: probe %s: %w: %w", t, ErrTransport, err)
			case err == nil:
				return fmt.Errorf("pool: probe %s: transaction ended without a final response", t)
			}
			return fmt.Errorf("pool: probe %s: %w", t, err)
		case <-ctx.Done():
			return probeCtxErr(ctx, t)
		}
	}
}

func probeCtxErr(ctx context.Context, t Target) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("pool: probe %s: %w: %w", t, ErrProbeTimeout, ctx.Err())
	}
	return fmt.Errorf("pool: probe %s: %w", t, ctx.Err())
}
