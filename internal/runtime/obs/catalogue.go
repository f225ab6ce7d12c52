package obs

import "encoding/json"

// The event catalogue: one type per event kind. A node records an event with Recorder.Emit(obs.SIPTx{…}); the
// report decodes a line with DecodeEvent into the same type. Each type's JSON field names are the keys of the
// events files (events/<node>.jsonl), next to the envelope keys ts, t_ns, node and kind, which no type may use.
// A field tagged omitempty is left out of the line when it is zero (the writers that do not set it); the others
// are always written.
//
// docs/events.md is generated from this file (go generate ./internal/runtime/obs, or
// EVENTS_DOC_UPDATE=1 go test ./internal/runtime/obs/eventdoc): keep each type's doc comment in the form
// "<what it means>" followed by a paragraph "Written by: <who>.", and a comment on every field.
//
//go:generate go run ./eventdoc/cmd/eventsdoc -o ../../../docs/events.md

// Kinds lists every event type of the catalogue, the legacy ones (no node writes them any more, old runs have
// them) marked. DecodeEvent knows exactly these kinds.
var kinds = []kindSpec{
	{SIPTx{}, false},
	{Refused{}, false},
	{Restore{}, false},
	{Restoration504{}, false},
	{SIPPanic{}, false},
	{PCSCFChange{}, false},
	{Registration{}, false},
	{Takeover{}, false},
	{Reselect{}, false},
	{CxAnswer{}, false},
	{CxRefused{}, false},
	{PeerState{}, false},
	{PoolPanic{}, false},
	{SelfLag{}, false},
	{LagStats{}, false},
	{PeerRTT{}, false},
	{Overload{}, false},
	{DNSStale{}, false},
	{UDPDrops{}, false},
	{NodeReady{}, false},
	{NodeStopped{}, false},
	{ReplRefused{}, false},
	{ReplRecv{}, false},
	{ReplSend{}, false},
	{DNSQuery{}, false},
	{DNSStats{}, false},
	{DNSChange{}, false},
	{ReachabilityStart{}, false},
	{ProberRescue{}, false},
	{LabUp{}, false},
	{LabDown{}, false},
	{LabBuild{}, false},
	{NodeStart{}, false},
	{NodeExit{}, false},
	{Resource{}, false},
	{Machine{}, false},
	{Fault{}, false},
	{FaultHeal{}, false},
	{FaultDrawn{}, false},
	{CPULimit{}, false},
	{CPULimitRemoved{}, false},
	{NetnsUp{}, false},
	{NetnsDown{}, false},
	{NetFault{}, false},
	{NetFaultHeal{}, false},
	{NetFaultGone{}, false},
	{Links{}, false},
	{LinksNotApplied{}, false},
	{LinksReapplied{}, false},
	{Capture{}, false},
	{NetworkEndpointForced{}, false},
	{NetworkLeft{}, false},
}

// ---- SIP (internal/proto/sipx and the SIP nodes) ----

// SIPTx is one request a SIP node forwarded, recorded when its client transaction ended: answered, timed out or
// failed to send. The report's timeline counts them.
//
// Written by: bac, pcscf, icscf, scscf (the forwarder of internal/proto/sipx).
type SIPTx struct {
	Method    string `json:"method"`            // the request's method
	CallID    string `json:"call_id"`           // its Call-ID
	Peer      string `json:"peer"`              // the next hop's name (the SRV target or host)
	Addr      string `json:"addr"`              // the next hop's address (ip:port)
	Status    int    `json:"status"`            // the final status (0: none, the transaction failed)
	LatencyUs int64  `json:"latency_us"`        // from sending the request to the end of its transaction, µs
	Failure   string `json:"failure,omitempty"` // why it failed, when it did: timeout, no_provisional, transport_error, cancelled, …
}

func (SIPTx) Kind() string { return "sip_tx" }

// Refused is a request a SIP node refused: a sender it does not accept (403), an in-dialog request that is not
// its own, a user not registered here (480, 504), a binding table full (503). The report's security section
// counts them.
//
// Written by: bac, pcscf, icscf, scscf (internal/proto/sipx's trust checks; the BAC's phone cap; the P-CSCF's and
// S-CSCF's "not registered here").
type Refused struct {
	Reason    string `json:"reason"`               // why: not_our_dialog, not_from_pcscf, not_registered_here, no_restoration_data, max_phones, …
	Method    string `json:"method"`               // the request's method
	CallID    string `json:"call_id"`              // its Call-ID
	Peer      string `json:"peer,omitempty"`       // the sender's address (the trust checks and the BAC)
	Role      string `json:"role,omitempty"`       // the sender's role by its address: bac, pcscf, icscf, scscf or untrusted
	Status    int    `json:"status,omitempty"`     // the status answered, when the event says (BAC: 503)
	MaxPhones int    `json:"max_phones,omitempty"` // the BAC's binding cap (reason max_phones)
	Direction string `json:"direction,omitempty"`  // mo or mt (the CSCFs' not_registered_here, the S-CSCF's no_restoration_data)
	IMPU      string `json:"impu,omitempty"`       // the served user (the S-CSCF's not_registered_here)
}

