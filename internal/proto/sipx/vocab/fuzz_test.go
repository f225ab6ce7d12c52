package vocab_test

import (
	"strconv"
	"testing"

	"github.com/emiago/sipgo/sip"

	"github.com/imslab/quasipool/internal/proto/sipx/vocab"
)

// FuzzVocab feeds messages from the network to every reader of the vocabulary: none panics, an expiry is never
// negative nor above 2**32-1, and a de-registration is exactly an effective expiry of 0.
func FuzzVocab(f *testing.F) {
	head := "REGISTER sip:ims.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK1\r\n" +
		"From: <sip:u@ims.test>;tag=1\r\nTo: <sip:u@ims.test>\r\nCall-ID: c\r\nCSeq: 1 REGISTER\r\n"
	for _, s := range []string{
		head + "Contact: <sip:u@bac.ims.test>;expires=0\r\nExpires: 600\r\nContent-Length: 0\r\n\r\n",
		head + "Contact: *\r\nExpires: 0\r\nContent-Length: 0\r\n\r\n",
		head + "Contact: <sip:a@b>;expires=1, <sip:c@d>;expires=99999999999999999999\r\nContent-Length: 0\r\n\r\n",
		"SIP/2.0 504 Server Time-out\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK1\r\nFrom: <sip:u@ims.test>;tag=1\r\n" +
			"To: <sip:u@ims.test>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\nContent-Type: application/3gpp-ims+xml\r\n" +
			"Content-Length: " + strconv.Itoa(len(vocab.RestorationBody("x"))) + "\r\n\r\n" + string(vocab.RestorationBody("x")),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := sip.NewParser().ParseSIP(data)
		if err != nil {
			return
		}
		check := func(n int, ok bool) {
			if ok && (n < 0 || n > 1<<32-1) {
				t.Fatalf("expiry %d out of range", n)
			}
		}
		_ = vocab.Contacts(msg)
		_ = vocab.CallID(msg)
		check(vocab.ExpiresHeader(msg))
		switch m := msg.(type) {
		case *sip.Request:
			n, ok := vocab.RequestedExpiry(m)
			check(n, ok)
			if vocab.IsDeregistration(m) != (ok && n == 0) {
				t.Fatalf("IsDeregistration disagrees with RequestedExpiry %d %v", n, ok)
			}
		case *sip.Response:
			check(vocab.GrantedExpiry(m, func(u sip.Uri) bool { return u.User == "u" }))
			check(vocab.GrantedExpiry(m, nil))
			_ = vocab.IsRestoration(m)
		}
	})
}
