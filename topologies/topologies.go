// Package topologies holds the topology files people run and embeds them, so that binaries work from any
// directory. The format is described in docs/topology.md and parsed by internal/topology.
package topologies

import _ "embed"

// Default is the default lab topology (default.yaml): dnsd, hss, bac, pcscf1..3, icscf, scscf1..3 on 127.0.0.1.
//
//go:embed default.yaml
var Default []byte

// TwoSites is the two-site topology (two-sites.yaml): pools of 4, members 1-2 in north with the BAC, HSS, I-CSCF
// and DNS, members 3-4 in south, 20 ms one way between the sites.
//
//go:embed two-sites.yaml
var TwoSites []byte
