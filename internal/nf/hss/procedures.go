package hss

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/imslab/quasipool/internal/nf/hss/store"
	"github.com/imslab/quasipool/internal/proto/cx"
)

// Procedures implements cx.Handler over the store: the HSS side of TS 29.228 §6.1–6.3.
type Procedures struct {
	db   *store.DB
	caps map[string]cx.ServerCapabilities
	now  func() time.Time
}

// NewProcedures builds the Cx handler over db with the configured capability sets.
func NewProcedures(db *store.DB, caps map[string]cx.ServerCapabilities) *Procedures {
	return &Procedures{db: db, caps: caps, now: time.Now}
}

var _ cx.Handler = (*Procedures)(nil)

// identify finds the subscriber of a public identity and checks that the private identity (if given) owns it.
func (p *Procedures) identify(impi, impu string) (store.Subscriber, error) {
	if impu == "" {
		sub, err := p.db.GetSubscriber(impi)
		if errors.Is(err, store.ErrNotFound) {
			return sub, cx.Answerf(cx.ErrorUserUnknown, "unknown private identity %s", impi)
		}
		return sub, err
	}
	sub, err := p.db.LookupIMPU(impu)
	if errors.Is(err, store.ErrNotFound) {
		return sub, cx.Answerf(cx.ErrorUserUnknown, "unknown public identity %s", impu)
	}
	if err != nil {
		return sub, err
	}
	if impi != "" && sub.IMPI != impi {
		if _, err := p.db.GetSubscriber(impi); errors.Is(err, store.ErrNotFound) {
			return sub, cx.Answerf(cx.ErrorUserUnknown, "unknown private identity %s", impi)
		}
		return sub, cx.Answerf(cx.ErrorIdentitiesDontMatch, "%s does not belong to %s", impu, impi)
	}
	return sub, nil
}

// capabilities returns a copy of the subscriber's capability set.
func (p *Procedures) capabilities(sub store.Subscriber) *cx.ServerCapabilities {
	name := sub.CapabilitySet
	if name == "" {
		name = "default"
	}
	c, ok := p.caps[name]
	if !ok {
		c = p.caps["default"]
	}
	return &cx.ServerCapabilities{
		Mandatory:   slices.Clone(c.Mandatory),
		Optional:    slices.Clone(c.Optional),
		ServerNames: slices.Clone(c.ServerNames),
	}
}

// hasName reports whether the registration holds an S-CSCF name the HSS would route to.
func hasName(r store.Registration) bool { return r.ServerName != "" }

// UserAuthorization answers a UAR (TS 29.228 §6.1.1.1, and the study's UAT 2).
func (p *Procedures) UserAuthorization(_ context.Context, q *cx.UAR) (*cx.UAA, error) {
	sub, err := p.identify(q.UserName, q.PublicIdentity)
	if err != nil {
		return nil, err
	}
	if len(sub.VisitedNetworks) > 0 && !slices.Contains(sub.VisitedNetworks, q.VisitedNetworkIdentifier) {
		return nil, cx.Answerf(cx.ErrorRoamingNotAllowed, "visited network %q not allowed for %s", q.VisitedNetworkIdentifier, sub.IMPI)
	}
	reg, err := p.db.GetRegistration(sub.IMPI)
	if err != nil {
		return nil, fmt.Errorf("hss: uar for %s: %w", sub.IMPI, err)
	}
	switch q.AuthorizationType {
	case cx.UATRegistrationAndCapabilities:
		// The stored S-CSCF cannot be reached: give the I-CSCF what it needs to choose another one, and no name.
		return &cx.UAA{Result: cx.Success, ServerCapabilities: p.capabilities(sub)}, nil
	case cx.UATDeRegistration:
		if reg.State == store.NotRegistered || !hasName(reg) {
			return nil, cx.Answerf(cx.ErrorIdentityNotRegistered, "%s is not registered", q.PublicIdentity)
		}
		return &cx.UAA{Result: cx.Success, ServerName: reg.ServerName}, nil
	default:
		if hasName(reg) {
			return &cx.UAA{Result: cx.SubsequentRegistration, ServerName: reg.ServerName}, nil
		}
		return &cx.UAA{Result: cx.FirstRegistration, ServerCapabilities: p.capabilities(sub)}, nil
	}
}

// LocationInfo answers a LIR (TS 29.228 §6.1.4). With User-Authorization-Type 2 (the study's takeover query) a
// served user's answer carries the S-CSCF name and the capabilities, so the I-CSCF can pick another S-CSCF when
// the stored one is down.
func (p *Procedures) LocationInfo(_ context.Context, q *cx.LIR) (*cx.LIA, error) {
	sub, err := p.identify("", q.PublicIdentity)
	if err != nil {
		return nil, err
	}
	reg, err := p.db.GetRegistration(sub.IMPI)
	if err != nil {
		return nil, fmt.Errorf("hss: lir for %s: %w", sub.IMPI, err)
	}
	withCaps := q.AuthorizationType != nil && *q.AuthorizationType == cx.UATRegistrationAndCapabilities
	served := reg.State != store.NotRegistered && hasName(reg)
	mayServeUnregistered := q.Originating || sub.UnregisteredServices
	switch {
	case served, hasName(reg) && mayServeUnregistered:
		a := &cx.LIA{Result: cx.Success, ServerName: reg.ServerName}
		if withCaps {
			a.ServerCapabilities = p.capabilities(sub)
		}
		return a, nil
	case mayServeUnregistered:
		return &cx.LIA{Result: cx.UnregisteredService, ServerCapabilities: p.capabilities(sub)}, nil
	default:
		return nil, cx.Answerf(cx.ErrorIdentityNotRegistered, "%s is not registered", q.PublicIdentity)
	}
}

