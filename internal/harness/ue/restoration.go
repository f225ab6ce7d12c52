package ue

import (
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// What a phone does with a 504 that carries the 3GPP restoration body (Config.OnRestoration504).
const (
	// RestorationReregister: an initial registration at once (TS 24.229 §5.1.2A.1.1: a UE that gets 504 with
	// <alternative-service><type>restoration</type><action>initial-registration</action> registers again).
	RestorationReregister = "reregister"
	// RestorationIgnore: nothing; the phone recovers at its next periodic refresh (a phone without the feature).
	RestorationIgnore = "ignore"
)

// kindRestoration is the kind of the registration records a restoration 504 triggered.
const kindRestoration = "restoration"

// onRestoration reacts to a restoration 504 for one of the phone's requests, sent at sent: with
// RestorationReregister it starts one initial registration (a new Call-ID) unless one is already on its way or
// one succeeded after the request was sent (the 504 answers the state before it).
func (p *Phone) onRestoration(callID string, sent time.Time) {
	u := p.ue
	p.mu.Lock()
	stale := p.registeredAt.After(sent)
	p.mu.Unlock()
	action := u.cfg.OnRestoration504
	if stale {
		action = "none (registered again since)"
	}
	u.events.Emit(obs.Restoration504{IMPU: p.impu, CallID: callID, Action: action})
	if stale || u.cfg.OnRestoration504 != RestorationReregister || !p.restoring.CompareAndSwap(false, true) {
		return
	}
	if !u.goBackground(func() {
		defer p.restoring.Store(false)
		if u.runCtx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.regCallID = "" // an initial registration: a new Call-ID (and From tag)
		p.mu.Unlock()
		_ = p.register(u.runCtx, kindRestoration)
	}) {
		p.restoring.Store(false)
	}
}
