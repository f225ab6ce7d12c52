package scenario_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/topology"
)

var _ = Describe("populations beyond user9999", Label("unit"), func() {
	provisioned := func(doc string) (*scenario.Scenario, *topology.HSSNodeConfig) {
		GinkgoHelper()
		sc, err := scenario.Parse([]byte(doc))
		Expect(err).NotTo(HaveOccurred())
		topo := sc.Topology
		sc.Traffic.Provision(&topo)
		Expect(topo.Validate()).To(Succeed())
		nc, err := topo.NodeConfig("hss")
		Expect(err).NotTo(HaveOccurred())
		return sc, nc.HSS
	}

	It("has the lab's HSS provision user0001…user12000 for 12,000 phones", func() {
		sc, hss := provisioned("name: t\nduration: 30s\ntraffic: {phones: 12000, register_rate: 1000}\n")
		Expect(sc.Traffic.LastUser()).To(Equal(12000))
		Expect(hss.LabSubscribers).To(BeTrue())
		Expect(hss.LabSubscriberCount).To(Equal(12000))
	})

	It("counts the reachability probers after the phones", func() {
		sc, hss := provisioned("name: t\nduration: 30s\ntraffic: {phones: 10000, first_user: 2, reachability: {interval: 250ms, probers: 4}}\n")
		Expect(sc.Traffic.LastUser()).To(Equal(10005))
		Expect(hss.LabSubscriberCount).To(Equal(10005))
	})

	It("keeps the default population (user0001…user1000) for a small scenario", func() {
		_, hss := provisioned("name: t\nduration: 30s\ntraffic: {phones: 30}\n")
		Expect(hss.LabSubscriberCount).To(BeZero())
	})

	It("leaves a lab without its built-in subscribers alone (a subscribers_file provisions them)", func() {
		_, hss := provisioned("name: t\nduration: 30s\ntraffic: {phones: 20000}\ntopology: {hss: {lab_subscribers: false, subscribers_file: subs.yaml}}\n")
		Expect(hss.LabSubscribers).To(BeFalse())
		Expect(hss.LabSubscriberCount).To(BeZero())
	})

	It("accepts the largest population, user999999", func() {
		_, hss := provisioned("name: t\nduration: 30s\ntraffic: {phones: 999999}\n")
		Expect(hss.LabSubscriberCount).To(Equal(topology.MaxLabSubscribers))
	})
})
