package icscf

import (
	"context"
	"strings"

	"github.com/icholy/digest"

	"github.com/imslab/quasipool/internal/proto/cx"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// onRegister: UAR, then the assigned S-CSCF, and when it cannot be reached UAR with UAT 2 and another S-CSCF
// (SPEC §3.1, §4.4). No S-CSCF left: 504.
// Registrations come through a P-CSCF: a REGISTER from anyone else (a phone, a stranger, the BAC, another CSCF) is
// refused before the HSS is asked.
func (n *Node) onRegister(r *sipx.Request) {
	req := r.Req
	if r.Role != sipx.RolePCSCF {
		n.px.Refuse(r, "register_not_from_pcscf")
		return
	}
	to := req.To()
	if to == nil {
		r.Reply(n.px, 400, "Bad Request")
		return
	}
	impu := sipx.AOR(to.Address)
	impi := strings.TrimPrefix(impu, "sip:")
	if a := sipx.FirstHeader(req, "Authorization"); a != "" {
		if c, err := digest.ParseCredentials(a); err == nil && c.Username != "" {
			impi = c.Username
		}
	}
	vni := sipx.FirstHeader(req, sipx.HdrPVisitedNetworkID)
	if vni == "" {
		vni = n.cfg.VisitedNetwork
	}
	// A de-registration is UAR DE_REGISTRATION however the expiry 0 is written: "Contact: <…>;expires=0" (the
	// parameter wins over the Expires header), "Expires: 0", or "Contact: *" with "Expires: 0".
	dereg := vocab.IsDeregistration(req)
	n.selectAndForward(r, selection{
		// Re-selection with UAT 2 always, no DNS failover (restore.Policy.UARSelection).
		Selection: n.policy.UARSelection(),
		cmd:       "UAR",
		impu:      impu,
		query: func(ctx context.Context, uat2 bool) (string, *cx.ServerCapabilities, error) {
			t := cx.UATRegistration
			switch {
			case uat2:
				t = cx.UATRegistrationAndCapabilities
			case dereg:
				t = cx.UATDeRegistration
			}
			uaa, err := n.hss.UserAuthorization(ctx, &cx.UAR{UserName: impi, PublicIdentity: impu,
				VisitedNetworkIdentifier: strings.Trim(vni, `"`), AuthorizationType: t})
			if err != nil {
				return "", nil, err
			}
			return uaa.ServerName, uaa.ServerCapabilities, nil
		},
		capsWithoutName: true,
	})
}
