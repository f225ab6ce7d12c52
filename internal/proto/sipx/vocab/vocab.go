// Package vocab is the SIP vocabulary the network functions and the simulated phones share, written once: the
// expiry of a registration (Expires and Contact), the 3GPP restoration body and its 504, Call-IDs and tags.
//
// It depends on sipgo's message types only, so that internal/nf/* (through sipx or directly) and
// internal/harness/ue use the same rules without the phones importing the proxy.
package vocab
