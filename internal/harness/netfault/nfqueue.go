package netfault

// The small part of the nfnetlink_queue protocol (linux/netfilter/
// nfnetlink_queue.h) the delay line needs: bind a queue with its parameters,
// read the id of each queued packet, and give it back with a verdict. The
// netlink socket and the attribute framing come from mdlayher/netlink; the
// payloads are in network byte order.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
)

const (
	nfnlSubsysQueue = 3 // NFNL_SUBSYS_QUEUE

	nfqnlMsgPacket  = 0 // NFQNL_MSG_PACKET: kernel → user, one queued packet
	nfqnlMsgVerdict = 1 // NFQNL_MSG_VERDICT: user → kernel
	nfqnlMsgConfig  = 2 // NFQNL_MSG_CONFIG: bind, parameters

	nfqaPacketHdr  = 1 // NFQA_PACKET_HDR: struct nfqnl_msg_packet_hdr
	nfqaVerdictHdr = 2 // NFQA_VERDICT_HDR: struct nfqnl_msg_verdict_hdr
	nfqaCapLen     = 13

	nfqaCfgCmd         = 1 // NFQA_CFG_CMD: struct nfqnl_msg_config_cmd
	nfqaCfgParams      = 2 // NFQA_CFG_PARAMS: struct nfqnl_msg_config_params
	nfqaCfgQueueMaxlen = 3 // NFQA_CFG_QUEUE_MAXLEN: be32
	nfqaCfgMask        = 4 // NFQA_CFG_MASK: be32, the flags to change
	nfqaCfgFlags       = 5 // NFQA_CFG_FLAGS: be32, their values

	nfqnlCfgCmdBind = 1 // NFQNL_CFG_CMD_BIND
	nfqnlCopyMeta   = 1 // NFQNL_COPY_META: metadata only, no payload

	// nfqaCfgFFailOpen accepts packets the queue cannot hold (queue full,
	// socket buffer full) instead of dropping them.
	nfqaCfgFFailOpen = 1 << 0
	// nfqaCfgFGSO lets GSO packets be queued whole (we never look at them).
	nfqaCfgFGSO = 1 << 2

	nfAccept = 1 // NF_ACCEPT
)

// queueMsgType is the netlink message type of an nfqueue message.
func queueMsgType(msg uint8) netlink.HeaderType {
	return netlink.HeaderType(nfnlSubsysQueue<<8 | uint16(msg))
}

// nfgenmsg is the 4-byte netfilter header that starts every message: family,
// version (0), resource id (the queue number, big endian).
func nfgenmsg(family uint8, queue uint16) []byte {
	b := []byte{family, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], queue)
	return b
}

func beU32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// queueConfig is the NFQNL_MSG_CONFIG that binds queue to the sending socket
// and sets, in the same message, copy mode META (no payload copied), the
// queue's maximum length and the fail-open and GSO flags.
type queueConfig struct {
	Queue  uint16
	MaxLen uint32
}

func (c queueConfig) message() (netlink.Message, error) {
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.Bytes(nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, 0}) // command, pad, pf (unused since Linux 3.8)
	ae.Bytes(nfqaCfgParams, append(beU32(0), nfqnlCopyMeta))
	ae.Uint32(nfqaCfgQueueMaxlen, c.MaxLen)
	ae.Uint32(nfqaCfgMask, nfqaCfgFFailOpen|nfqaCfgFGSO)
	ae.Uint32(nfqaCfgFlags, nfqaCfgFFailOpen|nfqaCfgFGSO)
	attrs, err := ae.Encode()
	if err != nil {
		return netlink.Message{}, err
	}
	return netlink.Message{
		Header: netlink.Header{Type: queueMsgType(nfqnlMsgConfig), Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(nfgenmsg(0, c.Queue), attrs...),
	}, nil
}

// verdictMessage is the NFQNL_MSG_VERDICT that accepts packet id of queue.
// It asks for no acknowledgement: an error still comes back as NLMSG_ERROR.
func verdictMessage(queue uint16, id uint32) netlink.Message {
	data := make([]byte, 0, 4+4+8)
	data = append(data, nfgenmsg(0, queue)...)
	// One attribute: len 12, type NFQA_VERDICT_HDR, {be32 verdict, be32 id}.
	data = binary.NativeEndian.AppendUint16(data, 12)
	data = binary.NativeEndian.AppendUint16(data, nfqaVerdictHdr)
	data = binary.BigEndian.AppendUint32(data, nfAccept)
	data = binary.BigEndian.AppendUint32(data, id)
	return netlink.Message{
		Header: netlink.Header{Type: queueMsgType(nfqnlMsgVerdict), Flags: netlink.Request},
		Data:   data,
	}
}

// queuedPacket is what the delay line needs of an NFQNL_MSG_PACKET.
type queuedPacket struct {
	Queue  uint16 // the queue it came from
	Family uint8  // AF_INET, AF_INET6
	ID     uint32 // packet id, for the verdict
	Hook   uint8  // netfilter hook (0 prerouting … 3 output)
	Len    uint32 // original length when reported (NFQA_CAP_LEN), else 0
}

var errNotPacket = errors.New("not an nfqueue packet message")

// parsePacket decodes an NFQNL_MSG_PACKET. It never panics on bad input (it
// reads bytes a kernel sent, and is fuzzed).
func parsePacket(m netlink.Message) (queuedPacket, error) {
	if m.Header.Type != queueMsgType(nfqnlMsgPacket) {
		return queuedPacket{}, fmt.Errorf("%w: type %#x", errNotPacket, uint16(m.Header.Type))
	}
	if len(m.Data) < 4 {
		return queuedPacket{}, fmt.Errorf("nfqueue packet: %d bytes, no netfilter header", len(m.Data))
	}
	p := queuedPacket{Family: m.Data[0], Queue: binary.BigEndian.Uint16(m.Data[2:4])}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return queuedPacket{}, fmt.Errorf("nfqueue packet: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	hdr := false
	for ad.Next() {
		switch ad.Type() {
		case nfqaPacketHdr:
			b := ad.Bytes()
			if len(b) < 7 { // be32 packet_id, be16 hw_protocol, u8 hook
				return queuedPacket{}, fmt.Errorf("nfqueue packet: header of %d bytes", len(b))
			}
			p.ID = binary.BigEndian.Uint32(b[0:4])
			p.Hook = b[6]
			hdr = true
		case nfqaCapLen:
			if len(ad.Bytes()) == 4 {
				p.Len = ad.Uint32()
			}
		}
	}
	if err := ad.Err(); err != nil {
		return queuedPacket{}, fmt.Errorf("nfqueue packet: %w", err)
	}
	if !hdr {
		return queuedPacket{}, fmt.Errorf("nfqueue packet: no packet header attribute")
	}
	return p, nil
}
