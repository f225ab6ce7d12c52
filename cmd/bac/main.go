// Command bac runs the access node (SBC) in front of the P-CSCFs: bac --config <node.yaml>.
package main

import (
	"context"
	"os"

	"github.com/imslab/quasipool/internal/bac"
	"github.com/imslab/quasipool/internal/nfrun"
	"github.com/imslab/quasipool/internal/topology"
)

func main() {
	os.Exit(nfrun.Main(topology.KindBAC, os.Args[1:], func(ctx context.Context, s *nfrun.Stack) (nfrun.Runner, error) {
		return bac.New(bac.Config{Host: s.Cfg.FQDN, Listen: s.EP.Addr, PCSCFPool: s.Cfg.Peers.PCSCFPool, Peers: s.Peers(), Forward: s.Forward()},
			s.EP, s.Res, s.Health, s.Rec, s.Log)
	}))
}
