package topology_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
	"github.com/imslab/quasipool/topologies"
)

var _ = Describe("ShiftPorts", Label("unit"), func() {
	ports := func(t *topology.Topology) map[string][]int {
		out := map[string][]int{}
		for _, n := range t.Nodes() {
			for _, p := range n.Ports {
				out[n.Name] = append(out[n.Name], p.Port)
			}
		}
		return out
	}

	It("moves every listening port of the default lab, standbys included, by the offset", func() {
		for _, scheme := range []string{topology.SchemeQuasiPool, topology.SchemeActiveStandby} {
			before, err := topology.Parse(append([]byte(topologies.Default), []byte("\n")...))
			Expect(err).NotTo(HaveOccurred())
			before.Pools.PCSCF.Scheme = scheme
			after := *before
			Expect(after.ShiftPorts(20000)).To(Succeed())
			want := ports(before)
			Expect(len(want)).To(BeNumerically(">=", 9))
			for name := range want {
				for i := range want[name] {
					want[name][i] += 20000
				}
			}
			Expect(ports(&after)).To(Equal(want), scheme)
			Expect(after.DNS.Listen).To(Equal("127.0.0.1:21053"))
		}
	})

	It("moves the metrics addresses and leaves the caller's override map alone", func() {
		t, err := topology.Parse([]byte(string(topologies.Default) + "\nnodes: {bac: {metrics: 127.0.0.1:9100}}\n"))
		Expect(err).NotTo(HaveOccurred())
		shifted := *t
		Expect(shifted.ShiftPorts(100)).To(Succeed())
		Expect(shifted.Overrides["bac"].Metrics).To(Equal("127.0.0.1:9200"))
		Expect(t.Overrides["bac"].Metrics).To(Equal("127.0.0.1:9100"))
	})

	It("refuses an offset that takes a port out of range, naming it", func() {
		t := topology.Default()
		Expect(t.ShiftPorts(-1)).To(MatchError(ContainSubstring("port offset -1")))
		t = topology.Default()
		t.HSS.HTTPPort = 60000
		Expect(t.ShiftPorts(10000)).To(MatchError(ContainSubstring("http_port")))
	})

	It("changes nothing with offset 0", func() {
		t := topology.Default()
		Expect(t.ShiftPorts(0)).To(Succeed())
		Expect(t).To(Equal(topology.Default()))
	})
})
