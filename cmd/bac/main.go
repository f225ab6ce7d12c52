// Command bac runs the access node (SBC) in front of the P-CSCFs: bac --config <node.yaml>.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/imslab/quasipool/internal/nf/bac"
	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/runtime/nfrun"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/topology"
)

func main() {
	os.Exit(nfrun.Main(topology.KindBAC, os.Args[1:], build))
}

func build(_ context.Context, s *nfrun.Stack) (nfrun.Runner, error) {
	cfg := bac.Config{Host: s.Cfg.FQDN, Listen: s.EP.Addr, PCSCFPool: s.Cfg.Peers.PCSCFPool, Peers: s.Peers(), Forward: s.Forward()}
	if s.Cfg.Trust != nil {
		cfg.PCSCFHosts = s.Cfg.Trust.PCSCFHosts
	}
	r := &runner{}
	var opts []bac.Option
	if s.Cfg.AccessListen != "" {
		// A socket on the access network: phones reach the BAC only there.
		ep, err := sipx.NewEndpoint(s.Cfg.FQDN, s.Cfg.AccessListen, s.Log)
		if err != nil {
			return nil, err
		}
		tracer, err := obs.OpenTracer(accessTraceFile(s.Cfg.TraceFile), s.Cfg.Name, s.Cfg.TraceMaxBytes)
		if err != nil {
			return nil, err
		}
		ep.Trace(tracer)
		ep.Overload = s.EP.Overload // one process, one scheduler: the same controller on both sides
		r.access, r.tracer = ep, tracer
		opts = append(opts, bac.WithAccess(ep))
	}
	node, err := bac.New(cfg, s.EP, s.Res, s.Health, s.Rec, s.Log, opts...)
	if err != nil {
		_ = r.tracer.Close()
		return nil, err
	}
	r.node = node
	if r.access != nil {
		s.Log.Info("access socket", "sip", r.access.Addr)
	}
	return r, nil
}

// accessTraceFile is where the access socket's datagrams are recorded: next to the node's trace
// (trace/bac.pcapng → trace/bac-access.001.pcapng, …; the files name the node in their interface, the report reads
// every file).
func accessTraceFile(main string) string {
	if main == "" {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSuffix(main, ".pcapng"), ".jsonl") + "-access.pcapng"
}

// runner serves the access endpoint (when there is one) beside the node; nfrun serves the core endpoint.
type runner struct {
	node   *bac.Node
	access *sipx.Endpoint
	tracer *obs.Tracer
}

func (r *runner) Run(ctx context.Context) error {
	if r.access == nil {
		return r.node.Run(ctx)
	}
	defer r.tracer.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := r.access.Serve(gctx); err != nil {
			return fmt.Errorf("bac: access socket: %w", err)
		}
		return nil
	})
	select {
	case <-r.access.Listening():
	case <-gctx.Done():
	}
	g.Go(func() error { return r.node.Run(gctx) })
	return g.Wait()
}