func (Refused) Kind() string { return "refused" }

// Restore is a terminating request the P-CSCF sent back towards the I-CSCF with the restoration marker, because
// the user is not registered with it (RFC 3263 / TS 23.380 restoration).
//
// Written by: pcscf.
type Restore struct {
	IMPU   string `json:"impu"`    // the user
	Reason string `json:"reason"`  // why the request is restored
	CallID string `json:"call_id"` // the request's Call-ID
	Method string `json:"method"`  // the request's method
}

func (Restore) Kind() string { return "restore" }

// Restoration504 is a 504 with a restoration indication (TS 24.229 §5.2.6, the "reregister" reaction): sent by
// a SIP node, or received by a phone together with what the phone did about it.
//
// Written by: the SIP nodes (internal/proto/sipx, on sending), ue (on receiving).
type Restoration504 struct {
	CallID string `json:"call_id"`          // the request's Call-ID
	Method string `json:"method,omitempty"` // the request's method (the sending node)
	Reason string `json:"reason,omitempty"` // why (the sending node)
	IMPU   string `json:"impu,omitempty"`   // the phone's user (ue)
	Action string `json:"action,omitempty"` // what the phone did: its on_restoration_504 (reregister, ignore), or "none (registered again since)" (ue)
}

func (Restoration504) Kind() string { return "restoration_504" }

// SIPPanic is a panic in a SIP request handler, recovered: the request was answered 500.
//
// Written by: the SIP nodes (internal/proto/sipx).
type SIPPanic struct {
	Method string `json:"method"`  // the request's method
	CallID string `json:"call_id"` // its Call-ID
	Panic  string `json:"panic"`   // the panic value, printed
}

func (SIPPanic) Kind() string { return "sip_panic" }

// PCSCFChange is a phone's binding at the BAC moving to another P-CSCF (the one it had failed or was down).
//
// Written by: bac.
type PCSCFChange struct {
	IMPU   string `json:"impu"`   // the phone's user
	From   string `json:"from"`   // the P-CSCF it was bound to
	To     string `json:"to"`     // the P-CSCF it is bound to now
	Method string `json:"method"` // the request that moved it
}

func (PCSCFChange) Kind() string { return "pcscf_change" }

// Registration is a change of a user's registration at the S-CSCF: registered, reregistered, deregistered,
// expired, auth_failed.
//
// Written by: scscf.
type Registration struct {
	IMPU     string `json:"impu"`                // the public identity
	IMPI     string `json:"impi"`                // the private identity
	Event    string `json:"event"`               // registered, reregistered, deregistered, expired, auth_failed
	CallID   string `json:"call_id,omitempty"`   // the REGISTER's Call-ID (absent for expired and auth_failed)
	ExpiresS int    `json:"expires_s,omitempty"` // the registration's lifetime, s (registered, reregistered)
	Path     string `json:"path,omitempty"`      // the Path headers, comma-separated (registered, reregistered)
}

func (Registration) Kind() string { return "registration" }

// Takeover is a user the S-CSCF took over from the HSS's restoration information (a request for a user it had
// no registration of, after another S-CSCF failed).
//
// Written by: scscf.
type Takeover struct {
	IMPU          string `json:"impu"`           // the user taken over
	IMPI          string `json:"impi"`           // its private identity
	Direction     string `json:"direction"`      // mo or mt: the request that caused it
	RestoreMarker bool   `json:"restore_marker"` // the request carried the restoration marker
	Path          string `json:"path"`           // the Path from the restoration information
	LatencyUs     int64  `json:"latency_us"`     // how long the takeover took (SAR and restoration), µs
}

func (Takeover) Kind() string { return "takeover" }

// Reselect is the I-CSCF choosing another S-CSCF because the assigned one did not answer (UAT 2 on UAR, or a
// LIR reselection).
//
// Written by: icscf.
type Reselect struct {
	IMPU   string   `json:"impu"`    // the user
	Cmd    string   `json:"cmd"`     // UAR or LIR: the Cx query that chose again
	UAT    int      `json:"uat"`     // the User-Authorization-Type sent (2: registration and capabilities)
	Tried  []string `json:"tried"`   // the S-CSCFs tried already
	CallID string   `json:"call_id"` // the request's Call-ID
}

