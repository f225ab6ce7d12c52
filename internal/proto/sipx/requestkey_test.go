package sipx_test

import (
	"hash/fnv"
	"strconv"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
)

var _ = Describe("The target walk's per-request seed", Label("unit"), func() {
	// The key must stay what hash/fnv gave before it was written out: with the same node seed, a request keeps
	// landing on the same pool member as in the runs already recorded.
	reference := func(req *sip.Request) uint64 {
		h := fnv.New64a()
		if from := req.From(); from != nil {
			h.Write([]byte(from.Address.User))
			h.Write([]byte{0})
		}
		if to := req.To(); to != nil {
			h.Write([]byte(to.Address.User))
			h.Write([]byte{0})
		}
		h.Write([]byte(req.Method))
		if cs := req.CSeq(); cs != nil {
			h.Write([]byte{0})
			h.Write([]byte(strconv.FormatUint(uint64(cs.SeqNo), 10)))
		}
		return h.Sum64()
	}
	build := func(from, to string, cseq uint32, withCSeq bool) *sip.Request {
		req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: to, Host: "ims.test"})
		if from != "" {
			req.AppendHeader(&sip.FromHeader{Address: sip.Uri{Scheme: "sip", User: from, Host: "ims.test"}})
		}
		if to != "" {
			req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: to, Host: "ims.test"}})
		}
		if withCSeq {
			req.AppendHeader(&sip.CSeqHeader{SeqNo: cseq, MethodName: sip.INVITE})
		}
		return req
	}
	DescribeTable("equals FNV-1a of From user, To user, method and CSeq",
		func(req *sip.Request) { Expect(sipx.RequestKey(req)).To(Equal(reference(req))) },
		Entry("a call", build("user0001", "user0002", 1, true)),
		Entry("a large CSeq", build("user0001", "user0002", 4294967295, true)),
		Entry("no From", build("", "user0002", 7, true)),
		Entry("no To, no CSeq", build("user0001", "", 0, false)),
		Entry("non-ASCII users", build("usér", "☎", 12, true)),
	)
	It("differs between requests", func() {
		Expect(sipx.RequestKey(build("user0001", "user0002", 1, true))).
			NotTo(Equal(sipx.RequestKey(build("user0001", "user0002", 2, true))))
	})
})
