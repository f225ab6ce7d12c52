package compose_test

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/compose"
	"github.com/imslab/quasipool/internal/harness/netfault"
	"github.com/imslab/quasipool/internal/topology"
)

var _ = Describe("network faults on a compose lab, without Docker", Label("unit"), func() {
	newLab := func() *compose.Lab {
		GinkgoHelper()
		l, err := compose.New(compose.Config{Topology: topology.Default(), RunDir: filepath.Join(GinkgoT().TempDir(), "run")})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Close)
		return l
	}

	It("says what is missing when the host cannot apply them", func() {
		GinkgoT().Setenv("PATH", GinkgoT().TempDir()) // no nsenter, nft or tc
		GinkgoT().Setenv("DOCKER_HOST", "unix://"+filepath.Join(GinkgoT().TempDir(), "no.sock"))
		err := newLab().NetCheck()
		Expect(err).To(MatchError(ContainSubstring("network faults cannot be applied")))
		Expect(err).To(MatchError(ContainSubstring("nsenter not found on the host (apt install util-linux)")))
		Expect(err).To(MatchError(ContainSubstring("nft not found on the host (apt install nftables)")))
		Expect(err).To(MatchError(ContainSubstring("tc not found on the host (apt install iproute2)")))
		Expect(err).To(MatchError(ContainSubstring("is the engine running?")))
		if os.Geteuid() != 0 {
			Expect(err).To(MatchError(ContainSubstring("not root")))
		} else {
			Expect(err.Error()).NotTo(ContainSubstring("not root"))
		}
	})

	It("refuses a fault on a node it does not run, and knows no address before Up", func() {
		l := newLab()
		ctx := context.Background()
		Expect(l.ApplyNet(ctx, "pcscf1", "p", netfault.Loss{Percent: 10})).To(MatchError(ContainSubstring("pcscf1: no such service")))
		Expect(l.HealNet(ctx, "pcscf1", "p")).To(MatchError(ContainSubstring("pcscf1: no such service")))
		_, err := l.NetAddrs("pcscf1")
		Expect(err).To(MatchError(ContainSubstring("known once the lab is up")))
	})
})
