// Package netfault applies and heals network faults inside one network
// namespace with the kernel's own mechanisms: nftables for partitions,
// isolation and random loss, tc qdiscs (tbf, netem) for rate and delay.
// It runs the nft, tc and ip binaries (iproute2, nftables) through an Exec
// that places the command in the target namespace, so it needs no netlink
// library and nothing inside a container image: InNetns for a namespace
// created with `ip netns add`, InPID for a container's namespace entered
// from the host, InNetnsPath for a bind-mounted namespace file.
//
// # Silent drop is the default
//
// A partition, an isolation or a loss drops packets without a word: no ICMP
// unreachable, no TCP reset. That is what a cut fibre, a dead router, a
// black-holed route or an overloaded link does, and it is the hard case for
// a SIP or Diameter stack: over UDP nothing tells the sender the peer is
// gone, so it only learns by waiting out its transaction timers and its
// health probes. Rejecting (ICMP port unreachable, TCP reset) lets a connected
// socket fail at once, which makes failover look faster than it would be in
// a real outage. Partition.Reject is there for the rarer real case (a host
// that is up with its process gone, a firewall that rejects).
//
// # Healing restores the previous state
//
// Before a fault is applied, its Fault snapshots `nft list ruleset` (without
// counters) and `tc qdisc show` in the namespace. Every fault owns one object:
// an nftables table named imslab_fault_<kind>_<hash> (family inet), or the
// root qdisc of one device with the fixed handle fa17:. Heal deletes only that
// object and then compares the namespace with the snapshot; any difference in
// what is not this package's is an error (ErrNotRestored). Objects of other
// faults of this package that are still applied are left out of the
// comparison, so faults in one namespace can be healed in any order. Apply and
// Heal are idempotent. Clean removes every object this package could have left
// behind after a crash.
//
// Rate and delay shape the egress of one device only (as tc always does); to
// shape a link in both directions apply the fault in both namespaces.
//
// netem (delay, jitter) needs a kernel with CONFIG_NET_SCH_NETEM. Without it
// Delay.Apply returns an error wrapping ErrUnsupported and changes nothing.
package netfault
