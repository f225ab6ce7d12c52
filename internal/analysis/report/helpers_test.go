package report_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fiorix/go-diameter/v4/diam"
	"github.com/fiorix/go-diameter/v4/diam/avp"
	"github.com/fiorix/go-diameter/v4/diam/datatype"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/proto/cx"
)

// start is the synthetic run's time zero (unix ns).
const start int64 = 1_767_000_000_000_000_000

// at returns start + s seconds.
func at(s float64) int64 { return start + int64(s*1e9) }

func impu(n int) string { return fmt.Sprintf("sip:user%04d@ims.test", n) }

// runDir collects the files of a synthetic run directory.
type runDir struct {
	dir     string
	records []map[string]any
	events  map[string][]map[string]any
	trace   map[string][]map[string]any
}

func newRunDir(dir string) *runDir {
	return &runDir{dir: dir, events: map[string][]map[string]any{}, trace: map[string][]map[string]any{}}
}

func (r *runDir) register(n int, t float64, kind, pcscf, scscf, result string) {
	status := 200
	if result != "ok" {
		status = 0
	}
	r.records = append(r.records, map[string]any{"type": "register", "impu": impu(n), "call_id": fmt.Sprintf("reg-%d", n),
		"t_ns": at(t), "result": result, "status": status, "kind": kind, "expires": 600, "duration_ms": 20.0,
		"pcscf": pcscf + ".ims.test", "scscf": scscf + ".ims.test"})
}

// call adds the caller's record and, when callee saw it (mt), the callee's.
func (r *runDir) call(id string, from, to int, t float64, result string, setup200 float64, mt bool) {
	status := 200
	if result != "ok" {
		fmt.Sscan(result, &status)
	}
	rec := func(dir string, self int) map[string]any {
		m := map[string]any{"type": "call", "impu": impu(self), "call_id": id, "t_ns": at(t), "result": result,
			"status": status, "direction": dir, "from": impu(from), "to": impu(to), "duration_ms": 2000.0}
		if result == "ok" {
			m["setup_ms_180"] = setup200 / 2
			m["setup_ms_200"] = setup200
		}
		return m
	}
	r.records = append(r.records, rec("mo", from))
	if mt {
		r.records = append(r.records, rec("mt", to))
	}
}

func (r *runDir) event(node, kind string, t float64, fields map[string]any) {
	e := map[string]any{"ts": "x", "t_ns": at(t), "node": node, "kind": kind}
	for k, v := range fields {
		e[k] = v
	}
	r.events[node] = append(r.events[node], e)
}

func (r *runDir) traceMsg(node, proto, dir, src, dst string, t float64, data []byte) {
	r.trace[node] = append(r.trace[node], map[string]any{"t_ns": at(t), "node": node, "proto": proto, "dir": dir,
		"src": src, "dst": dst, "data": data})
}

// sipHop records one SIP datagram sent by from (when it traces) and received by to (when it traces).
func (r *runDir) sipHop(fromNode, toNode, src, dst string, t float64, data string) {
	if fromNode != "" {
		r.traceMsg(fromNode, "sip", "out", src, dst, t, []byte(data))
	}
	if toNode != "" {
		r.traceMsg(toNode, "sip", "in", src, dst, t+0.0005, []byte(data))
	}
}

func (r *runDir) write() {
	w := func(path string, lines []map[string]any) {
		Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
		var b strings.Builder
		for _, l := range lines {
			j, err := json.Marshal(l)
			Expect(err).NotTo(HaveOccurred())
			b.Write(j)
			b.WriteByte('\n')
		}
		Expect(os.WriteFile(path, []byte(b.String()), 0o644)).To(Succeed())
	}
	w(filepath.Join(r.dir, "records.jsonl"), r.records)
	for n, ls := range r.events {
		w(filepath.Join(r.dir, "events", n+".jsonl"), ls)
	}
	for n, ls := range r.trace {
		w(filepath.Join(r.dir, "trace", n+".jsonl"), ls)
	}
}

func (r *runDir) file(name, content string) {
	Expect(os.MkdirAll(filepath.Dir(filepath.Join(r.dir, name)), 0o755)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644)).To(Succeed())
}

func sipMsg(first, callID, cseq string) string {
	return first + "\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK1\r\nFrom: <sip:user0001@ims.test>;tag=a\r\n" +
		"To: <sip:user0005@ims.test>\r\nCall-ID: " + callID + "\r\nCSeq: " + cseq + "\r\nContent-Length: 0\r\n\r\n"
}

// lir builds a Location-Info request about user (UAT given, or none when uat < 0) and its answer.
func lir(user string, uat int, hbh, e2e uint32) (req, ans []byte) {
	m := diam.NewMessage(cx.CmdLI, diam.RequestFlag|diam.ProxiableFlag, cx.AppID, hbh, e2e, cx.Dict())
	m.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String(fmt.Sprintf("icscf.ims.test;%d", hbh)))
	m.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity("icscf.ims.test"))
	m.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
	m.NewAVP(avp.DestinationRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
	m.NewAVP(uint32(601), avp.Mbit|avp.Vbit, cx.Vendor3GPP, datatype.UTF8String(user))
	if uat >= 0 {
		m.NewAVP(uint32(623), avp.Mbit|avp.Vbit, cx.Vendor3GPP, datatype.Enumerated(uat))
	}
	req, err := m.Serialize()
	Expect(err).NotTo(HaveOccurred())
	a := diam.NewMessage(cx.CmdLI, diam.ProxiableFlag, cx.AppID, hbh, e2e, cx.Dict())
	a.NewAVP(avp.SessionID, avp.Mbit, 0, datatype.UTF8String(fmt.Sprintf("icscf.ims.test;%d", hbh)))
	a.NewAVP(avp.ResultCode, avp.Mbit, 0, datatype.Unsigned32(2001))
	a.NewAVP(avp.OriginHost, avp.Mbit, 0, datatype.DiameterIdentity("hss.ims.test"))
	a.NewAVP(avp.OriginRealm, avp.Mbit, 0, datatype.DiameterIdentity("ims.test"))
	a.NewAVP(uint32(602), avp.Mbit|avp.Vbit, cx.Vendor3GPP, datatype.UTF8String("sip:scscf1.ims.test"))
	ans, err = a.Serialize()
	Expect(err).NotTo(HaveOccurred())
	return req, ans
}
