package compare

import (
	"github.com/imslab/quasipool/internal/harness/scenario"
	"github.com/imslab/quasipool/internal/harness/ue"
)

// setOn504 sets the phones' reaction to a 504 with the 3GPP restoration body (traffic.on_restoration_504):
// "ignore" or "reregister".
func setOn504(sc *scenario.Scenario, mode string) error {
	switch mode {
	case "ignore":
		sc.Traffic.OnRestoration504 = ue.RestorationIgnore
	default:
		sc.Traffic.OnRestoration504 = ue.RestorationReregister
	}
	return nil
}