// MultimediaAuth answers a MAR (TS 29.228 §6.3) for SIP Digest and remembers the S-CSCF as authentication-pending.
func (p *Procedures) MultimediaAuth(ctx context.Context, q *cx.MAR) (*cx.MAA, error) {
	sub, err := p.identify(q.UserName, q.PublicIdentity)
	if err != nil {
		return nil, err
	}
	// Scheme names are compared regardless of case; "Unknown" (or none) lets the HSS choose the subscriber's own.
	// Only SIP Digest is served: the store holds HA1, not the cleartext password "Digest-MD5" would need.
	scheme := q.AuthItem.Scheme
	if scheme == "" || cx.SameScheme(scheme, cx.SchemeUnknown) {
		scheme = sub.AuthScheme
	}
	if !cx.SameScheme(scheme, cx.SchemeSIPDigest) || !cx.SameScheme(sub.AuthScheme, cx.SchemeSIPDigest) {
		return nil, cx.Answerf(cx.ErrorAuthSchemeNotSupported, "authentication scheme %q is not supported for %s", scheme, sub.IMPI)
	}
	// Every unauthenticated REGISTER costs a MAR: one that would store what is already stored writes nothing
	// (checked on the cached read first, then again inside the write).
	unchanged := func(reg store.Registration) bool {
		return reg.AuthPending == q.ServerName && reg.OriginHost == q.OriginHost &&
			(reg.State != store.NotRegistered || hasName(reg))
	}
	reg, err := p.db.GetRegistration(sub.IMPI)
	if err != nil {
		return nil, fmt.Errorf("hss: mar for %s: %w", sub.IMPI, err)
	}
	if !unchanged(reg) {
		now := p.now()
		_, err = p.db.Update(ctx, sub.IMPI, func(_ store.Subscriber, reg *store.Registration) error {
			if unchanged(*reg) {
				return errUnchanged
			}
			reg.AuthPending, reg.AuthPendingAt, reg.OriginHost = q.ServerName, now, q.OriginHost
			if reg.State == store.NotRegistered && !hasName(*reg) {
				// Until the SAR, this S-CSCF is where a new UAR points.
				reg.ServerName = q.ServerName
			}
			reg.UpdatedAt = now
			return nil
		})
		if err != nil && !errors.Is(err, errUnchanged) {
			return nil, fmt.Errorf("hss: mar for %s: %w", sub.IMPI, err)
		}
	}
	return &cx.MAA{
		Result:          cx.Success,
		UserName:        sub.IMPI,
		PublicIdentity:  q.PublicIdentity,
		NumberAuthItems: 1,
		AuthItems: []cx.AuthItem{{
			ItemNumber: 1,
			Scheme:     cx.SchemeSIPDigest,
			Digest:     &cx.DigestAuthenticate{Realm: sub.Realm, Algorithm: "MD5", QoP: "auth", HA1: sub.HA1},
		}},
	}, nil
}

// errUnchanged makes store.Update write nothing while the procedure still answers success.
var errUnchanged = errors.New("hss: registration unchanged")

