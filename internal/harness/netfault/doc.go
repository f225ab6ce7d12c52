// Package netfault applies and heals network faults inside one network
// namespace with the kernel's own mechanisms: nftables for partitions,
// isolation and random loss, tc qdiscs (tbf, netem) for rate and delay, and,
// where the kernel has no netem, an NFQUEUE delay line for delay.
// It runs the nft, tc, ip and iptables-nft binaries through an Exec that
// places the command in the target namespace, so it needs nothing inside a
// container image: InNetns for a namespace created with `ip netns add`, InPID
// for a container's namespace entered from the host, InNetnsPath for a
// bind-mounted namespace file.
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
// an nftables table named imslab_fault_<kind>_<hash> (family inet), the root
// qdiscs with the fixed handle fa17: of one device (or of all), or a delay
// line's iptables-nft rules and queue. Heal deletes only that
// object and then compares the namespace with the snapshot; any difference in
// what is not this package's is an error (ErrNotRestored). Objects of other
// faults of this package that are still applied are left out of the
// comparison, so faults in one namespace can be healed in any order. Apply and
// Heal are idempotent. Clean removes every object this package could have left
// behind after a crash.
//
// Rate shapes the egress of one device, or of every device but lo with Device
// "" (as tc always does); to shape a link in both directions apply the fault
// in both namespaces.
//
// # Delay: netem or the NFQUEUE delay line
//
// A Delay with Direction Out and no Peers is a netem root qdisc where the
// kernel has sch_netem (CONFIG_NET_SCH_NETEM). Every other Delay, and every
// Delay on a kernel without netem, is the NFQUEUE delay line: iptables-nft
// rules in the namespace's mangle table (OUTPUT for Out, PREROUTING for In,
// comment imslab_fault_delay_<hash>, --queue-bypass) send the matching
// packets to an NFQUEUE of the fault's own (numbers from 17000 up), and a
// consumer holding a netfilter netlink socket opened inside the namespace
// (NewAt's namespace file, entered with setns on a locked thread) keeps each
// packet in the kernel for Delay ± a uniform Jitter and then accepts it. Only
// metadata crosses to user space (copy mode META). The queue holds 10000
// packets and is fail-open: what it cannot hold, and everything once the
// consumer is gone, passes undelayed rather than being dropped. The consumer's
// wake-up latency adds to every delay and it bounds the packet rate; the
// figures are in docs/faults.md. The consumer runs in a child process of the
// applying program (the same executable started again, see lineproc.go), so
// the applying process's own load does not delay it; it ends with the heal,
// or with the applying process.
//
// iptables-nft creates `table ip mangle` (and ip6) with base chains on first
// use; Heal deletes the chains and the table again once they hold no rule,
// and the snapshot comparison leaves out the delay line's rules and empty
// accept-policy base chains, which change nothing.
package netfault