func (Reselect) Kind() string { return "reselect" }

// ---- Cx (the HSS) ----

// CxAnswer is one Cx request the HSS answered. The report counts them (Cx cost of a takeover, the storm).
//
// Written by: hss.
type CxAnswer struct {
	Cmd          string `json:"cmd"`                   // UAR, SAR, LIR, MAR, … or unknown
	Result       uint32 `json:"result"`                // the result code, whichever AVP carried it
	Experimental bool   `json:"experimental"`          // true: Experimental-Result (vendor 10415)
	LatencyUs    int64  `json:"latency_us"`            // from request to answer, µs
	Peer         string `json:"peer"`                  // the requester's Origin-Host
	SessionID    string `json:"session_id,omitempty"`  // the Session-Id
	IMPI         string `json:"impi,omitempty"`        // the request's private identity
	IMPU         string `json:"impu,omitempty"`        // the request's first public identity
	UAT          *int   `json:"uat,omitempty"`         // User-Authorization-Type (UAR, LIR); absent when the request has none
	SAT          *int   `json:"sat,omitempty"`         // Server-Assignment-Type (SAR); absent when the request has none
	ServerName   string `json:"server_name,omitempty"` // Server-Name of the request (MAR, SAR) or the answer (UAA, LIA)
	Error        string `json:"error,omitempty"`       // the answer's Error-Message
}

func (CxAnswer) Kind() string { return "cx_answer" }

// CxRefused is a Cx connection or request the HSS refused (a peer not on its allow-list, a request it does not
// accept), or a connection it closed (no CER in time; reason "watchdog": DWRs went unanswered). The report's
// security section counts them.
//
// Written by: hss.
type CxRefused struct {
	Peer   string `json:"peer"`             // the peer's Origin-Host (when known)
	Remote string `json:"remote"`           // the peer's transport address
	Reason string `json:"reason"`           // why it was refused
	Cmd    string `json:"cmd,omitempty"`    // the refused request's command, for a request
	Result uint32 `json:"result,omitempty"` // the result code answered, when one was
	Error  string `json:"error,omitempty"`  // details
}

func (CxRefused) Kind() string { return "cx_refused" }

// ---- peer health, overload, the node's own state (internal/runtime) ----

// PeerState is a pool peer going down or up in a node's view (OPTIONS probing, passive failure detection). The
// report's time to detect reads the first "down" of each node after a fault.
//
// Written by: the SIP nodes (internal/runtime/pool).
type PeerState struct {
	Peer   string `json:"peer"`   // the peer's name
	Addr   string `json:"addr"`   // the peer's address
	State  string `json:"state"`  // down or up
	Reason string `json:"reason"` // why: probe_timeout, probe_ok, timeout, 503, transport_error, hold_expired, …
}

func (PeerState) Kind() string { return "peer_state" }

// PoolPanic is a node sending to every member of a pool although all of them were down (pool panic mode), at
// most one event a second.
//
// Written by: the SIP nodes (internal/runtime/pool).
type PoolPanic struct {
	Members  []string `json:"members"`  // the pool's members
	Requests uint64   `json:"requests"` // requests sent in panic mode since the last event
}

func (PoolPanic) Kind() string { return "pool_panic" }

// SelfLag is a node's own timers running late (starved of CPU), at most one event a second. The report warns
// about them.
//
// Written by: the SIP nodes (internal/runtime/pool's lag monitor).
type SelfLag struct {
	LagMs int64 `json:"lag_ms"` // how late the timer fired, ms
}

func (SelfLag) Kind() string { return "self_lag" }

// LagStats is the worst lateness of a node's own timers over the last interval (5 s), written every interval
// whatever the lateness: the run's health record takes each node's worst scheduling stall from them.
//
// Written by: the SIP nodes (internal/runtime/pool's lag monitor).
type LagStats struct {
	MaxMs     float64 `json:"max_ms"`     // the latest wake-up of the interval, ms late
	IntervalS float64 `json:"interval_s"` // the interval the maximum is over, s
}

func (LagStats) Kind() string { return "lag_stats" }

// PeerRTT is the round trips of the node's OPTIONS probes to one peer in one report interval (5 s).
//
// Written by: the SIP nodes (internal/runtime/nfrun).
type PeerRTT struct {
	Peer  string  `json:"peer"`   // the peer's name
	Addr  string  `json:"addr"`   // the peer's address
	N     int     `json:"n"`      // probes answered in the interval
	MinMs float64 `json:"min_ms"` // the shortest round trip, ms
	P50Ms float64 `json:"p50_ms"` // the median round trip, ms
	MaxMs float64 `json:"max_ms"` // the longest round trip, ms
}

