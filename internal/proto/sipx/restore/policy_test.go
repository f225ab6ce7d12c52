package restore_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/sipx"
	"github.com/imslab/quasipool/internal/proto/sipx/restore"
	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

var (
	quasiPool = restore.Policy{Restore: true, AcceptRestore: true}
	none      = restore.Policy{}
)

var _ = Describe("the takeover policy", Label("unit"), func() {
	DescribeTable("a P-CSCF's originating request it cannot send by a Service-Route",
		func(p restore.Policy, unreachable bool, want restore.Decision) {
			Expect(p.PCSCFOriginating(unreachable)).To(Equal(want))
		},
		Entry("not registered here, takeover: orig;restore=1 to the I-CSCF", quasiPool, false,
			restore.Decision{Verdict: restore.Take, Reason: "not_registered_here"}),
		Entry("S-CSCF silent, takeover: orig;restore=1 to the I-CSCF", quasiPool, true,
			restore.Decision{Verdict: restore.Take, Reason: "scscf_unreachable"}),
		Entry("not registered here, no takeover: restoration 504", none, false,
			restore.Decision{Verdict: restore.Reregister, Reason: vocab.ReasonNotRegisteredHere}),
		Entry("S-CSCF silent, no takeover: restoration 504", none, true,
			restore.Decision{Verdict: restore.Reregister, Reason: vocab.ReasonSCSCFUnreachable}),
	)

	It("lets a P-CSCF pass on a terminating request for a callee it does not hold only with the takeover", func() {
		Expect(quasiPool.PCSCFPassesUnknownCallee()).To(BeTrue())
		Expect(none.PCSCFPassesUnknownCallee()).To(BeFalse())
	})

	DescribeTable("the I-CSCF and restore=1",
		func(p restore.Policy, from sipx.Role, want restore.Verdict) {
			Expect(p.ICSCFMarker(from).Verdict).To(Equal(want))
		},
		Entry("from a P-CSCF, accepted", restore.Policy{AcceptRestore: true}, sipx.RolePCSCF, restore.Take),
		Entry("from a P-CSCF, not accepted: 403", restore.Policy{Restore: true}, sipx.RolePCSCF, restore.NoRestoration),
		Entry("from an S-CSCF: refused", quasiPool, sipx.RoleSCSCF, restore.Refuse),
		Entry("from the I-CSCF: refused", quasiPool, sipx.RoleICSCF, restore.Refuse),
		Entry("from the BAC: refused", quasiPool, sipx.RoleBAC, restore.Refuse),
		Entry("from a stranger: refused", quasiPool, sipx.RoleUntrusted, restore.Refuse),
	)

	DescribeTable("the I-CSCF's S-CSCF selection",
		func(s restore.Selection, want restore.Selection) { Expect(s).To(Equal(want)) },
		Entry("LIR, marked, S-CSCF takeover: UAT 2 at once, walk at once", quasiPool.LIRSelection(true),
			restore.Selection{UAT2AtOnce: true, WalkAtOnce: true, Reselect: true, MarkRestore: true}),
		Entry("LIR, marked, only the P-CSCF pool restores: UAT 2 at once, no walk, no re-selection",
			restore.Policy{AcceptRestore: true}.LIRSelection(true),
			restore.Selection{UAT2AtOnce: true, MarkRestore: true}),
		Entry("LIR, unmarked, S-CSCF takeover: re-selection after the stored S-CSCF failed", quasiPool.LIRSelection(false),
			restore.Selection{Reselect: true, MarkRestore: true}),
		Entry("LIR with a replicating S-CSCF pool: per-host SRV failover", restore.Policy{SCSCFFailover: true}.LIRSelection(false),
			restore.Selection{MarkRestore: true, Failover: true}),
		Entry("UAR: re-selection under every scheme, never DNS failover", restore.Policy{SCSCFFailover: true}.UARSelection(),
			restore.Selection{Reselect: true}),
	)

	It("reaches a named S-CSCF alone, or through its per-host record when the pool replicates", func() {
		Expect(quasiPool.SCSCFHop("scscf1.ims.test")).To(Equal(sipx.PinnedHop("scscf1.ims.test")))
		Expect(restore.Policy{SCSCFFailover: true}.SCSCFHop("scscf1.ims.test")).To(Equal(sipx.SRVHop("scscf1.ims.test")))
	})

	DescribeTable("an S-CSCF and a user it does not hold",
		func(p restore.Policy, mo bool, from sipx.Role, want restore.Decision) {
			d := p.SCSCFTerminating(from)
			if mo {
				d = p.SCSCFOriginating(from)
			}
			Expect(d).To(Equal(want))
		},
		Entry("MO from a P-CSCF: take over", quasiPool, true, sipx.RolePCSCF, restore.Decision{Verdict: restore.Take}),
		Entry("MO from the I-CSCF: take over", quasiPool, true, sipx.RoleICSCF, restore.Decision{Verdict: restore.Take}),
		Entry("MO from another S-CSCF: refused", quasiPool, true, sipx.RoleSCSCF,
			restore.Decision{Verdict: restore.Refuse, Reason: "restore_not_from_pcscf_or_icscf"}),
		Entry("MO without the takeover: restoration 504", none, true, sipx.RolePCSCF,
			restore.Decision{Verdict: restore.Reregister, Reason: vocab.ReasonNotRegisteredHere}),
		Entry("MT from the I-CSCF: take over", quasiPool, false, sipx.RoleICSCF, restore.Decision{Verdict: restore.Take}),
		Entry("MT from a P-CSCF: refused", quasiPool, false, sipx.RolePCSCF,
			restore.Decision{Verdict: restore.Refuse, Reason: "restore_not_from_icscf"}),
		Entry("MT without the takeover: 480, whoever asks", none, false, sipx.RolePCSCF,
			restore.Decision{Verdict: restore.Unavailable}),
	)
})
