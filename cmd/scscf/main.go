// Command scscf runs an S-CSCF: scscf --config <node.yaml>.
package main

import (
	"context"
	"os"

	"github.com/imslab/quasipool/internal/nf/scscf"
	"github.com/imslab/quasipool/internal/runtime/nfrun"
	"github.com/imslab/quasipool/internal/topology"
)

func main() {
	os.Exit(nfrun.Main(topology.KindSCSCF, os.Args[1:], func(ctx context.Context, s *nfrun.Stack) (nfrun.Runner, error) {
		hss, err := s.CxClient()
		if err != nil {
			return nil, err
		}
		p := s.Cfg.Policy() // docs/schemes.md
		cfg := scscf.Config{Host: s.Cfg.FQDN, Listen: s.EP.Addr, Domain: s.Cfg.Domain, ICSCF: s.Cfg.Peers.ICSCF,
			PoolHosts: s.Cfg.Trust.SCSCFHosts, Peers: s.Peers(), Forward: s.Forward(), Restore: &p.Restore,
			Replication: s.Replication()}
		cfg.Expires.Default = s.Cfg.Registration.Expires
		return scscf.New(cfg, hss, s.EP, s.Res, s.Health, s.Rec, s.Log)
	}))
}
