// Command pcscf runs a P-CSCF: pcscf --config <node.yaml>.
package main

import (
	"context"
	"os"

	"github.com/imslab/quasipool/internal/nf/pcscf"
	"github.com/imslab/quasipool/internal/runtime/nfrun"
	"github.com/imslab/quasipool/internal/topology"
)

func main() {
	os.Exit(nfrun.Main(topology.KindPCSCF, os.Args[1:], func(ctx context.Context, s *nfrun.Stack) (nfrun.Runner, error) {
		p := s.Cfg.Policy() // docs/schemes.md
		return pcscf.New(pcscf.Config{Host: s.Cfg.FQDN, Listen: s.EP.Addr, Domain: s.Cfg.Domain, ICSCF: s.Cfg.Peers.ICSCF,
			PoolHosts: s.Cfg.Trust.PCSCFHosts, Peers: s.Peers(), Forward: s.Forward(), Restore: &p.Restore,
			SCSCFFailover: p.SCSCFFailover, Replication: s.Replication()},
			s.EP, s.Res, s.Health, s.Rec, s.Log)
	}))
}
