package obs_test

import (
	"testing"
	"time"

	"github.com/imslab/quasipool/internal/runtime/obs"
)

// FuzzDecodeEvent feeds DecodeEvent arbitrary lines: it never panics, and an event it reads writes a line that
// reads back to a line the same again (writer and reader agree on every kind).
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"addr":"127.0.0.1:5070","call_id":"a@b","kind":"sip_tx","latency_us":1234,"method":"INVITE","node":"pcscf1","peer":"scscf1.ims.test","status":200,"t_ns":1,"ts":"x"}`,
		`{"kind":"cx_answer","cmd":"UAR","uat":0,"result":2001,"t_ns":5}`,
		`{"kind":"links","links":[{"link":"a–b","nodes":2,"delay_ms":20}],"faults":2}`,
		`{"kind":"node_stopped","summary":{ "phones" : 4 }}`,
		`{"kind":"fault","fault":"kill","target":"pcscf1","nodes":null}`,
		`{"kind":"nope"}`, `{"kind":"sip_tx","status":"x"}`, `{"t_ns":1`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	at := time.Unix(0, 1_796_000_000_000_000_000)
	f.Fuzz(func(t *testing.T, line []byte) {
		env, ev, err := obs.DecodeEvent(line)
		if err != nil {
			return
		}
		once, err := obs.AppendEvent(nil, at, env.Node, ev)
		if err != nil {
			t.Fatalf("%s: read, but does not write: %v", line, err)
		}
		_, again, err := obs.DecodeEvent(once)
		if err != nil {
			t.Fatalf("%s: wrote %s, which does not read: %v", line, once, err)
		}
		twice, err := obs.AppendEvent(nil, at, env.Node, again)
		if err != nil || string(twice) != string(once) {
			t.Fatalf("%s: wrote %s, then %s (%v)", line, once, twice, err)
		}
	})
}
