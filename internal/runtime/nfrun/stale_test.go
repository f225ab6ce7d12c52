package nfrun_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/runtime/nfrun"
	"github.com/imslab/quasipool/internal/runtime/obs"
	"github.com/imslab/quasipool/internal/runtime/pool"
)

// staleEvent is a dns_stale event as ReportStale writes it.
type staleEvent struct {
	Kind         string `json:"kind"`
	Served       uint64 `json:"served"`
	ServedTotal  uint64 `json:"served_total"`
	QueriesTotal uint64 `json:"queries_total"`
}

var _ = Describe("ReportStale", func() {
	It("writes dns_stale only in the seconds in which the resolver served expired answers", func(ctx SpecContext) {
		// A DNS server with one SRV record (TTL 1 s) and its target's address, which can be made silent (dead).
		var silent atomic.Bool
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
			if silent.Load() {
				return
			}
			m := new(dns.Msg)
			m.SetReply(q)
			rr, err := dns.NewRR("_sip._udp.pcscf.ims.test. 1 IN SRV 10 10 5060 pcscf1.ims.test.")
			Expect(err).NotTo(HaveOccurred())
			a, err := dns.NewRR("pcscf1.ims.test. 1 IN A 127.0.0.1")
			Expect(err).NotTo(HaveOccurred())
			m.Answer, m.Extra = []dns.RR{rr}, []dns.RR{a}
			_ = w.WriteMsg(m)
		})}
		go func() { _ = srv.ActivateAndServe() }()
		DeferCleanup(srv.Shutdown)

		path := filepath.Join(GinkgoT().TempDir(), "node.jsonl")
		rec, err := obs.OpenRecorder(path, "pcscf2")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(rec.Close)
		r := pool.NewDNSResolver(pc.LocalAddr().String(), pool.WithQueryTimeout(100*time.Millisecond),
			pool.WithServeStale(time.Hour, 5*time.Second))
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); nfrun.ReportStale(rctx, r, rec) }()
		DeferCleanup(func() { cancel(); <-done })

		events := func() []staleEvent {
			b, err := os.ReadFile(path)
			Expect(err).NotTo(HaveOccurred())
			var out []staleEvent
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var e staleEvent
				if line != "" && json.Unmarshal([]byte(line), &e) == nil && e.Kind == "dns_stale" {
					out = append(out, e)
				}
			}
			return out
		}

		const name = "_sip._udp.pcscf.ims.test"
		fresh, err := r.LookupSRV(ctx, name)
		Expect(err).NotTo(HaveOccurred())
		Consistently(events, 1500*time.Millisecond, 100*time.Millisecond).Should(BeEmpty(),
			"nothing stale while the server answers")

		silent.Store(true) // the answer has expired (TTL 1 s): served stale, once after a timeout, then at once
		for range 3 {
			ts, err := r.LookupSRV(ctx, name)
			Expect(err).NotTo(HaveOccurred())
			Expect(ts).To(Equal(fresh))
		}
		Eventually(events, 3*time.Second, 100*time.Millisecond).Should(ContainElement(Satisfy(func(e staleEvent) bool {
			return e.ServedTotal == 3 && e.QueriesTotal >= 2
		})))
		var sum uint64
		for _, e := range events() {
			sum += e.Served
		}
		Expect(sum).To(BeEquivalentTo(3), "the events' served add up to the total")
	}, SpecTimeout(20*time.Second))
})
