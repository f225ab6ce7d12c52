package sipx

import (
	"github.com/emiago/sipgo/sip"
	"github.com/imslab/quasipool/internal/runtime/obs"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// RespondRestoration answers 504 Server Time-out with the restoration body (vocab.RestorationBody; TS 24.229
// §5.2.6.3.x / §5.4.3.2: the node cannot serve the user without a new registration).
func (p *Proxy) RespondRestoration(stx sip.ServerTransaction, req *sip.Request, reason string) {
	res := vocab.NewRestoration504(req, reason)
	p.Rec.Emit(obs.Restoration504{CallID: CallID(req), Method: string(req.Method), Reason: reason})
	if err := stx.Respond(res); err != nil {
		p.Log.Debug("respond", "call_id", CallID(req), "method", string(req.Method), "status", 504, "err", err)
	}
}
