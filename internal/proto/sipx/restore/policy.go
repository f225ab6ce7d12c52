// Package restore is the quasi-pool takeover policy (SPEC §4, docs/schemes.md) in one type: every decision a
// P-CSCF, the I-CSCF or an S-CSCF takes about restoring a user whose state it does not hold is a method of Policy,
// so a reader finds them side by side and the nodes only carry them out.
//
// The decisions, by node and direction:
//
//	P-CSCF, MO (Policy.PCSCFOriginating): a caller it does not hold, or whose S-CSCF cannot be reached, goes to the
//	    I-CSCF marked orig;restore=1 (SPEC §4.1, §4.5); without the takeover it gets a restoration 504.
//	P-CSCF, MT (Policy.PCSCFPassesUnknownCallee): a request from an S-CSCF for a callee it does not hold is passed
//	    on by its Request-URI (SPEC §4.2); without the takeover it is answered 480.
//	P-CSCF, I-CSCF (Policy.SCSCFHop): the S-CSCF of a Service-Route or of the HSS, alone or with the replicas of
//	    its per-host SRV record.
//	I-CSCF (Policy.ICSCFMarker): restore=1 is honoured from a P-CSCF only, and only when either pool runs the
//	    quasi-pool.
//	I-CSCF (Policy.LIRSelection, Policy.UARSelection): when the HSS is asked with User-Authorization-Type 2
//	    (REGISTRATION_AND_CAPABILITIES) and another S-CSCF is chosen (SPEC §4.1, §4.4, §4.6).
//	S-CSCF, MO (Policy.SCSCFOriginating) and MT (Policy.SCSCFTerminating): whom it takes a user over for, with SAR
//	    UNREGISTERED_USER and the SCSCF-Restoration-Info the HSS returns (SPEC §4.5, §4.6).
//
// The trust checks that come before these (who may send orig and restore=1 at all, identity headers) are the
// prelude's (sipx.Proxy, docs/security.md).
package restore

