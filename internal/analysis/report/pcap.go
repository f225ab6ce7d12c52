package report

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// writePcap writes msgs (deduplicated, in time order) as Ethernet frames: SIP as IPv4/UDP, Diameter as IPv4/TCP
// with synthesised sequence numbers per direction (PSH|ACK, no handshake) so Wireshark reassembles the stream.
// IPv6 addresses get an IPv6 header. It returns the number of packets written.
func writePcap(path string, msgs []msg) (n int, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("report: %w", cerr)
		}
	}()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
		return 0, fmt.Errorf("report: pcap header: %w", err)
	}
	type flow struct{ src, dst string }
	seq := map[flow]uint32{}
	var ipID uint16
	for _, m := range msgs {
		src, err1 := netip.ParseAddrPort(m.Src)
		dst, err2 := netip.ParseAddrPort(m.Dst)
		if err1 != nil || err2 != nil || (m.Proto != "sip" && m.Proto != "diameter") {
			continue
		}
		eth := &layers.Ethernet{SrcMAC: mac(src.Addr()), DstMAC: mac(dst.Addr()), EthernetType: layers.EthernetTypeIPv4}
		var netLayer gopacket.NetworkLayer
		var ls []gopacket.SerializableLayer
		proto := layers.IPProtocolUDP
		if m.Proto == "diameter" {
			proto = layers.IPProtocolTCP
		}
		if src.Addr().Is4() && dst.Addr().Is4() {
			ipID++
			ip := &layers.IPv4{Version: 4, TTL: 64, Id: ipID, Flags: layers.IPv4DontFragment, Protocol: proto,
				SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
			netLayer = ip
			ls = append(ls, eth, ip)
		} else {
			eth.EthernetType = layers.EthernetTypeIPv6
			s16, d16 := src.Addr().As16(), dst.Addr().As16()
			ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: net.IP(s16[:]), DstIP: net.IP(d16[:])}
			netLayer = ip
			ls = append(ls, eth, ip)
		}
		if m.Proto == "sip" {
			udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
			if err := udp.SetNetworkLayerForChecksum(netLayer); err != nil {
				return n, fmt.Errorf("report: pcap: %w", err)
			}
			ls = append(ls, udp)
		} else {
			fw, bw := flow{m.Src, m.Dst}, flow{m.Dst, m.Src}
			if _, ok := seq[fw]; !ok {
				seq[fw] = 1
			}
			if _, ok := seq[bw]; !ok {
				seq[bw] = 1
			}
			tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()),
				Seq: seq[fw], Ack: seq[bw], PSH: true, ACK: true, Window: 65535}
			seq[fw] += uint32(len(m.Data))
			if err := tcp.SetNetworkLayerForChecksum(netLayer); err != nil {
				return n, fmt.Errorf("report: pcap: %w", err)
			}
			ls = append(ls, tcp)
		}
		ls = append(ls, gopacket.Payload(m.Data))
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
			return n, fmt.Errorf("report: pcap: %w", err)
		}
		b := buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, m.TNs), CaptureLength: len(b), Length: len(b)}
		if err := w.WritePacket(ci, b); err != nil {
			return n, fmt.Errorf("report: pcap: %w", err)
		}
		n++
	}
	return n, nil
}

// mac derives a locally administered MAC address from an IP address, so each host has a stable one.
func mac(a netip.Addr) net.HardwareAddr {
	b := a.As16()
	return net.HardwareAddr{0x02, 0x00, b[12], b[13], b[14], b[15]}
}
