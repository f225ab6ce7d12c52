package store

import (
	"fmt"
	"time"
)

// RegState is the IMS registration state of a private identity as the HSS sees it (TS 29.228 §6.1.2).
type RegState string

// Registration states.
const (
	NotRegistered RegState = "not_registered"
	Registered    RegState = "registered"
	Unregistered  RegState = "unregistered" // registered for unregistered services (an S-CSCF holds the profile)
)

// Valid reports whether s is one of the defined states.
func (s RegState) Valid() bool {
	switch s {
	case NotRegistered, Registered, Unregistered:
		return true
	}
	return false
}

// Registration is what the HSS stores per private identity about its serving S-CSCF.
type Registration struct {
	IMPI          string    `json:"impi"`
	State         RegState  `json:"state"`
	ServerName    string    `json:"server_name,omitempty"`  // S-CSCF SIP URI stored in the HSS
	AuthPending   string    `json:"auth_pending,omitempty"` // S-CSCF that sent MAR, awaiting SAR
	AuthPendingAt time.Time `json:"auth_pending_at,omitzero"`
	OriginHost    string    `json:"origin_host,omitempty"` // Diameter Origin-Host of that S-CSCF
	Restoration   []byte    `json:"restoration,omitempty"` // raw wire bytes of the SCSCF-Restoration-Info AVP: opaque to the store
	RestorationAt time.Time `json:"restoration_at,omitzero"`
	RegisteredAt  time.Time `json:"registered_at,omitzero"`
	UpdatedAt     time.Time `json:"updated_at,omitzero"` // set by the store on every write
}

// validate checks what the store relies on; everything else is the caller's business.
func (r *Registration) validate() error {
	if !r.State.Valid() {
		return fmt.Errorf("registration %q: state: unknown state %q: %w", r.IMPI, r.State, ErrInvalid)
	}
	return nil
}