import (
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// Marker is the restore=1 Route parameter, next to orig (SPEC §4): "this request is a takeover".
const Marker = sipx.ParamRestore + "=1"

// Policy is what one node does about the quasi-pool takeover. topology.NodeConfig.Policy derives it from the
// protection schemes of the two pools; the node configurations carry its fields (nil Restore: true).
type Policy struct {
	// Restore: the node runs the quasi-pool takeover. P-CSCF: restore=1 towards the I-CSCF and terminating
	// requests for users it does not hold passed on (P-CSCF pool scheme). I-CSCF: LIR with UAT 2 and another
	// S-CSCF when the stored one cannot be reached. S-CSCF: users it does not hold restored from the HSS (S-CSCF
	// pool scheme).
	Restore bool
	// AcceptRestore (I-CSCF): honour restore=1 from a trusted P-CSCF (either pool runs the quasi-pool).
	AcceptRestore bool
	// SCSCFFailover (P-CSCF, I-CSCF): reach an S-CSCF through its per-host SRV record, so a member holding a
	// replicated copy serves its users (the S-CSCF pool replicates).
	SCSCFFailover bool
}

// Verdict is what a node does with a request for a user whose state it does not hold.
type Verdict int

const (
	// Take: take the user over (a P-CSCF: orig;restore=1 to the I-CSCF; the I-CSCF: the marker honoured; an
	// S-CSCF: SAR UNREGISTERED_USER and the restored registration).
	Take Verdict = iota
	// Refuse: the sender may not ask for a takeover: 403 and a "refused" event with Decision.Reason.
	Refuse
	// Reregister: no takeover; 504 with the restoration body (reason Decision.Reason) asks the UE to register again
	// (TS 24.229 §5.2.6.3, §5.4.3.2).
	Reregister
	// NoRestoration: the I-CSCF does not run the takeover: 403 "Forbidden (no restoration)".
	NoRestoration
	// Unavailable: no takeover for a terminating request: 480 Temporarily Unavailable.
	Unavailable
)

// Decision is a Verdict and its reason: the refused event's reason for Refuse, the restoration body's reason for
// Reregister, the restore event's reason for a P-CSCF's Take.
type Decision struct {
	Verdict Verdict
	Reason  string
}

// Reasons of the decisions.
const (
	ReasonNotRegisteredHere = "not_registered_here"             // a P-CSCF's takeover of a caller it does not hold
	ReasonSCSCFUnreachable  = "scscf_unreachable"               // a P-CSCF's takeover of a caller whose S-CSCF is silent
	ReasonNotFromPCSCF      = "restore_not_from_pcscf"          // restore=1 at the I-CSCF from anyone but a P-CSCF
	ReasonNotFromPCSCFICSCF = "restore_not_from_pcscf_or_icscf" // an S-CSCF's MO takeover asked by another sender
	ReasonNotFromICSCF      = "restore_not_from_icscf"          // an S-CSCF's MT takeover asked by another sender
)

// PCSCFOriginating is the P-CSCF's decision for an originating request it cannot send by a Service-Route: the
// caller is not registered here (scscfUnreachable false) or its S-CSCF did not answer (true). With the takeover the
// request goes to the I-CSCF marked orig;restore=1 (Take, SPEC §4.1, §4.5); without it the UE is asked to register
// again (Reregister, TS 24.229 §5.2.6.3).
func (p Policy) PCSCFOriginating(scscfUnreachable bool) Decision {
	switch {
	case p.Restore && scscfUnreachable:
		return Decision{Take, ReasonSCSCFUnreachable}
	case p.Restore:
		return Decision{Take, ReasonNotRegisteredHere}
	case scscfUnreachable:
		return Decision{Reregister, vocab.ReasonSCSCFUnreachable}
	default:
		return Decision{Reregister, vocab.ReasonNotRegisteredHere}
	}
}

// PCSCFPassesUnknownCallee reports whether a P-CSCF passes on a terminating request (from a trusted S-CSCF) for a
// callee it holds no registration of: with the takeover it does, by the Request-URI (SPEC §4.2); without it the
// callee is unreachable until it registers again (480).
func (p Policy) PCSCFPassesUnknownCallee() bool { return p.Restore }

// SCSCFHop is the hop to a named S-CSCF (of a Service-Route, or chosen by the I-CSCF): the S-CSCF alone, whose
// failure the takeover handles (restore=1, UAT 2); or, when the S-CSCF pool replicates (SCSCFFailover), its
// per-host SRV record, so that a member holding a replicated copy serves the user.
func (p Policy) SCSCFHop(host string) sipx.Hop { return SCSCFHop(host, p.SCSCFFailover) }

// SCSCFHop is the hop to a named S-CSCF, with or without its per-host SRV record's failover.
func SCSCFHop(host string, failover bool) sipx.Hop {
	if failover {
		return sipx.SRVHop(host)
	}
	return sipx.PinnedHop(host)
}

// ICSCFMarker is the I-CSCF's decision for a request that carries restore=1 on its Route entry: honoured from a
// P-CSCF only (an S-CSCF or an I-CSCF never asks for it; Refuse), and only when either pool runs the quasi-pool
// (AcceptRestore; NoRestoration otherwise).
func (p Policy) ICSCFMarker(from sipx.Role) Decision {
	switch {
	case from != sipx.RolePCSCF:
		return Decision{Refuse, ReasonNotFromPCSCF}
	case !p.AcceptRestore:
		return Decision{NoRestoration, ""}
	default:
		return Decision{Take, ""}
	}
}

// Selection is the policy part of one S-CSCF selection at the I-CSCF: when the HSS is asked with
// User-Authorization-Type 2 (REGISTRATION_AND_CAPABILITIES: the stored S-CSCF's name, if any, and the capabilities
// to choose another) and how the chosen S-CSCF is reached.
type Selection struct {
	// UAT2AtOnce: the first query asks with UAT 2 (a takeover the sender asked for: restore=1 from a P-CSCF).
	UAT2AtOnce bool
	// WalkAtOnce: the candidates from the capabilities follow the stored S-CSCF at once, without a second query.
	WalkAtOnce bool
	// Reselect allows one UAT 2 query when every S-CSCF tried failed.
	Reselect bool
	// MarkRestore adds restore=1 to the S-CSCF's Route entry after the UAT 2 query: the I-CSCF tells the new
	// S-CSCF it is taking over the user (SPEC §4.6).
	MarkRestore bool
	// Failover sends through the S-CSCF's per-host SRV record (SCSCFHop).
	Failover bool
}

// LIRSelection is the selection for a request other than REGISTER (LIR, SPEC §3.2, §4.1, §4.5, §4.6); marked is
// restore=1 from a P-CSCF (ICSCFMarker said Take). A marked request asks with UAT 2 at once and, with the S-CSCF
// takeover, walks the candidates right after the stored S-CSCF; re-selection after the S-CSCFs tried failed is the
// S-CSCF takeover (Restore), and the new S-CSCF is told with restore=1.
func (p Policy) LIRSelection(marked bool) Selection {
	return Selection{UAT2AtOnce: marked, WalkAtOnce: marked && p.Restore, Reselect: p.Restore, MarkRestore: true,
		Failover: p.SCSCFFailover}
}

// UARSelection is the selection for REGISTER (UAR, SPEC §3.1, §4.4): re-selection with UAT 2 when the stored
// S-CSCF cannot be reached is standard 3GPP (TS 24.229 §5.3.1.2), under every scheme. No DNS failover, even with
// replication: the challenge and the answer must reach the same S-CSCF, which the UAT 2 re-selection
// (rendezvous-ranked) guarantees and a random SRV walk does not.
func (p Policy) UARSelection() Selection { return Selection{Reselect: true} }

// SCSCFOriginating is an S-CSCF's decision for an originating request of a user it does not hold: without the
// takeover the UE is asked to register again (Reregister, TS 24.229 §5.4.3.2); with it, the user is restored from
// the HSS for a P-CSCF (its Service-Route failed over here) or the I-CSCF (restore=1 after LIR with UAT 2), and for
// no one else (Refuse).
func (p Policy) SCSCFOriginating(from sipx.Role) Decision {
	switch {
	case !p.Restore:
		return Decision{Reregister, vocab.ReasonNotRegisteredHere}
	case from != sipx.RolePCSCF && from != sipx.RoleICSCF:
		return Decision{Refuse, ReasonNotFromPCSCFICSCF}
	default:
		return Decision{Take, ""}
	}
}

// SCSCFTerminating is an S-CSCF's decision for a terminating request to a user it does not hold: with the takeover
// the user is restored from the HSS on the word of the I-CSCF only, which found this S-CSCF through the HSS (LIR);
// anyone else is refused. Without the takeover the callee is unavailable (480).
func (p Policy) SCSCFTerminating(from sipx.Role) Decision {
	switch {
	case !p.Restore:
		return Decision{Unavailable, ""}
	case from != sipx.RoleICSCF:
		return Decision{Refuse, ReasonNotFromICSCF}
	default:
		return Decision{Take, ""}
	}
}
