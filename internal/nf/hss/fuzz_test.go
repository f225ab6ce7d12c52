package hss_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"

	"github.com/imslab/quasipool/internal/nf/hss"
	"github.com/imslab/quasipool/internal/nf/hss/store"
	"github.com/imslab/quasipool/internal/proto/cx"
)

// fuzzHosts are the Origin-Hosts a fuzzed frame's connection may have opened with (the fuzzer picks one).
var fuzzHosts = []string{"icscf.ims.test", "scscf1.ims.test", "scscf2.ims.test"}

func fuzzSeeds(f *testing.F) {
	user := func(impi string) []*diam.AVP {
		return []*diam.AVP{diam.NewAVP(avp.UserName, avp.Mbit, 0, datatype.UTF8String(impi)),
			cxAVP(601, datatype.UTF8String("sip:"+impi))}
	}
	digest := cxAVP(612, &diam.GroupedAVP{AVP: []*diam.AVP{cxAVP(608, datatype.UTF8String(cx.SchemeSIPDigest))}})
	rest := restorationFor("user0001@ims.test", "pcscf1.ims.test").AVP()
	seeds := []struct {
		who uint8
		m   *diam.Message
	}{
		{0, cxRequestAs("icscf.ims.test", cx.CmdUA, append(user("user0001@ims.test"),
			cxAVP(600, datatype.OctetString("ims.test")), cxAVP(623, datatype.Enumerated(2)))...)},
		{0, cxRequestAs("icscf.ims.test", cx.CmdLI, cxAVP(601, datatype.UTF8String("sip:user0001@ims.test")),
			cxAVP(633, datatype.Enumerated(0)), cxAVP(623, datatype.Enumerated(2)))},
		{1, cxRequestAs("scscf1.ims.test", cx.CmdMA, append(user("user0001@ims.test"),
			cxAVP(607, datatype.Unsigned32(1)), digest, cxAVP(602, datatype.UTF8String(scscf1)))...)},
		{1, cxRequestAs("scscf1.ims.test", cx.CmdSA, append(user("user0001@ims.test"),
			cxAVP(602, datatype.UTF8String(scscf1)), cxAVP(614, datatype.Enumerated(1)),
			cxAVP(624, datatype.Enumerated(0)), rest)...)},
		{2, cxRequestAs("scscf2.ims.test", cx.CmdSA, append(user("user0001@ims.test"),
			cxAVP(602, datatype.UTF8String(scscf2)), cxAVP(614, datatype.Enumerated(3)),
			cxAVP(624, datatype.Enumerated(1)))...)},
		{2, cxRequestAs("scscf2.ims.test", cx.CmdSA, append(user("user0001@ims.test"),
			cxAVP(602, datatype.UTF8String(scscf2)), cxAVP(614, datatype.Enumerated(5)),
			cxAVP(624, datatype.Enumerated(1)))...)},
	}
	for _, s := range seeds {
		b, err := s.m.Serialize()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.who, b)
	}
}

// FuzzHSSFrame runs frames through the real HSS procedures over a real store: the guard's screening and peer
// checks, the Cx decoders, the handlers and the answer encoder, with no recover in between (cx.HandleFrame), so
// a panic anywhere in them fails the fuzz run. Every answer to a known command must be a message go-diameter can read.
//
//	go test -run x -fuzz FuzzHSSFrame -fuzztime 60s ./internal/nf/hss/
func FuzzHSSFrame(f *testing.F) {
	fuzzSeeds(f)
	db, err := store.Open(f.TempDir(), store.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	if _, _, err := db.Import(context.Background(), store.Generate("user", 1, 3, 4, "ims.test", "pass")); err != nil {
		f.Fatal(err)
	}
	srv, err := cx.NewServer(cx.ServerConfig{OriginHost: "hss.ims.test", OriginRealm: "ims.test", Peers: testPeers()},
		hss.NewProcedures(db, hss.DefaultConfig().CapabilitySets), cx.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, who uint8, frame []byte) {
		if len(frame) < 20 {
			return
		}
		// Keep the framing valid so that the fuzzer spends its time in the AVPs: version 1, padded, true length.
		frame = append(bytes.Clone(frame), make([]byte, (4-len(frame)%4)%4)...)
		frame[0] = 1
		frame[1], frame[2], frame[3] = byte(len(frame)>>16), byte(len(frame)>>8), byte(len(frame))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ans, err := srv.HandleFrame(ctx, fuzzHosts[int(who)%len(fuzzHosts)], frame)
		if err != nil || ans == nil {
			return
		}
		hdr, err := diam.DecodeHeader(ans[:20])
		if err != nil || int(hdr.MessageLength) != len(ans) {
			t.Fatalf("the HSS wrote a broken answer header: %v", err)
		}
		if _, err := cx.Dict().FindCommand(hdr.ApplicationID, hdr.CommandCode); err != nil {
			return // the answer to an unknown command (3001) or application (3007): nothing to decode it with
		}
		if _, err := diam.ReadMessage(bytes.NewReader(ans), cx.Dict()); err != nil {
			t.Fatalf("the HSS wrote an answer go-diameter cannot read: %v", err)
		}
	})
}
