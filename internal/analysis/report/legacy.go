package report

import (
	"encoding/json"
	"fmt"
)

// LegacySurvival is Survival.Legacy of a summary converted when read: written before restoration was timed at
// the answer, it had MT, MO and service timed at the probes' start.
const LegacySurvival = "written before restoration was timed at the answer (no survival.timed_at): service is its " +
	"service_answered curve, setup_started its old service curve (timed at the probes' start); MT and MO alone and " +
	"the users' own MT, MO and restore times, timed at the probes' start, are dropped (the users' old restore time " +
	"is their setup_started_s)"

// legacyNoAnswer is Survival.Legacy of an older summary that has no answer-timed curve at all.
const legacyNoAnswer = "written before restoration was timed at the answer and before service_answered existed: " +
	"no curve timed at the answer (service is empty); setup_started is its old service curve (timed at the probes' " +
	"start); MT, MO and the users' own times are dropped"

// UnmarshalJSON reads a summary.json. A summary written before survival.timed_at existed timed the restoration
// curves at the start of the probes; it is converted so that every reader (studies, comparisons, results) sees
// restoration at the answer, and survival.legacy says so. Files on disk are never rewritten.
func (s *Summary) UnmarshalJSON(b []byte) error {
	type plain Summary // no methods: no recursion
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	for _, d := range []*Direction{&s.MO, &s.MT} {
		// Written before users_tested existed: its denominator was every attempting user.
		if d.UsersTested == 0 && d.RefreshedFirst == 0 && d.UsersAttempted > 0 {
			d.UsersTested = d.UsersAttempted
		}
	}
	if s.Survival == nil || s.Survival.TimedAt != "" {
		return nil
	}
	var old struct {
		Survival struct {
			DetectedS       float64  `json:"detected_s"`
			ServiceAnswered *KMCurve `json:"service_answered"`
		} `json:"survival"`
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return fmt.Errorf("report: summary survival: %w", err)
	}
	convertLegacy(s, old.Survival.DetectedS, old.Survival.ServiceAnswered)
	return nil
}

// convertLegacy turns an older summary's survival (timed at the probes' start) into one timed at the answer.
// detectedS is its detected_s (the last node's detection), answered its service_answered curve (nil when it has
// none).
func convertLegacy(s *Summary, detectedS float64, answered *KMCurve) {
	sv := s.Survival
	sv.Legacy = LegacySurvival
	sv.SetupStarted = sv.Service
	sv.Service = KMCurve{}
	if answered != nil {
		sv.Service = *answered
	} else {
		sv.Legacy = legacyNoAnswer
	}
	sv.MT, sv.MO = KMCurve{}, KMCurve{}
	sv.Service.fixBands()
	sv.SetupStarted.fixBands()
	for i := range s.Users {
		u := &s.Users[i]
		u.SetupStartedS, u.RestoreS = u.RestoreS, nil
		u.MTRestoreS, u.MORestoreS = nil, nil
		// Censored stays: the answer-timed curve had the same users restored (a probe answered after the end of
		// the observation still counted), so the flag holds at the answer too.
	}
	sv.DetectedLastS = detectedS
	if f := probedFault(s); f != nil {
		first, last := detectionSpan(f)
		sv.DetectedFirstS = first
		if detectedS == 0 {
			sv.DetectedLastS = last
		}
	}
	// The bound (detected_s + one interval) was the last node's already; it is kept as written.
	sv.readAt()
	sv.TimedAt = TimedAtAnswer
}
