package dnsd_test

import (
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/imslab/quasipool/internal/nf/dnsd"
)

// recorder is a dns.ResponseWriter that keeps the last message written.
type recorder struct {
	udp bool
	msg *dns.Msg
}

func (r *recorder) LocalAddr() net.Addr {
	if r.udp {
		return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
	}
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (r *recorder) RemoteAddr() net.Addr        { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242} }
func (r *recorder) WriteMsg(m *dns.Msg) error   { r.msg = m; return nil }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) Close() error                { return nil }
func (r *recorder) TsigStatus() error           { return nil }
func (r *recorder) TsigTimersOnly(bool)         {}
func (r *recorder) Hijack()                     {}

// FuzzServeDNS feeds arbitrary bytes, as the server would after unpacking them, to the handler: it must not
// panic, and whatever it answers must pack.
func FuzzServeDNS(f *testing.F) {
	seed := func(name string, t uint16, edns bool) {
		m := new(dns.Msg)
		m.SetQuestion(name, t)
		if edns {
			m.SetEdns0(1232, true)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
		f.Add(b, false)
	}
	seed("_sip._udp.pcscf1.ims.test.", dns.TypeSRV, true)
	seed("_sip._udp.pcscf.ims.test.", dns.TypeSRV, false)
	seed("pcscf1.ims.test.", dns.TypeA, false)
	seed("ims.test.", dns.TypeANY, true)
	seed("nope.ims.test.", dns.TypeAAAA, false)
	seed("example.com.", dns.TypeA, false)
	f.Add([]byte("garbage"), true)
	f.Add([]byte{0x12, 0x34, 0x01, 0x00, 0x00, 0x02, 0, 0, 0, 0, 0, 0}, false)

	srv, err := dnsd.New(dnsd.Config{Listen: "127.0.0.1:0"}, dnsd.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, udp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(b); err != nil {
			return // the server answers FORMERR (or nothing) without calling the handler
		}
		w := &recorder{udp: udp}
		srv.ServeDNS(w, req)
		if srv.Stats().Panics != 0 {
			t.Fatalf("handler panicked on %x", b)
		}
		if w.msg == nil {
			t.Fatalf("no answer to %x", b)
		}
		if w.msg.Id != req.Id || !w.msg.Response {
			t.Fatalf("answer id %d response %v to query id %d", w.msg.Id, w.msg.Response, req.Id)
		}
		out, err := w.msg.Pack()
		if err != nil {
			t.Fatalf("answer does not pack: %v\n%v", err, w.msg)
		}
		if udp && req.IsEdns0() == nil && len(out) > dns.MinMsgSize {
			t.Fatalf("UDP answer of %d bytes to a query without EDNS", len(out))
		}
	})
}

var _ dns.ResponseWriter = (*recorder)(nil)