func (PeerRTT) Kind() string { return "peer_rtt" }

// Overload is a second in which a node shed new requests (or started or stopped shedding); the report's shed
// load reads them.
//
// Written by: the SIP nodes (internal/runtime/nfrun, from internal/runtime/overload).
type Overload struct {
	Shed       uint64  `json:"shed"`        // new requests rejected in the second
	Admitted   uint64  `json:"admitted"`    // new requests admitted in the second
	ShedTotal  uint64  `json:"shed_total"`  // rejected since the node started
	InFlight   int64   `json:"in_flight"`   // admitted and not done
	LagMs      float64 `json:"lag_ms"`      // smoothed scheduling lag, ms
	ShedShare  float64 `json:"shed_share"`  // share of new requests shed now
	ShedChain  uint64  `json:"shed_chain"`  // phones' new requests shed in the second beyond the chain's cap
	ChainMs    float64 `json:"chain_ms"`    // median answer time of the core, ms
	ChainLimit float64 `json:"chain_limit"` // cap on phones' new requests per second (0: none)
}

func (Overload) Kind() string { return "overload" }

// DNSStale is a second in which the node's resolver served expired answers because the DNS server did not
// answer (serve-stale, RFC 8767).
//
// Written by: the SIP nodes (internal/runtime/nfrun).
type DNSStale struct {
	Served       uint64 `json:"served"`        // stale answers served in the second
	ServedTotal  uint64 `json:"served_total"`  // since the node started
	QueriesTotal uint64 `json:"queries_total"` // queries the resolver sent since the node started
}

func (DNSStale) Kind() string { return "dns_stale" }

// UDPDrops is a second in which the kernel dropped datagrams at the node's SIP socket because its receive
// buffer was full. The report counts them per node and warns.
//
// Written by: the SIP nodes (internal/runtime/nfrun), ue.
type UDPDrops struct {
	Drops      uint64 `json:"drops"`       // datagrams dropped in the second
	DropsTotal uint64 `json:"drops_total"` // since the socket was opened
}

func (UDPDrops) Kind() string { return "udp_drops" }

// NodeReady is a node ready to serve: written by the node itself when it listens, and by the lab when it saw
// the node ready. Each writer sets its own fields; the others are absent (and so is a field that is zero).
//
// Written by: the SIP nodes (internal/runtime/nfrun), dnsd, hss, ue, the lab (local and compose backends).
type NodeReady struct {
	SIP        string `json:"sip,omitempty"`        // the SIP address (a SIP node)
	Addr       string `json:"addr,omitempty"`       // the listening address (dnsd, ue)
	Zone       string `json:"zone,omitempty"`       // the zone's origin (dnsd)
	Records    int    `json:"records,omitempty"`    // the zone's records (dnsd)
	Diameter   string `json:"diameter,omitempty"`   // the Diameter address (hss)
	HTTP       string `json:"http,omitempty"`       // the provisioning API's address (hss)
	Proxy      string `json:"proxy,omitempty"`      // the address every request goes to (ue)
	Phones     int    `json:"phones,omitempty"`     // phones simulated (ue)
	Registered int64  `json:"registered,omitempty"` // phones registered in the initial round (ue)
	Failed     int64  `json:"failed,omitempty"`     // phones whose initial registration failed (ue)
	Seed       int64  `json:"seed,omitempty"`       // the run's seed (ue)
	Target     string `json:"target,omitempty"`     // the node (lab)
	PID        int    `json:"pid,omitempty"`        // its process (lab)
	Container  string `json:"container,omitempty"`  // its container, short id (lab, compose backend)
	ReadyBy    string `json:"ready_by,omitempty"`   // "lab probe" when the lab probed readiness itself (compose)
	ReadyMs    int64  `json:"ready_ms,omitempty"`   // from start to ready, ms (lab)
}

func (NodeReady) Kind() string { return "node_ready" }

// NodeStopped is the phones' process ending, with its counters.
//
// Written by: ue.
type NodeStopped struct {
	Summary json.RawMessage `json:"summary"` // the phones' counters: a JSON object, ue.Summary
}

func (NodeStopped) Kind() string { return "node_stopped" }

// ---- state replication (internal/runtime/repl) ----

// ReplRefused is a replication connection refused (not from a configured peer, or malformed), at most a few a
// second, the rest counted in the next one.
//
// Written by: the pool members that replicate (internal/runtime/repl).
type ReplRefused struct {
	Remote     string `json:"remote"`               // the connection's remote address
	Reason     string `json:"reason"`               // why it was refused
	From       string `json:"from,omitempty"`       // the sender it named, if any
	Suppressed int    `json:"suppressed,omitempty"` // refusals not recorded since the last event
}

