package topology_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/topology"
)

// withPools returns the block-style base with both pools of size n and the pcscf weight w.
func withPools(n, w int) *topology.Topology {
	doc := strings.Replace(base, "    size: 3", fmt.Sprintf("    size: %d", n), 2)
	doc = strings.Replace(doc, "    weight: 10", fmt.Sprintf("    weight: %d", w), 1)
	t, err := topology.Parse([]byte(doc))
	Expect(err).NotTo(HaveOccurred())
	return t
}

func srvRec(name string, prio, weight, port uint16, target string) topology.Record {
	return topology.Record{Name: name, Type: topology.TypeSRV, Target: target, Port: port, Priority: prio, Weight: weight}
}

var _ = Describe("Zone", Label("unit"), func() {
	It("holds the records of the default lab (SPEC §2.1)", func() {
		z := topology.Default().Zone()
		Expect(z.Origin).To(Equal("ims.test"))
		Expect(z.NS).To(Equal("dnsd.ims.test"))
		Expect(z.TTL).To(Equal(time.Second))

		Expect(z.Lookup("_sip._udp.pcscf.ims.test", topology.TypeSRV)).To(Equal([]topology.Record{
			srvRec("_sip._udp.pcscf.ims.test", 1, 10, 5061, "pcscf1.ims.test"),
			srvRec("_sip._udp.pcscf.ims.test", 1, 10, 5062, "pcscf2.ims.test"),
			srvRec("_sip._udp.pcscf.ims.test", 1, 10, 5063, "pcscf3.ims.test"),
		}))
		Expect(z.Lookup("_sip._udp.pcscf2.ims.test.", topology.TypeSRV)).To(Equal([]topology.Record{
			srvRec("_sip._udp.pcscf2.ims.test", 1, 10, 5062, "pcscf2.ims.test"),
			srvRec("_sip._udp.pcscf2.ims.test", 2, 10, 5061, "pcscf1.ims.test"),
			srvRec("_sip._udp.pcscf2.ims.test", 2, 10, 5063, "pcscf3.ims.test"),
		}))
		Expect(z.Lookup("_SIP._udp.SCSCF3.ims.test", topology.TypeSRV)).To(Equal([]topology.Record{
			srvRec("_sip._udp.scscf3.ims.test", 1, 10, 5083, "scscf3.ims.test"),
			srvRec("_sip._udp.scscf3.ims.test", 2, 10, 5081, "scscf1.ims.test"),
			srvRec("_sip._udp.scscf3.ims.test", 2, 10, 5082, "scscf2.ims.test"),
		}))
		Expect(z.Lookup("_sip._udp.icscf.ims.test", topology.TypeSRV)).To(Equal([]topology.Record{
			srvRec("_sip._udp.icscf.ims.test", 1, 10, 5070, "icscf.ims.test")}))
		Expect(z.Lookup("_sip._udp.ims.test", topology.TypeSRV)).To(Equal([]topology.Record{
			srvRec("_sip._udp.ims.test", 1, 10, 5070, "icscf.ims.test")}))
		Expect(z.Lookup("_sip._udp.bac.ims.test", topology.TypeSRV)).To(Equal([]topology.Record{
			srvRec("_sip._udp.bac.ims.test", 1, 10, 5060, "bac.ims.test")}))
		Expect(z.Lookup("_diameter._tcp.hss.ims.test", topology.TypeSRV)).To(Equal([]topology.Record{
			srvRec("_diameter._tcp.hss.ims.test", 1, 10, 3868, "hss.ims.test")}))

		var as []string
		for _, r := range z.Records {
			if r.Type == topology.TypeA {
				as = append(as, r.Name+" "+r.Address)
			}
		}
		Expect(as).To(ConsistOf("dnsd.ims.test 127.0.0.1", "hss.ims.test 127.0.0.1", "bac.ims.test 127.0.0.1",
			"pcscf1.ims.test 127.0.0.1", "pcscf2.ims.test 127.0.0.1", "pcscf3.ims.test 127.0.0.1",
			"icscf.ims.test 127.0.0.1", "scscf1.ims.test 127.0.0.1", "scscf2.ims.test 127.0.0.1", "scscf3.ims.test 127.0.0.1"))
		Expect(z.Lookup("ims.test", topology.TypeA)).To(BeEmpty())
		Expect(z.Lookup("_sip._udp.hss.ims.test", topology.TypeSRV)).To(BeEmpty())
		Expect(z.Records[0].String()).To(Equal("_sip._udp.pcscf.ims.test. SRV 1 10 5061 pcscf1.ims.test."))
	})

	DescribeTable("has a pool record and per-host records of the right shape for every pool size",
		func(n, w int) {
			t := withPools(n, w)
			z := t.Zone()
			for _, pool := range []string{"pcscf", "scscf"} {
				weight := uint16(10)
				if pool == "pcscf" {
					weight = uint16(w)
				}
				rs := z.Lookup(fmt.Sprintf("_sip._udp.%s.ims.test", pool), topology.TypeSRV)
				Expect(rs).To(HaveLen(n))
				for k, r := range rs {
					Expect(r.Target).To(Equal(fmt.Sprintf("%s%d.ims.test", pool, k+1)))
					Expect(r.Priority).To(BeEquivalentTo(1))
					Expect(r.Weight).To(Equal(weight))
				}
				for k := 1; k <= n; k++ {
					self := fmt.Sprintf("%s%d.ims.test", pool, k)
					rs := z.Lookup("_sip._udp."+self, topology.TypeSRV)
					Expect(rs).To(HaveLen(n))
					targets := map[string]bool{}
					for i, r := range rs {
						targets[r.Target] = true
						Expect(r.Weight).To(Equal(weight), "equal non-zero weights")
						if i == 0 {
							Expect(r.Target).To(Equal(self))
							Expect(r.Priority).To(BeEquivalentTo(1))
						} else {
							Expect(r.Target).NotTo(Equal(self))
							Expect(r.Priority).To(BeEquivalentTo(2))
						}
						node, ok := t.Node(strings.TrimSuffix(r.Target, ".ims.test"))
						Expect(ok).To(BeTrue())
						Expect(int(r.Port)).To(Equal(node.Ports[0].Port))
					}
					Expect(targets).To(HaveLen(n), "every member once")
				}
			}
			// Every SRV target has an A record.
			for _, r := range z.Records {
				if r.Type == topology.TypeSRV {
					Expect(z.Lookup(r.Target, topology.TypeA)).To(HaveLen(1), r.String())
				}
			}
			Expect(z.Records).To(HaveLen(2*(n+n*n) + 4 + 2*n + 4))
		},
		Entry("pools of 1", 1, 10),
		Entry("pools of 2", 2, 5),
		Entry("pools of 3", 3, 10),
		Entry("pools of 8", 8, 65535),
	)

	It("uses AAAA records for IPv6 addresses", func() {
		doc := strings.Replace(base, "  address: 127.0.0.1\n  port: 5070", "  address: \"::1\"\n  port: 5070", 1)
		t, err := topology.Parse([]byte(doc))
		Expect(err).NotTo(HaveOccurred())
		z := t.Zone()
		Expect(z.Lookup("icscf.ims.test", topology.TypeAAAA)).To(Equal([]topology.Record{
			{Name: "icscf.ims.test", Type: topology.TypeAAAA, Address: "::1"}}))
		Expect(z.Lookup("icscf.ims.test", topology.TypeA)).To(BeEmpty())
		n, _ := t.Node("icscf")
		Expect(n.Listen()).To(Equal("[::1]:5070"))
	})
})
