package netfault_test

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/netfault"
)

// packetMsg builds an NFQNL_MSG_PACKET as the kernel sends it: the netfilter
// header, NFQA_PACKET_HDR (7 bytes, padded to 8), then any extra attributes.
func packetMsg(family uint8, queue uint16, id uint32, hook uint8, extra ...byte) netlink.Message {
	data := []byte{family, 0, 0, 0}
	binary.BigEndian.PutUint16(data[2:], queue)
	data = binary.NativeEndian.AppendUint16(data, 4+7)
	data = binary.NativeEndian.AppendUint16(data, 1)
	data = binary.BigEndian.AppendUint32(data, id)
	data = append(data, 0x08, 0x00, hook, 0) // hw_protocol IPv4, hook, pad
	data = append(data, extra...)
	return netlink.Message{Header: netlink.Header{Type: 3<<8 | 0}, Data: data}
}

var _ = Describe("the nfqueue netlink messages", Label("unit"), func() {
	It("binds a queue with copy mode META, a max length and the fail-open and GSO flags in one acknowledged message", func() {
		m, err := netfault.QueueConfigMessage(17003, 10000)
		Expect(err).NotTo(HaveOccurred())
		Expect(uint16(m.Header.Type)).To(Equal(uint16(3<<8|2)), "NFNL_SUBSYS_QUEUE, NFQNL_MSG_CONFIG")
		Expect(m.Header.Flags & netlink.Acknowledge).NotTo(BeZero())
		Expect(m.Data[:4]).To(Equal([]byte{0, 0, 0x42, 0x6b}), "AF_UNSPEC, version 0, queue 17003 big endian")
		attrs, err := netlink.UnmarshalAttributes(m.Data[4:])
		Expect(err).NotTo(HaveOccurred())
		got := map[uint16][]byte{}
		for _, a := range attrs {
			got[a.Type] = a.Data
		}
		Expect(got).To(HaveLen(5))
		Expect(got[1]).To(Equal([]byte{1, 0, 0, 0}), "NFQA_CFG_CMD: BIND")
		Expect(got[2]).To(Equal([]byte{0, 0, 0, 0, 1}), "NFQA_CFG_PARAMS: copy range 0, NFQNL_COPY_META")
		Expect(got[3]).To(Equal([]byte{0, 0, 0x27, 0x10}), "NFQA_CFG_QUEUE_MAXLEN 10000")
		Expect(got[4]).To(Equal([]byte{0, 0, 0, 5}), "NFQA_CFG_MASK: FAIL_OPEN|GSO")
		Expect(got[5]).To(Equal([]byte{0, 0, 0, 5}), "NFQA_CFG_FLAGS: FAIL_OPEN|GSO")
	})

	It("accepts one packet by id with an NFQA_VERDICT_HDR and asks for no acknowledgement", func() {
		m := netfault.VerdictMessage(17003, 0x01020304)
		Expect(uint16(m.Header.Type)).To(Equal(uint16(3<<8 | 1)))
		Expect(m.Header.Flags & netlink.Acknowledge).To(BeZero())
		Expect(m.Data[:4]).To(Equal([]byte{0, 0, 0x42, 0x6b}))
		attrs, err := netlink.UnmarshalAttributes(m.Data[4:])
		Expect(err).NotTo(HaveOccurred())
		Expect(attrs).To(HaveLen(1))
		Expect(attrs[0].Type).To(Equal(uint16(2)))
		Expect(attrs[0].Data).To(Equal([]byte{0, 0, 0, 1, 1, 2, 3, 4}), "NF_ACCEPT, id")
	})

	It("reads queue, family, id and hook of a queued packet, skipping other attributes", func() {
		capLen := []byte{8, 0, 13, 0, 0, 0, 0x05, 0xdc} // NFQA_CAP_LEN 1500 (native length/type; here little endian)
		if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
			capLen = []byte{0, 8, 0, 13, 0, 0, 0x05, 0xdc}
		}
		p, err := netfault.ParsePacket(packetMsg(2, 17001, 77, 3, capLen...))
		Expect(err).NotTo(HaveOccurred())
		Expect(p).To(Equal(netfault.QueuedPacket{Queue: 17001, Family: 2, ID: 77, Hook: 3, Len: 1500}))
	})

	DescribeTable("refuses what is not a whole packet message",
		func(m netlink.Message, want string) {
			_, err := netfault.ParsePacket(m)
			Expect(err).To(MatchError(ContainSubstring(want)))
		},
		Entry("another message type", netlink.Message{Header: netlink.Header{Type: 3<<8 | 2}, Data: []byte{0, 0, 0, 0}}, "not an nfqueue packet"),
		Entry("no netfilter header", netlink.Message{Header: netlink.Header{Type: 3 << 8}, Data: []byte{2, 0}}, "no netfilter header"),
		Entry("no packet header attribute", netlink.Message{Header: netlink.Header{Type: 3 << 8}, Data: []byte{2, 0, 0, 1}}, "no packet header"),
		Entry("a truncated attribute", func() netlink.Message {
			m := packetMsg(2, 1, 1, 0)
			m.Data = m.Data[:len(m.Data)-5]
			return m
		}(), "nfqueue packet"),
		Entry("a short packet header", netlink.Message{Header: netlink.Header{Type: 3 << 8},
			Data: append([]byte{2, 0, 0, 1}, binary.NativeEndian.AppendUint16(binary.NativeEndian.AppendUint16(nil, 8), 1)...)}, ""),
	)
})

