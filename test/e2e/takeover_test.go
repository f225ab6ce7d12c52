package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/harness/ue"
)

// events reads a node's events file.
func (l *lab) events(node string) []map[string]any {
	f, err := os.Open(filepath.Join(l.dir, "events", node+".jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// hasEvent reports an event of a kind whose fields include every given key/value.
func hasEvent(evs []map[string]any, kind string, fields map[string]any) bool {
	for _, e := range evs {
		if e["kind"] != kind {
			continue
		}
		match := true
		for k, v := range fields {
			if e[k] != v {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func shortName(host string) string { name, _, _ := strings.Cut(host, "."); return name }

var _ = Describe("Quasi-pool takeover", Label("e2e"), Ordered, func() {
	var (
		l       *lab
		phones  *ue.UE
		hssHTTP string
	)
	BeforeAll(func() {
		// The smoke lab under real concurrency: nodes built with the race detector.
		l = startRaceLab()
		hssHTTP = l.hssHTTP()
		phones = startPhones(l.dns(), 1, 6, 50*time.Millisecond, 0)
		for i := 1; i <= 6; i++ {
			p := phones.Phone(strings.Replace("user000N", "N", string(rune('0'+i)), 1))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			Expect(p.Register(ctx)).To(Succeed())
			cancel()
		}
	})
	call := func(sctx context.Context, from, to string) ue.CallResult {
		ctx, cancel := context.WithTimeout(sctx, 30*time.Second)
		defer cancel()
		res, err := phones.Phone(from).Call(ctx, "sip:"+to+"@ims.test", 300*time.Millisecond)
		Expect(err).NotTo(HaveOccurred(), "%s → %s: %+v", from, to, res)
		return res
	}

	It("a survivor P-CSCF takes over calls in both directions without a re-registration (SPEC §4.1, §4.2)", SpecTimeout(90*time.Second), func(sctx SpecContext) {
		reg := phones.Phone("user0001").Registration()
		dead := shortName(reg.PCSCF)
		Expect(dead).To(MatchRegexp(`^pcscf\d$`))
		l.kill(dead)

		By("originating: the BAC skips " + dead + ", a backup P-CSCF sends restore=1 and the I-CSCF asks LIR UAT 2")
		mo := call(sctx, "user0001", "user0002")
		Expect(mo.Result).To(Equal("ok"))
		Expect(mo.PCSCF).NotTo(HavePrefix(dead + "."))
		Expect(phones.Phone("user0001").Registration().Count).To(Equal(reg.Count), "no re-registration happened")
		Expect(hasEvent(l.events("hss"), "cx_answer", map[string]any{"cmd": "LIR", "uat": float64(2), "impu": "sip:user0001@ims.test"})).To(BeTrue())
		backups := 0
		for _, n := range []string{"pcscf1", "pcscf2", "pcscf3"} {
			if n != dead && hasEvent(l.events(n), "restore", map[string]any{"impu": "sip:user0001@ims.test"}) {
				backups++
			}
		}
		Expect(backups).To(Equal(1), "one backup P-CSCF marked the caller's INVITE restore=1")

		By("terminating: the S-CSCF walks " + dead + "'s per-host record and reaches the phone through a backup")
		mt := call(sctx, "user0002", "user0001")
		Expect(mt.Result).To(Equal("ok"))

		By("re-registration through a backup P-CSCF (SPEC §4.3)")
		rctx, cancel := context.WithTimeout(sctx, 30*time.Second)
		defer cancel()
		Expect(phones.Phone("user0001").Register(rctx)).To(Succeed())
		Expect(phones.Phone("user0001").Registration().PCSCF).NotTo(HavePrefix(dead+"."), "the new Path names a survivor")
		Expect(call(sctx, "user0002", "user0001").Result).To(Equal("ok"))

		By("recovery: the restarted P-CSCF comes back empty and serves again")
		l.start(dead)
		Expect(call(sctx, "user0001", "user0003").Result).To(Equal("ok"))
	})

	It("a survivor S-CSCF takes over with the HSS restoration info (SPEC §4.4, §4.5, §4.6)", SpecTimeout(120*time.Second), func(sctx SpecContext) {
		// Six users on three S-CSCFs: one S-CSCF serves at least two of them. One of those re-registers after the
		// kill (§4.4); user0004 is then served without re-registering (§4.5, §4.6).
		byServer := map[string][]string{}
		for i := 1; i <= 6; i++ {
			u := fmt.Sprintf("user%04d", i)
			name := registrationOf(hssHTTP, u+"@ims.test")["server_name"].(string)
			byServer[name] = append(byServer[name], u)
		}
		var deadName string
		for name, users := range byServer {
			if len(users) >= 2 && (deadName == "" || slices.Contains(users, "user0004")) {
				deadName = name
			}
		}
		users := byServer[deadName]
		caller := users[0]
		rereg := users[1]
		if slices.Contains(users, "user0004") {
			caller = "user0004"
			rereg = users[0]
			if rereg == "user0004" {
				rereg = users[1]
			}
		}
		before := registrationOf(hssHTTP, caller+"@ims.test")
		dead := shortName(strings.TrimPrefix(deadName, "sip:"))
		regCount := phones.Phone(caller).Registration().Count
		l.kill(dead)

		By("re-registration of " + rereg + ": UAR UAT 0 names " + dead + ", which is unreachable; UAR UAT 2 and another S-CSCF (SPEC §4.4)")
		rctx, rcancel := context.WithTimeout(sctx, 30*time.Second)
		defer rcancel()
		Expect(phones.Phone(rereg).Register(rctx)).To(Succeed())
		reg := registrationOf(hssHTTP, rereg+"@ims.test")
		Expect(reg["state"]).To(Equal("registered"))
		Expect(reg["server_name"]).NotTo(Equal(deadName), "the HSS recorded the new S-CSCF")
		Expect(hasEvent(l.events("hss"), "cx_answer", map[string]any{"cmd": "UAR", "uat": float64(2), "impu": "sip:" + rereg + "@ims.test"})).To(BeTrue())
		Expect(hasEvent(l.events("icscf"), "reselect", map[string]any{"cmd": "UAR", "impu": "sip:" + rereg + "@ims.test"})).To(BeTrue())

		By("originating: the P-CSCF cannot reach " + dead + ", restore=1 through the I-CSCF, SAR UNREGISTERED_USER on a survivor")
		mo := call(sctx, caller, "user0005")
		Expect(mo.Result).To(Equal("ok"))
		after := registrationOf(hssHTTP, caller+"@ims.test")
		Expect(after["state"]).To(Equal("registered"))
		Expect(after["server_name"]).NotTo(Equal(before["server_name"]), "the HSS recorded the new S-CSCF")
		Expect(hasEvent(l.events("hss"), "cx_answer", map[string]any{"cmd": "SAR", "sat": float64(3), "impu": "sip:" + caller + "@ims.test"})).To(BeTrue())

		By("terminating: a user still assigned to " + dead + " is reached through LIR UAT 2")
		var stranded string
		for i := 1; i <= 6; i++ {
			u := fmt.Sprintf("user%04d", i)
			if registrationOf(hssHTTP, u+"@ims.test")["server_name"] == before["server_name"] {
				stranded = u
				break
			}
		}
		target := caller
		if stranded != "" {
			target = stranded
		}
		from := "user0006"
		if target == from {
			from = "user0005"
		}
		mt := call(sctx, from, target)
		Expect(mt.Result).To(Equal("ok"))
		Expect(registrationOf(hssHTTP, target+"@ims.test")["server_name"]).NotTo(Equal(before["server_name"]))
		Expect(phones.Phone(caller).Registration().Count).To(Equal(regCount), "no re-registration happened")

		By("re-registration after the takeover: UAR UAT 0 names the new S-CSCF")
		ctx, cancel := context.WithTimeout(sctx, 20*time.Second)
		defer cancel()
		Expect(phones.Phone(caller).Register(ctx)).To(Succeed())
		Expect(registrationOf(hssHTTP, caller+"@ims.test")["server_name"]).To(Equal(after["server_name"]))
		l.start(dead)
	})

	It("refuses restore=1 from a sender that is not a pool member", SpecTimeout(30*time.Second), func(sctx SpecContext) {
		p := newRawPhone()
		req := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", User: "user0002", Host: "ims.test"})
		from := sip.Uri{Scheme: "sip", User: "user0001", Host: "ims.test"}
		req.AppendHeader(&sip.FromHeader{Address: from, Params: sip.HeaderParams{{K: "tag", V: "x1"}}})
		req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: "user0002", Host: "ims.test"}})
		req.AppendHeader(&sip.RouteHeader{Address: sip.Uri{Scheme: "sip", Host: "icscf.ims.test",
			UriParams: sip.HeaderParams{{K: "lr"}, {K: "orig"}, {K: "restore", V: "1"}}}})
		req.AppendHeader(sip.NewHeader("P-Asserted-Identity", "<sip:user0001@ims.test>"))
		req.AppendHeader(&sip.ContactHeader{Address: sip.Uri{Scheme: "sip", User: "x", Host: "127.0.0.1", Port: 9}})
		req.SetDestination(l.icscf()) // straight to the I-CSCF
		ctx, cancel := context.WithTimeout(sctx, 10*time.Second)
		defer cancel()
		res, err := p.cli.Do(ctx, req)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.StatusCode).To(Equal(403))
	})

	It("answers a REGISTER quickly with 504 when every S-CSCF is down, without looping", SpecTimeout(90*time.Second), func(sctx SpecContext) {
		for _, n := range []string{"scscf1", "scscf2", "scscf3"} {
			l.kill(n)
		}
		p := newRawPhone()
		ctx, cancel := context.WithTimeout(sctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		res := p.register(ctx, l.bac(), "user0007", "pass0007", 600)
		Expect(res.StatusCode).To(BeElementOf(503, 504))
		Expect(time.Since(start)).To(BeNumerically("<", 15*time.Second))
		for _, n := range []string{"scscf1", "scscf2", "scscf3"} {
			l.start(n)
		}
	})
})
