// Command icscf runs the I-CSCF: icscf --config <node.yaml>.
package main

import (
	"context"
	"os"

	"github.com/imslab/quasipool/internal/nf/icscf"
	"github.com/imslab/quasipool/internal/runtime/nfrun"
	"github.com/imslab/quasipool/internal/topology"
)

func main() {
	os.Exit(nfrun.Main(topology.KindICSCF, os.Args[1:], func(ctx context.Context, s *nfrun.Stack) (nfrun.Runner, error) {
		hss, err := s.CxClient()
		if err != nil {
			return nil, err
		}
		p := s.Cfg.Policy() // docs/schemes.md
		return icscf.New(icscf.Config{Host: s.Cfg.FQDN, Listen: s.EP.Addr, Domain: s.Cfg.Domain, SCSCFPool: s.Cfg.Peers.SCSCFPool,
			Peers: s.Peers(), Forward: s.Forward(), Restore: &p.Restore, AcceptRestore: &p.AcceptRestore,
			SCSCFFailover: p.SCSCFFailover}, hss, s.EP, s.Res, s.Health, s.Rec, s.Log)
	}))
}