var _ = Describe("the delay line's rules and state", Label("unit"), func() {
	It("sends each peer prefix's packets to the queue, per family, chain and device, tagged with the fault's comment", func() {
		rules := netfault.DelayRules(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Both,
			Peers: pfxs("10.1.0.0/16", "10.1.2.3/32", "fd00::/64")}, 17005)
		var lines []string
		for _, r := range rules {
			lines = append(lines, strings.Join(r, " "))
		}
		Expect(lines).To(HaveLen(4), "10.1.2.3 is inside 10.1.0.0/16")
		Expect(lines).To(ContainElement(MatchRegexp(`^iptables-nft -w 5 -t mangle -A OUTPUT ! -o lo -d 10\.1\.0\.0/16 -m comment --comment imslab_fault_delay_[0-9a-f]{8} -j NFQUEUE --queue-num 17005 --queue-bypass$`)))
		Expect(lines).To(ContainElement(MatchRegexp(`^iptables-nft .* -A PREROUTING ! -i lo -s 10\.1\.0\.0/16 .*--queue-num 17005 --queue-bypass$`)))
		Expect(lines).To(ContainElement(MatchRegexp(`^ip6tables-nft .* -A OUTPUT ! -o lo -d fd00::/64 `)))
		Expect(lines).To(ContainElement(MatchRegexp(`^ip6tables-nft .* -A PREROUTING ! -i lo -s fd00::/64 `)))

		out := netfault.DelayRules(netfault.Delay{Device: "eth1", Delay: time.Millisecond, Direction: netfault.Out}, 17006)
		Expect(out).To(HaveLen(2), "no peers: every packet of both families")
		Expect(strings.Join(out[0], " ")).To(ContainSubstring("-A OUTPUT -o eth1 -m comment"))
		Expect(out[1][0]).To(Equal("ip6tables-nft"))
	})

	It("names the rules after the parameters, so equal delays share a name and others do not", func() {
		a := netfault.DelayRules(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out}, 1)[0]
		b := netfault.DelayRules(netfault.Delay{Delay: 20 * time.Millisecond, Direction: netfault.Out}, 2)[0]
		c := netfault.DelayRules(netfault.Delay{Delay: 21 * time.Millisecond, Direction: netfault.Out}, 1)[0]
		comment := func(r []string) string {
			for i := range r {
				if r[i] == "--comment" {
					return r[i+1]
				}
			}
			return ""
		}
		Expect(comment(a)).To(Equal(comment(b)))
		Expect(comment(a)).NotTo(Equal(comment(c)))
	})

	DescribeTable("the snapshot leaves the delay line's rules and the empty iptables-nft chains out",
		func(block, want string) {
			Expect(netfault.NormXtTable(block)).To(Equal(want))
		},
		Entry("only our rule: the table disappears",
			"table ip mangle {\n\tchain OUTPUT {\n\t\ttype route hook output priority mangle; policy accept;\n\t\toifname != \"lo\"  counter queue num 17000 bypass\n\t}\n}\n", ""),
		Entry("an empty chain created by iptables-nft: the table disappears",
			"table ip mangle {\n\tchain OUTPUT {\n\t\ttype route hook output priority mangle; policy accept;\n\t}\n\n\tchain PREROUTING {\n\t\ttype filter hook prerouting priority mangle; policy accept;\n\t}\n}\n", ""),
		Entry("someone else's rule stays, our chain goes",
			"table ip mangle {\n\tchain OUTPUT {\n\t\ttype route hook output priority mangle; policy accept;\n\t\tcounter queue num 17001 bypass\n\t}\n\n\tchain PREROUTING {\n\t\ttype filter hook prerouting priority mangle; policy accept;\n\t\tmeta l4proto udp counter accept\n\t}\n}\n",
			"table ip mangle {\n\tchain PREROUTING {\n\t\ttype filter hook prerouting priority mangle; policy accept;\n\t\tmeta l4proto udp counter accept\n\t}\n}\n"),
		Entry("a queue below ours is someone else's",
			"table ip mangle {\n\tchain OUTPUT {\n\t\ttype route hook output priority mangle; policy accept;\n\t\tcounter queue num 7 bypass\n\t}\n}\n",
			"table ip mangle {\n\tchain OUTPUT {\n\t\ttype route hook output priority mangle; policy accept;\n\t\tcounter queue num 7 bypass\n\t}\n}\n"),
		Entry("an empty chain with policy drop matters",
			"table ip mangle {\n\tchain INPUT {\n\t\ttype filter hook input priority mangle; policy drop;\n\t}\n}\n",
			"table ip mangle {\n\tchain INPUT {\n\t\ttype filter hook input priority mangle; policy drop;\n\t}\n}\n"),
	)

	It("lists the devices of `ip -o link show` but lo, without the peer suffix", func() {
		out := "1: lo: <LOOPBACK,UP> mtu 65536 qdisc noqueue\n2: eth0@if9: <BROADCAST> mtu 1500\n3: x1@x2: <BROADCAST> mtu 1500\n"
		Expect(netfault.ParseLinks(out)).To(Equal([]string{"eth0", "x1"}))
	})
})

// FuzzParsePacket feeds arbitrary bytes to the packet parser, which reads
// what the kernel sends: it must never panic, and what it accepts must carry
// a packet header.
func FuzzParsePacket(f *testing.F) {
	f.Add(packetMsg(2, 17000, 1, 3).Data)
	f.Add(packetMsg(10, 1, 0xffffffff, 0, 8, 0, 13, 0, 0, 0, 0, 1).Data)
	f.Add([]byte{2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := netfault.ParsePacket(netlink.Message{Header: netlink.Header{Type: 3 << 8}, Data: data})
		if err != nil {
			return
		}
		if len(data) < 4+4+7 {
			t.Fatalf("accepted %d bytes: %+v", len(data), p)
		}
		if p.Queue != binary.BigEndian.Uint16(data[2:4]) || p.Family != data[0] {
			t.Fatalf("header mismatch: %+v", p)
		}
	})
}

func pfxs(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, x := range s {
		out[i] = netip.MustParsePrefix(x)
	}
	return out
}
