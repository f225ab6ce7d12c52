package report

// ProbeShareLimit is the probes' share of the signalling above which the report warns (issue 31: probes must not
// be most of the traffic they measure).
const ProbeShareLimit = 0.10

// ProbeLoad is the reachability probes' share of the phones' signalling from the first fault to the end of the
// run. It counts access-side SIP messages (between the phones and the BAC, each once) by Call-ID: the probe
// calls and the probers' registrations against everything the phones sent and received. A run without a trace
// counts procedures (call and registration records) instead, and says so in CountedIn.
type ProbeLoad struct {
	// CountedIn is "access-side SIP messages" or "procedures".
	CountedIn string  `json:"counted_in"`
	Total     int     `json:"total"`
	Probe     int     `json:"probe"`
	Share     float64 `json:"share"`
	// ProbedUsers is the number of affected users probed; Sample is traffic.reachability.sample (0 = all).
	ProbedUsers int `json:"probed_users"`
	Sample      int `json:"sample,omitempty"`
	// Over is true when Share is above ProbeShareLimit (the report then warns).
	Over bool `json:"over_limit"`
}

// probeLoad counts the probes' share after the first fault (nil in a run without probes).
func (a *analysis) probeLoad(r *run, msgs []msg) *ProbeLoad {
	if len(r.probes) == 0 {
		return nil
	}
	t0 := a.firstT0
	probeIDs := map[string]bool{}
	probed := map[string]bool{}
	for _, x := range r.probes {
		probeIDs[x.CallID] = true
		if x.ProbeUser != "" && x.TNs >= t0 {
			probed[x.ProbeUser] = true
		}
	}
	pl := &ProbeLoad{CountedIn: "access-side SIP messages", ProbedUsers: len(probed),
		Sample: r.trafficKeys().ReachabilitySample}
	ab := newAddressBook(r, msgs)
	for _, m := range msgs {
		if m.Proto != "sip" || m.TNs < t0 || m.callID == "" {
			continue
		}
		if ab.name(m.Src) != "ue" && ab.name(m.Dst) != "ue" {
			continue // inside the network
		}
		pl.Total++
		if probeIDs[m.callID] {
			pl.Probe++
		}
	}
	if pl.Total == 0 {
		pl.CountedIn = "procedures"
		for _, x := range r.records {
			if x.TNs >= t0 && (x.Type == "register" || x.Direction != "mt") { // a call once, by its caller
				pl.Total++
			}
		}
		for _, x := range r.probes {
			if x.TNs >= t0 && (x.Type == "register" || x.Direction != "mt") { // a probe call once, by its caller
				pl.Total++
				pl.Probe++
			}
		}
	}
	if pl.Total > 0 {
		pl.Share = round(float64(pl.Probe) / float64(pl.Total))
	}
	pl.Over = pl.Share > ProbeShareLimit
	return pl
}