func (ReplRefused) Kind() string { return "repl_refused" }

// ReplRecv is one replication message received from a peer.
//
// Written by: the pool members that replicate (internal/runtime/repl).
type ReplRecv struct {
	Peer  string `json:"peer"`  // the sender
	Op    string `json:"op"`    // the message's operation: hello, put, delete
	Bytes int    `json:"bytes"` // its size on the wire, with the newline
}

func (ReplRecv) Kind() string { return "repl_recv" }

// ReplSend is one replication message sent to a peer. The report's steady-state cost counts them.
//
// Written by: the pool members that replicate (internal/runtime/repl).
type ReplSend struct {
	Peer  string `json:"peer"`  // the peer's address
	Bytes int    `json:"bytes"` // the message's size
	Op    string `json:"op"`    // its operation
	Key   string `json:"key"`   // the key it is about ("" for a whole-state message)
}

func (ReplSend) Kind() string { return "repl_send" }

// ---- DNS (dnsd) ----

// DNSQuery is one query the lab's DNS answered (only with the node's query_events on).
//
// Written by: dnsd.
type DNSQuery struct {
	Rcode string `json:"rcode"`           // the answer's RCODE (NOERROR, NXDOMAIN, …)
	Name  string `json:"name,omitempty"`  // the question's name (a query with one question)
	QType string `json:"qtype,omitempty"` // the question's type (A, SRV, NAPTR, …)
	Peer  string `json:"peer,omitempty"`  // the client's address
}

func (DNSQuery) Kind() string { return "dns_query" }

// DNSStats is the lab DNS's counters, written when it stops.
//
// Written by: dnsd.
type DNSStats struct {
	Queries   uint64 `json:"queries"`   // queries answered
	NoError   uint64 `json:"noerror"`   // … with NOERROR
	NXDomain  uint64 `json:"nxdomain"`  // … with NXDOMAIN
	Refused   uint64 `json:"refused"`   // … with REFUSED
	Other     uint64 `json:"other"`     // … with any other RCODE
	Malformed uint64 `json:"malformed"` // queries that did not parse
}

func (DNSStats) Kind() string { return "dns_stats" }

// DNSChange is a change of the lab DNS's zone (the dns-change fault, the provisioning API).
//
// Written by: dnsd.
type DNSChange struct {
	Op      string `json:"op"`               // the change: set_zone, add_record, remove_record
	Serial  uint32 `json:"serial"`           // the zone's new serial
	Records int    `json:"records"`          // records in the zone now (without SOA and NS)
	Record  string `json:"record,omitempty"` // the record added or removed
}

func (DNSChange) Kind() string { return "dns_change" }

// ---- the phones (internal/harness/ue) ----

// ReachabilityStart is the phones starting the reachability probes of the users a fault affected.
//
// Written by: ue.
type ReachabilityStart struct {
	Nodes      []string `json:"nodes"`       // the faulted nodes
	Users      []string `json:"users"`       // the users probed
	Affected   int      `json:"affected"`    // users the fault affected (users may be a sample of them)
	IntervalMs int64    `json:"interval_ms"` // the probe schedule, ms
	Confirm    int      `json:"confirm"`     // successful probes in a row that end a user's probing
}

func (ReachabilityStart) Kind() string { return "reachability_start" }

// ProberRescue is every prober phone being behind the faulted nodes: the probers register again.
//
// Written by: ue.
type ProberRescue struct {
	Nodes   []string `json:"nodes"`   // the faulted nodes
	Probers []string `json:"probers"` // the prober phones' users
}

func (ProberRescue) Kind() string { return "prober_rescue" }

// ---- the lab (internal/harness/lab, internal/harness/compose, internal/harness/scenario) ----

// LabUp is the lab started: every node is up.
//
// Written by: the lab (local and compose backends).
type LabUp struct {
	RunDir  string   `json:"run_dir"`           // the run directory
	Nodes   []string `json:"nodes"`             // the nodes started
	Backend string   `json:"backend,omitempty"` // compose (absent: the local backend)
	Project string   `json:"project,omitempty"` // the compose project (compose)
	Subnet  string   `json:"subnet,omitempty"`  // the lab's subnet (compose)
	Access  string   `json:"access,omitempty"`  // the access network (compose)
	Cx      string   `json:"cx,omitempty"`      // the Cx network (compose)
}

func (LabUp) Kind() string { return "lab_up" }

// LabDown is the lab stopping its nodes.
//
// Written by: the lab (local and compose backends).
type LabDown struct{}

func (LabDown) Kind() string { return "lab_down" }

