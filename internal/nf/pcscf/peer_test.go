package pcscf_test

import "github.com/imslab/quasipool/internal/proto/sipx/sipxtest"

// fakePeer is a fake SIP node on loopback (sipxtest.Peer): it plays the BAC, an I-CSCF, an S-CSCF or a stranger
// by the address it sends from.
type fakePeer = sipxtest.Peer

func startPeer(host string) *fakePeer { return sipxtest.StartPeer(host) }
