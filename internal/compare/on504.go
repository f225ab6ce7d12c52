package compare

import (
	"errors"

	"github.com/imslab/quasipool/internal/scenario"
)

// setOn504 sets the phones' reaction to a 504 restoration answer on the scenario. The phones do not have the
// option yet (issue 6, schemes work): until they do, a variant that asks for it is refused.
func setOn504(_ *scenario.Scenario, _ string) error {
	return errors.New("the phones of this build have no setting for the reaction to a 504 restoration answer")
}
