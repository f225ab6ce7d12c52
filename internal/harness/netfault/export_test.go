package netfault

import "github.com/mdlayher/netlink"

// Exported for the package's external tests only.

type QueuedPacket = queuedPacket

func QueueConfigMessage(queue uint16, maxLen uint32) (netlink.Message, error) {
	return queueConfig{Queue: queue, MaxLen: maxLen}.message()
}

func VerdictMessage(queue uint16, id uint32) netlink.Message { return verdictMessage(queue, id) }

func ParsePacket(m netlink.Message) (QueuedPacket, error) { return parsePacket(m) }

func NormXtTable(block string) string { return normXtTable(block) }

// DelayRules returns the iptables-nft commands a Delay adds for queue.
func DelayRules(d Delay, queue uint16) [][]string {
	return d.object().(*delayObj).rules(queue)
}

func ParseLinks(s string) []string { return parseLinks(s) }

const QueueBase = queueBase
