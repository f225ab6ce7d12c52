package icscf_test

import "github.com/imslab/quasipool/internal/proto/sipx/sipxtest"

// peer is a fake SIP node on loopback (sipxtest.Peer): it plays a phone, a BAC, a CSCF or a stranger by the
// address it sends from.
type peer = sipxtest.Peer

func startPeer(host string) *peer { return sipxtest.StartPeer(host) }
