package report

// PostDialDelay is the post-dial delay of the calls placed at or after the fault to or from an affected user
// (the fault that affected that user; the caller's record, so probes are not in it): INVITE → first 180 and
// INVITE → 200, per call, in milliseconds.
type PostDialDelay struct {
	// Calls counts those calls; Answered the ones answered (200), Ringing the ones that got a 180.
	Calls    int `json:"calls"`
	Answered int `json:"answered"`
	// Ringing is INVITE → 180 of the calls that rang, Answer INVITE → 200 of the calls answered (absent: none).
	Ringing *Distribution `json:"invite_to_180_ms,omitempty"`
	Answer  *Distribution `json:"invite_to_200_ms,omitempty"`
}

// postDialDelay collects the post-dial delay of calls to or from affected users after their fault (nil: none).
func (a *analysis) postDialDelay(r *run) *PostDialDelay {
	p := &PostDialDelay{}
	var ring, answer []float64
	for _, c := range groupCalls(r) {
		mo := c.mo
		if mo == nil || (mo.Setup180 == nil && mo.Setup200 == nil && mo.Result == "held_back") {
			continue // only the callee's record, or a call the phone never sent (503 Retry-After)
		}
		callee := mo.To
		if c.mt != nil {
			callee = c.mt.IMPU
		}
		hit := false
		for _, impu := range []string{mo.IMPU, callee} {
			if u, ok := a.affected[impu]; ok && mo.TNs >= u.t0Ns {
				hit = true
			}
		}
		if !hit {
			continue
		}
		p.Calls++
		if mo.Setup180 != nil {
			ring = append(ring, *mo.Setup180)
		}
		if mo.ok() && mo.Setup200 != nil {
			p.Answered++
			answer = append(answer, *mo.Setup200)
		}
	}
	if p.Calls == 0 {
		return nil
	}
	p.Ringing, p.Answer = distribution(ring), distribution(answer)
	return p
}
