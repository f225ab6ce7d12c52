package scscf

import (
	"encoding/json"
	"time"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/repl"
)

// replBinding is a binding on the replication wire (pool-sync, active-standby, mutual): the same facts the HSS keeps as
// restoration info in the quasi-pool, sent to the pool peers instead.
type replBinding struct {
	IMPI    string    `json:"impi"`
	IMPUs   []string  `json:"impus"`
	Contact string    `json:"contact"`
	Path    []string  `json:"path"`
	CallID  string    `json:"call_id"`
	CSeq    uint32    `json:"cseq"`
	Expires time.Time `json:"expires"`
}

// replicate pushes a binding this S-CSCF registered to its peers.
func (n *Node) replicate(b *binding) {
	if n.repl == nil {
		return
	}
	n.repl.Put(b.IMPI, replBinding{IMPI: b.IMPI, IMPUs: b.IMPUs, Contact: b.Contact, Path: b.Path, CallID: b.CallID,
		CSeq: b.CSeq, Expires: b.Expires})
}

// replicateDelete tells the peers a binding is gone (de-registration).
func (n *Node) replicateDelete(b *binding) {
	if n.repl != nil {
		n.repl.Delete(b.IMPI)
	}
}

// replState is the S-CSCF's bindings as seen by the replicator (keyed by private identity).
type replState struct{ n *Node }

// Apply stores or removes a pool peer's binding.
func (s replState) Apply(m repl.Message) {
	n := s.n
	switch m.Op {
	case repl.OpPut:
		var rb replBinding
		if err := json.Unmarshal(m.Data, &rb); err != nil || len(rb.IMPUs) == 0 {
			n.log.Warn("repl: bad binding", "peer", m.From, "impi", m.Key, "err", err)
			return
		}
		cu, err := sipx.ParseNameAddr(rb.Contact)
		if err != nil {
			n.log.Warn("repl: bad contact", "peer", m.From, "impi", m.Key, "err", err)
			return
		}
		if old := n.lookup(rb.IMPUs[0]); old != nil {
			n.remove(old)
		}
		n.store(&binding{IMPI: rb.IMPI, IMPUs: rb.IMPUs, Contact: rb.Contact, ContactU: cu, Path: rb.Path,
			CallID: rb.CallID, CSeq: rb.CSeq, Expires: rb.Expires, Replicated: true})
	case repl.OpDelete:
		n.mu.Lock()
		var gone *binding
		for _, b := range n.regs {
			if b.IMPI == m.Key {
				gone = b
				break
			}
		}
		n.mu.Unlock()
		if gone != nil {
			n.remove(gone)
		}
	}
}

// Snapshot returns every binding this S-CSCF holds, its own and its peers', once each.
func (s replState) Snapshot() []repl.Message {
	n := s.n
	n.mu.Lock()
	seen := map[*binding]bool{}
	var bs []*binding
	for _, b := range n.regs {
		if !seen[b] {
			seen[b] = true
			bs = append(bs, b)
		}
	}
	n.mu.Unlock()
	var out []repl.Message
	for _, b := range bs {
		data, err := json.Marshal(replBinding{IMPI: b.IMPI, IMPUs: b.IMPUs, Contact: b.Contact, Path: b.Path,
			CallID: b.CallID, CSeq: b.CSeq, Expires: b.Expires})
		if err == nil {
			out = append(out, repl.Message{Op: repl.OpPut, Key: b.IMPI, Data: data})
		}
	}
	return out
}
