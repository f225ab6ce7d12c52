// Command icscf runs the I-CSCF: icscf --config <node.yaml>.
package main

import (
	"context"
	"os"

	"github.com/imslab/quasipool/internal/icscf"
	"github.com/imslab/quasipool/internal/nfrun"
	"github.com/imslab/quasipool/internal/topology"
)

func main() {
	os.Exit(nfrun.Main(topology.KindICSCF, os.Args[1:], func(ctx context.Context, s *nfrun.Stack) (nfrun.Runner, error) {
		hss, err := s.CxClient()
		if err != nil {
			return nil, err
		}
		// docs/schemes.md: the S-CSCF takeover follows the S-CSCF pool's scheme, restore=1 from a P-CSCF is
		// honoured when the P-CSCF pool (or the S-CSCF pool) runs the quasi-pool.
		restore := topology.SchemeRestores(s.Cfg.SCSCFScheme)
		accept := restore || topology.SchemeRestores(s.Cfg.PCSCFScheme)
		return icscf.New(icscf.Config{Host: s.Cfg.FQDN, Listen: s.EP.Addr, Domain: s.Cfg.Domain, SCSCFPool: s.Cfg.Peers.SCSCFPool,
			Trusted: s.Cfg.Trusted, Forward: s.Forward(), Restore: &restore, AcceptRestore: &accept,
			SCSCFFailover: topology.SchemeReplicates(s.Cfg.SCSCFScheme)}, hss, s.EP, s.Res, s.Health, s.Rec, s.Log)
	}))
}