// ServerAssignment answers a SAR for every Cx Server-Assignment-Type (TS 29.228 §6.1.2) and keeps the
// SCSCF-Restoration-Info (TS 23.380): stored on SAR 1/2, returned on SAR 0/3 and to a new S-CSCF, deleted on
// de-registration.
func (p *Procedures) ServerAssignment(ctx context.Context, q *cx.SAR) (*cx.SAA, error) {
	impu := ""
	if len(q.PublicIdentities) > 0 {
		impu = q.PublicIdentities[0]
	}
	sub, err := p.identify(q.UserName, impu)
	if err != nil {
		return nil, err
	}
	for _, other := range q.PublicIdentities[min(1, len(q.PublicIdentities)):] {
		if !slices.Contains(sub.IMPUs, other) {
			return nil, cx.Answerf(cx.ErrorIdentitiesDontMatch, "%s does not belong to %s", other, sub.IMPI)
		}
	}
	if q.AssignmentType > cx.SATDeregistrationTooMuchData {
		return nil, cx.Answerf(cx.ErrorInAssignmentType, "server assignment type %s is not used on Cx", q.AssignmentType)
	}
	if q.Restoration != nil && q.Restoration.UserName != sub.IMPI {
		return nil, cx.Answerf(cx.ErrorIdentitiesDontMatch, "restoration info of %s sent for %s", q.Restoration.UserName, sub.IMPI)
	}
	a := &cx.SAA{Result: cx.Success, UserName: sub.IMPI}
	profile := false
	now := p.now()

	if q.AssignmentType == cx.SATNoAssignment {
		// Read-only: the profile and, for a registered user, the restoration info, from the assigned S-CSCF only.
		reg, err := p.db.GetRegistration(sub.IMPI)
		if err != nil {
			return nil, fmt.Errorf("hss: sar for %s: %w", sub.IMPI, err)
		}
		if hasName(reg) && reg.ServerName != q.ServerName {
			return nil, cx.Answerf(cx.UnableToComply, "%s is assigned to %s, not %s: use UNREGISTERED_USER to take it over",
				sub.IMPI, reg.ServerName, q.ServerName)
		}
		if reg.State == store.Registered && len(reg.Restoration) > 0 {
			a.RestorationRaw = [][]byte{reg.Restoration}
		}
		p.fillProfile(a, sub, q)
		return a, nil
	}

	_, err = p.db.Update(ctx, sub.IMPI, func(_ store.Subscriber, reg *store.Registration) error {
		a.RestorationRaw, profile = nil, false // Update may run fn again
		stale := reg.State != store.NotRegistered && hasName(*reg) && reg.ServerName != q.ServerName
		switch q.AssignmentType {
		case cx.SATRegistration, cx.SATReRegistration:
			if reg.State == store.Registered && stale && len(reg.Restoration) > 0 {
				a.RestorationRaw = [][]byte{reg.Restoration} // a new S-CSCF gets what the old one stored
			}
			if reg.State != store.Registered || q.AssignmentType == cx.SATRegistration {
				reg.RegisteredAt = now
			}
			reg.State, reg.ServerName, reg.OriginHost = store.Registered, q.ServerName, q.OriginHost
			reg.AuthPending, reg.AuthPendingAt = "", time.Time{}
			if len(q.RestorationRaw) > 0 {
				reg.Restoration, reg.RestorationAt = q.RestorationRaw, now
			}
			profile = true
		case cx.SATUnregisteredUser:
			if reg.State == store.Registered {
				// Takeover: the user stays registered, the new S-CSCF is recorded and gets the restoration info.
				if len(reg.Restoration) > 0 {
					a.RestorationRaw = [][]byte{reg.Restoration}
				}
			} else {
				reg.State = store.Unregistered
			}
			reg.ServerName, reg.OriginHost = q.ServerName, q.OriginHost
			profile = true
		case cx.SATTimeoutDeregistration, cx.SATUserDeregistration, cx.SATAdministrativeDeregistration,
			cx.SATDeregistrationTooMuchData:
			if stale {
				return errUnchanged // an S-CSCF that lost the user must not de-register it from its new one
			}
			*reg = store.Registration{IMPI: reg.IMPI, State: store.NotRegistered}
		case cx.SATTimeoutDeregistrationStoreName, cx.SATUserDeregistrationStoreName:
			if stale {
				return errUnchanged
			}
			state := store.NotRegistered
			if sub.UnregisteredServices {
				state = store.Unregistered
			}
			*reg = store.Registration{IMPI: reg.IMPI, State: state, ServerName: q.ServerName, OriginHost: q.OriginHost}
		case cx.SATAuthenticationFailure, cx.SATAuthenticationTimeout:
			reg.AuthPending, reg.AuthPendingAt = "", time.Time{}
			if reg.State == store.NotRegistered {
				reg.ServerName = ""
			}
		}
		reg.UpdatedAt = now
		return nil
	})
	if err != nil && !errors.Is(err, errUnchanged) {
		return nil, fmt.Errorf("hss: sar %s for %s: %w", q.AssignmentType, sub.IMPI, err)
	}
	if profile {
		p.fillProfile(a, sub, q)
	}
	return a, nil
}

func (p *Procedures) fillProfile(a *cx.SAA, sub store.Subscriber, q *cx.SAR) {
	if !q.UserDataAlreadyAvailable {
		a.UserData = UserData(sub)
	}
}

// imsSubscription is the User-Data document of TS 29.228 Annex E (the parts the testbed uses).
type imsSubscription struct {
	XMLName        xml.Name `xml:"IMSSubscription"`
	PrivateID      string   `xml:"PrivateID"`
	ServiceProfile struct {
		PublicIdentity []publicIdentity `xml:"PublicIdentity"`
		Extra          string           `xml:",innerxml"`
	} `xml:"ServiceProfile"`
}

type publicIdentity struct {
	BarringIndication int    `xml:"BarringIndication"`
	Identity          string `xml:"Identity"`
}

// UserData renders a subscriber's IMSSubscription XML document.
func UserData(sub store.Subscriber) []byte {
	var doc imsSubscription
	doc.PrivateID = sub.IMPI
	for _, u := range sub.IMPUs {
		doc.ServiceProfile.PublicIdentity = append(doc.ServiceProfile.PublicIdentity, publicIdentity{Identity: u})
	}
	doc.ServiceProfile.Extra = strings.TrimSpace(sub.ServiceProfileXML)
	b, err := xml.Marshal(doc)
	if err != nil {
		return nil
	}
	return append([]byte(xml.Header), b...)
}
