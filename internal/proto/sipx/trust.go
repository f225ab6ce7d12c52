package sipx

// Role is what the sender of a request is to the node that receives it (docs/security.md). Trust is decided by
// the source address:port of the datagram, from the node configuration generated from the topology: every SIP
// node of the lab sends from the socket it listens on, so its source is its configured address.
type Role int

// Roles, from least to most trusted.
const (
	// RoleUntrusted is anything not named in the topology: phones, strangers on the lab network.
	RoleUntrusted Role = iota
	// RoleBAC is the access node. It is not in the trust domain: it may not assert identity or send orig or
	// restore=1, but a P-CSCF believes the P-Preferred-Identity it sets (bound to the phone's registration).
	RoleBAC
	// RolePCSCF, RoleICSCF and RoleSCSCF are the trust domain of RFC 3325: they may assert identity
	// (P-Asserted-Identity) and mark requests orig / restore=1.
	RolePCSCF
	RoleICSCF
	RoleSCSCF
)

func (r Role) String() string {
	switch r {
	case RoleBAC:
		return "bac"
	case RolePCSCF:
		return "pcscf"
	case RoleICSCF:
		return "icscf"
	case RoleSCSCF:
		return "scscf"
	default:
		return "untrusted"
	}
}

// InTrustDomain reports a sender that may assert identity and send orig or restore=1.
func (r Role) InTrustDomain() bool { return r >= RolePCSCF }

// Peers are the SIP source addresses (ip:port) of the lab's nodes, by role.
type Peers struct {
	BAC   []string
	PCSCF []string
	ICSCF []string
	SCSCF []string
}

// Trust maps a source address to its role.
type Trust struct {
	roles map[string]Role
}

// NewTrust builds the trust map of a node. An address listed under several roles gets the most trusted one.
func NewTrust(p Peers) *Trust {
	t := &Trust{roles: map[string]Role{}}
	for _, l := range []struct {
		addrs []string
		role  Role
	}{{p.BAC, RoleBAC}, {p.PCSCF, RolePCSCF}, {p.ICSCF, RoleICSCF}, {p.SCSCF, RoleSCSCF}} {
		for _, a := range l.addrs {
			if l.role > t.roles[a] {
				t.roles[a] = l.role
			}
		}
	}
	return t
}

// RoleOf returns the role of a source address ("ip:port").
func (t *Trust) RoleOf(src string) Role {
	if t == nil {
		return RoleUntrusted
	}
	return t.roles[src]
}