// LabBuild is the lab having built the nodes' binaries.
//
// Written by: the lab (local backend).
type LabBuild struct {
	Packages []string `json:"packages"`      // the packages built
	Dir      string   `json:"dir,omitempty"` // the build cache's directory the nodes run from
	TookMs   int64    `json:"took_ms"`       // how long go build took, ms
}

func (LabBuild) Kind() string { return "lab_build" }

// NodeStart is the lab starting a node.
//
// Written by: the lab (local and compose backends).
type NodeStart struct {
	Target     string `json:"target"`               // the node
	NodeKind   string `json:"node_kind,omitempty"`  // its kind: pcscf, scscf, … (local)
	PID        int    `json:"pid,omitempty"`        // its process (local)
	GoMaxProcs string `json:"gomaxprocs,omitempty"` // the GOMAXPROCS it started with (local)
	Container  string `json:"container,omitempty"`  // its container, short id (compose)
}

func (NodeStart) Kind() string { return "node_start" }

// NodeExit is a node's process ending, expected (stopped, killed by a fault) or not (a crash).
//
// Written by: the lab (local backend).
type NodeExit struct {
	Target   string `json:"target"`           // the node
	PID      int    `json:"pid"`              // its process
	Expected bool   `json:"expected"`         // the lab stopped or killed it
	UptimeMs int64  `json:"uptime_ms"`        // how long it ran, ms
	Status   string `json:"status"`           // the exit status, as the OS prints it
	ExitCode int    `json:"exit_code"`        // the exit code (-1: killed by a signal)
	Signal   string `json:"signal,omitempty"` // the signal that killed it
}

func (NodeExit) Kind() string { return "node_exit" }

// Resource is a sample, once a second, of a node's process (and of the phones' process, target "phones"):
// CPU time and resident memory. The report's member load and `imslab memory` read them.
//
// Written by: the lab (local backend), the scenario runner (the phones' process).
type Resource struct {
	Target   string  `json:"target"`    // the node
	PID      int     `json:"pid"`       // its process
	CPUS     float64 `json:"cpu_s"`     // user and system CPU time since it started, s
	RSSBytes int     `json:"rss_bytes"` // resident memory, bytes
}

func (Resource) Kind() string { return "resource" }

// Machine is a sample, once a second, of the machine the lab runs on: its load and whether another lab runs beside
// this one. The run's health record reads them (docs/report.md, "Run health").
//
// Written by: the lab (local backend).
type Machine struct {
	Load1        float64 `json:"load1"`         // the 1-minute load average (/proc/loadavg)
	ProcsRunning int     `json:"procs_running"` // runnable threads at the sample (/proc/loadavg's r of r/t)
	CPUs         int     `json:"cpus"`          // the CPUs the machine has
	StealRatio   float64 `json:"steal_ratio"`   // the share of CPU time stolen by the hypervisor since the last sample (/proc/stat)
	OtherLabs    int     `json:"other_labs"`    // processes of lab nodes that are not this lab's (another lab running)
}

func (Machine) Kind() string { return "machine" }

// FaultFields are the fields of Fault and FaultHeal.
type FaultFields struct {
	Fault         string   `json:"fault"`                     // the fault's kind (kill, stop, pause, partition, …); restart for a restart
	Target        string   `json:"target"`                    // the target: a node, a pool or a site
	PID           int      `json:"pid,omitempty"`             // the target's process (the lab's own event)
	Container     string   `json:"container,omitempty"`       // the target's container, short id (compose)
	Nodes         []string `json:"nodes,omitempty"`           // the nodes of the target (the scenario's event)
	ForS          float64  `json:"for_s,omitempty"`           // how long the fault lasts, s
	Mode          string   `json:"mode,omitempty"`            // the fault's mode (flap, dns-down)
	PeriodS       float64  `json:"period_s,omitempty"`        // the flap period, s
	CPUPercent    int      `json:"cpu_percent,omitempty"`     // the CPU share left (slow)
	Peers         []string `json:"peers,omitempty"`           // the peers a network fault is limited to
	PeerNodes     []string `json:"peer_nodes,omitempty"`      // … as nodes
	Direction     string   `json:"direction,omitempty"`       // the direction of a network fault
	Reject        bool     `json:"reject,omitempty"`          // a partition that rejects instead of dropping
	LossPercent   float64  `json:"loss_percent,omitempty"`    // packet loss, %
	Rate          string   `json:"rate,omitempty"`            // rate limit
	DelayMs       float64  `json:"delay_ms,omitempty"`        // added delay, ms
	DelayJitterMs float64  `json:"delay_jitter_ms,omitempty"` // its jitter, ms
}

