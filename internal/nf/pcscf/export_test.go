package pcscf

import (
	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/repl"
)

// Handle runs the P-CSCF's handler for a request that went through the prelude, without the prelude's panic
// recovery (the fuzz target calls it so a panic is visible).
func (n *Node) Handle(r *sipx.Request) {
	switch r.Req.Method {
	case sip.REGISTER:
		n.onRegister(r)
	case sip.ACK:
		n.onAck(r)
	default:
		n.onRequest(r)
	}
}

// Proxy returns the node's proxy (for the fuzz target's imitation of the prelude).
func (n *Node) Proxy() *sipx.Proxy { return n.px }

// ApplyReplicated applies a pool peer's replication message, as the replicator does.
func (n *Node) ApplyReplicated(m repl.Message) { replState{n}.Apply(m) }
