package topology

import (
	"os"
	"strconv"
)

// GoMaxProcsEnv is the variable of the Go runtime that caps the processors (Ps) a Go program runs goroutines on.
const GoMaxProcsEnv = "GOMAXPROCS"

// NodeGoMaxProcs is the GOMAXPROCS each node of the lab gets on a machine with cpus CPUs: the CPUs shared among
// the topology's nodes, at least one (the default lab's 10 nodes on 2 CPUs: 1 each; on 32 CPUs: 3 each).
//
// Why not Go's default (every CPU): the lab runs all its nodes on one machine, so each node's runtime believes
// it has every core while ten of them share the cores. Each then keeps idle processors spinning and stealing work
// from one another and wakes threads across cores for every message (futex, the scheduler's run queues), which
// costs CPU the nodes need. Measured on the full chain at 120 calls/s on the 2-core machine (three runs each,
// interleaved; docs/results/bench/runtime-2026-12-02, scripts/capacity-ab.sh): GOMAXPROCS=1 took 10.55–10.75 ms
// of node CPU per answered call against 11.9–12.37 ms with the default, 13 % less, with the same goodput and a
// lower setup p95 (docs/performance.md, "Go processors per node").
func (t *Topology) NodeGoMaxProcs(cpus int) int {
	return max(1, cpus/max(1, len(t.Nodes())))
}

// NodeGoMaxProcsSetting is the GOMAXPROCS value a lab gives its nodes: the caller's own GOMAXPROCS when it has
// one (a user's choice wins, e.g. GOMAXPROCS=2 imslab run …), else NodeGoMaxProcs(cpus).
func (t *Topology) NodeGoMaxProcsSetting(cpus int) string {
	if v := os.Getenv(GoMaxProcsEnv); v != "" {
		return v
	}
	return strconv.Itoa(t.NodeGoMaxProcs(cpus))
}