// Fault is a fault injected: the lab records what it did to a process (kill, stop, pause, resume, restart) and
// the scenario runner records each fault of the scenario's timeline with its parameters. The report takes a
// fault's instant from the lab's event.
//
// Written by: the lab (local and compose backends), the scenario runner.
type Fault FaultFields

func (Fault) Kind() string { return "fault" }

// FaultHeal is a fault of the scenario's timeline healed (the kinds that have a fix), with the fault's
// parameters. The report's time to heal reads it.
//
// Written by: the scenario runner.
type FaultHeal FaultFields

func (FaultHeal) Kind() string { return "fault_heal" }

// FaultDrawn is a randomised fault's draw (the scenario's jitter, a random member of a pool as target), beside
// the fault itself.
//
// Written by: the scenario runner.
type FaultDrawn struct {
	Index         int     `json:"index"`          // the fault's index in the scenario
	Fault         string  `json:"fault"`          // its kind
	Target        string  `json:"target"`         // the target drawn
	PlannedTarget string  `json:"planned_target"` // the target the file planned
	AtS           float64 `json:"at_s"`           // the instant drawn, s from the start
	PlannedAtS    float64 `json:"planned_at_s"`   // the instant the file planned, s
	JitterS       float64 `json:"jitter_s"`       // the jitter allowed, s
	Seed          int64   `json:"seed"`           // the run's seed
}

func (FaultDrawn) Kind() string { return "fault_drawn" }

// CPULimit is a node slowed down (the slow fault): a CPU quota set on its cgroup or container.
//
// Written by: the lab (local and compose backends).
type CPULimit struct {
	Target         string `json:"target"`              // the node
	PID            int    `json:"pid"`                 // its process
	Cgroup         string `json:"cgroup,omitempty"`    // the cgroup (local)
	Container      string `json:"container,omitempty"` // the container, short id (compose)
	CPUPercent     int    `json:"cpu_percent"`         // the CPU share asked for, %
	CPUCFSQuotaUs  int    `json:"cpu_cfs_quota_us"`    // the quota as read back, µs
	CPUCFSPeriodUs int    `json:"cpu_cfs_period_us"`   // the period as read back, µs
}

func (CPULimit) Kind() string { return "cpu_limit" }

// CPULimitRemoved is a node's CPU quota removed (the slow fault healed).
//
// Written by: the lab (local and compose backends).
type CPULimitRemoved struct {
	Target    string `json:"target"`              // the node
	PID       int    `json:"pid"`                 // its process
	Cgroup    string `json:"cgroup,omitempty"`    // the cgroup (local)
	Container string `json:"container,omitempty"` // the container, short id (compose)
}

func (CPULimitRemoved) Kind() string { return "cpu_limit_removed" }

// NetnsUp is the lab's namespace network created (every node in its own network namespace).
//
// Written by: the lab (local backend with namespaces).
type NetnsUp struct {
	Bridge  string `json:"bridge"`  // the bridge's name
	Subnet  string `json:"subnet"`  // the subnet
	Gateway string `json:"gateway"` // the bridge's address
	ID      string `json:"id"`      // the network's id
}

func (NetnsUp) Kind() string { return "netns_up" }

// NetnsDown is the lab's namespace network removed.
//
// Written by: the lab (local backend with namespaces).
type NetnsDown struct {
	Bridge string `json:"bridge"` // the bridge's name
}

func (NetnsDown) Kind() string { return "netns_down" }

// NetFault is a network fault applied in a node's namespace.
//
// Written by: the lab (local backend with namespaces).
type NetFault struct {
	Target string `json:"target"` // the node
	Key    string `json:"key"`    // the fault's key (which heal removes it)
	Spec   string `json:"spec"`   // what was applied
}

func (NetFault) Kind() string { return "net_fault" }

// NetFaultHeal is a network fault removed from a node's namespace.
//
// Written by: the lab (local backend with namespaces).
type NetFaultHeal struct {
	Target string `json:"target"` // the node
	Key    string `json:"key"`    // the fault's key
}

func (NetFaultHeal) Kind() string { return "net_fault_heal" }

// NetFaultGone is a container's network faults gone with its namespace (the container stopped or started
// again).
//
// Written by: the lab (compose backend).
type NetFaultGone struct {
	Target string   `json:"target"` // the node
	Keys   []string `json:"keys"`   // the faults' keys
	PID    int      `json:"pid"`    // the process whose namespace held them
	Reason string   `json:"reason"` // why they are gone
}

func (NetFaultGone) Kind() string { return "net_fault_gone" }

// SiteLink is one site link of a Links event.
type SiteLink struct {
	DelayMs     float64 `json:"delay_ms,omitempty"`     // one-way delay, ms
	JitterMs    float64 `json:"jitter_ms,omitempty"`    // its jitter, ms
	Link        string  `json:"link"`                   // the link's name: its two sites, joined by an en dash (north–south)
	LossPercent float64 `json:"loss_percent,omitempty"` // packet loss in each direction, %
	Nodes       int     `json:"nodes"`                  // nodes that got the link's parameters
}

// Links is the topology's site links applied as network faults (delay, loss, rate between sites).
//
// Written by: the lab (local backend with namespaces, compose backend).
type Links struct {
	Links  []SiteLink `json:"links"`  // per link, its parameters
	Faults int        `json:"faults"` // network faults applied for them
}

func (Links) Kind() string { return "links" }

// LinksNotApplied is the topology's site links not applied (the lab cannot apply network faults); the report
// warns.
//
// Written by: the lab (local and compose backends).
type LinksNotApplied struct {
	Reason string `json:"reason"` // why
	Links  int    `json:"links"`  // the links not applied
}

func (LinksNotApplied) Kind() string { return "links_not_applied" }

// LinksReapplied is a node's site links applied again after its container started again.
//
// Written by: the lab (compose backend).
type LinksReapplied struct {
	Target string `json:"target"` // the node
	Faults int    `json:"faults"` // network faults applied again
}

func (LinksReapplied) Kind() string { return "links_reapplied" }

// Capture is the lab's packet capture of the compose networks started, or not.
//
// Written by: the lab (compose backend).
type Capture struct {
	Error      string   `json:"error,omitempty"`      // why there is no capture
	Interfaces []string `json:"interfaces,omitempty"` // the interfaces captured
	File       string   `json:"file,omitempty"`       // the capture file, in the run directory
}

func (Capture) Kind() string { return "capture" }

// NetworkEndpointForced is stale endpoints removed from the project's networks when the lab went down.
//
// Written by: the lab (compose backend).
type NetworkEndpointForced struct {
	Project   string   `json:"project"`   // the compose project
	Endpoints []string `json:"endpoints"` // the endpoints removed, network/container
}

func (NetworkEndpointForced) Kind() string { return "network_endpoint_forced" }

// NetworkLeft is the project's networks left behind with a stale endpoint when the lab went down.
//
// Written by: the lab (compose backend).
type NetworkLeft struct {
	Project  string   `json:"project"`  // the compose project
	Networks []string `json:"networks"` // the networks left
}

func (NetworkLeft) Kind() string { return "network_left" }

// sealed marks the catalogue's types: no other type is an Event.
func (SIPTx) sealed()                 {}
func (Refused) sealed()               {}
func (Restore) sealed()               {}
func (Restoration504) sealed()        {}
func (SIPPanic) sealed()              {}
func (PCSCFChange) sealed()           {}
func (Registration) sealed()          {}
func (Takeover) sealed()              {}
func (Reselect) sealed()              {}
func (CxAnswer) sealed()              {}
func (CxRefused) sealed()             {}
func (PeerState) sealed()             {}
func (PoolPanic) sealed()             {}
func (SelfLag) sealed()               {}
func (PeerRTT) sealed()               {}
func (Overload) sealed()              {}
func (DNSStale) sealed()              {}
func (UDPDrops) sealed()              {}
func (NodeReady) sealed()             {}
func (NodeStopped) sealed()           {}
func (ReplRefused) sealed()           {}
func (ReplRecv) sealed()              {}
func (ReplSend) sealed()              {}
func (DNSQuery) sealed()              {}
func (DNSStats) sealed()              {}
func (DNSChange) sealed()             {}
func (ReachabilityStart) sealed()     {}
func (ProberRescue) sealed()          {}
func (LabUp) sealed()                 {}
func (LabDown) sealed()               {}
func (LabBuild) sealed()              {}
func (NodeStart) sealed()             {}
func (NodeExit) sealed()              {}
func (Resource) sealed()              {}
func (Fault) sealed()                 {}
func (LagStats) sealed()              {}
func (Machine) sealed()               {}
func (FaultHeal) sealed()             {}
func (FaultDrawn) sealed()            {}
func (CPULimit) sealed()              {}
func (CPULimitRemoved) sealed()       {}
func (NetnsUp) sealed()               {}
func (NetnsDown) sealed()             {}
func (NetFault) sealed()              {}
func (NetFaultHeal) sealed()          {}
func (NetFaultGone) sealed()          {}
func (Links) sealed()                 {}
func (LinksNotApplied) sealed()       {}
func (LinksReapplied) sealed()        {}
func (Capture) sealed()               {}
func (NetworkEndpointForced) sealed() {}
func (NetworkLeft) sealed()           {}
