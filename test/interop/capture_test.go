package interop_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
)

// Diameter command codes (RFC 6733, TS 29.229).
const (
	cmdCE = 257
	cmdDW = 280
	cmdUA = 300
	cmdSA = 301
	cmdLI = 302
	cmdMA = 303
)

var cmdNames = map[int]string{cmdCE: "CE", cmdDW: "DW", cmdUA: "UA", cmdSA: "SA", cmdLI: "LI", cmdMA: "MA", 282: "DP"}

// diamMsg is one Diameter message of the capture, as tshark's dissector decoded it.
type diamMsg struct {
	At         time.Time
	Stream     int // tcp.stream: one per TCP connection
	Cmd        int
	Request    bool
	HopByHop   string
	OriginHost string
	UserName   string
	Result     int      // Result-Code or Experimental-Result-Code (0: none)
	Schemes    []string // SIP-Authentication-Scheme values
	SARType    int      // Server-Assignment-Type (-1: none)
}

func (m diamMsg) String() string {
	kind := "A"
	if m.Request {
		kind = "R"
	}
	s := fmt.Sprintf("%s stream %d %s%s from %s", m.At.Format("15:04:05.000"), m.Stream, cmdName(m.Cmd), kind, m.OriginHost)
	if m.UserName != "" {
		s += " user " + m.UserName
	}
	if m.SARType >= 0 {
		s += fmt.Sprintf(" type %d", m.SARType)
	}
	if len(m.Schemes) > 0 {
		s += fmt.Sprintf(" scheme %q", m.Schemes)
	}
	if m.Result != 0 {
		s += fmt.Sprintf(" result %d", m.Result)
	}
	return s
}

func cmdName(c int) string {
	if n, ok := cmdNames[c]; ok {
		return n
	}
	return strconv.Itoa(c)
}

// pdml is the part of tshark's PDML output the decoder reads. A frame may carry several Diameter messages, each
// its own <proto name="diameter">.
type pdml struct {
	Packets []struct {
		Protos []pdmlProto `xml:"proto"`
	} `xml:"packet"`
}

type pdmlProto struct {
	Name   string      `xml:"name,attr"`
	Fields []pdmlField `xml:"field"`
}

type pdmlField struct {
	Name   string      `xml:"name,attr"`
	Show   string      `xml:"show,attr"`
	Fields []pdmlField `xml:"field"`
	Protos []pdmlProto `xml:"proto"`
}

// walk calls fn for every field below fs, depth first (grouped AVPs nest).
func walk(fs []pdmlField, fn func(pdmlField)) {
	for _, f := range fs {
		fn(f)
		walk(f.Fields, fn)
		for _, p := range f.Protos {
			walk(p.Fields, fn)
		}
	}
}

// decodePDML turns tshark's PDML into the Diameter messages in capture order.
func decodePDML(b []byte) ([]diamMsg, error) {
	var doc pdml
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("pdml: %w", err)
	}
	var out []diamMsg
	for i, p := range doc.Packets {
		var at time.Time
		stream := -1
		for _, pr := range p.Protos {
			walk(pr.Fields, func(f pdmlField) {
				switch f.Name {
				case "frame.time_epoch":
					sec, frac, _ := strings.Cut(f.Show, ".")
					s, _ := strconv.ParseInt(sec, 10, 64)
					frac = (frac + "000000000")[:9]
					ns, _ := strconv.ParseInt(frac, 10, 64)
					at = time.Unix(s, ns)
				case "tcp.stream":
					stream, _ = strconv.Atoi(f.Show)
				}
			})
		}
		for _, pr := range p.Protos {
			if pr.Name != "diameter" {
				continue
			}
			m := diamMsg{At: at, Stream: stream, Cmd: -1, SARType: -1}
			walk(pr.Fields, func(f pdmlField) {
				switch f.Name {
				case "diameter.cmd.code":
					m.Cmd, _ = strconv.Atoi(f.Show)
				case "diameter.flags.request":
					m.Request = f.Show == "1" || f.Show == "True"
				case "diameter.hopbyhopid":
					m.HopByHop = f.Show
				case "diameter.Origin-Host":
					m.OriginHost = f.Show
				case "diameter.User-Name":
					m.UserName = f.Show
				case "diameter.Result-Code", "diameter.Experimental-Result-Code":
					m.Result, _ = strconv.Atoi(f.Show)
				case "diameter.3GPP-SIP-Authentication-Scheme", "diameter.SIP-Authentication-Scheme":
					m.Schemes = append(m.Schemes, f.Show)
				case "diameter.Server-Assignment-Type":
					m.SARType, _ = strconv.Atoi(f.Show)
				}
			})
			if m.Cmd < 0 || stream < 0 {
				return nil, fmt.Errorf("pdml: packet %d: a Diameter message without command code or TCP stream", i+1)
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// capture is dumpcap writing the loopback traffic of the HSS's Diameter port (and of a probe port) to a file.
type capture struct {
	file, diamPort, probePort string
	s                         *gexec.Session
}

// checkTshark returns an error when dumpcap or tshark is missing.
func checkTshark() error {
	for _, t := range []string{"tshark", "dumpcap"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not installed (apt-get install tshark)", t)
		}
	}
	return nil
}

// startCapture starts dumpcap on lo and returns once packets really reach the file: dumpcap says "Capturing
// on" before that, so UDP datagrams to the unused probe port are sent until the file grows.
func startCapture(file string, diamPort, probePort int) *capture {
	GinkgoHelper()
	c := &capture{file: file, diamPort: strconv.Itoa(diamPort), probePort: strconv.Itoa(probePort)}
	filter := fmt.Sprintf("tcp port %d or udp port %d", diamPort, probePort)
	s, err := gexec.Start(exec.Command("dumpcap", "-q", "-i", "lo", "-f", filter, "-w", file), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	c.s = s
	DeferCleanup(c.stop)
	Eventually(s.Err, 20*time.Second).Should(gbytes.Say("Capturing on"))
	probe, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", c.probePort))
	Expect(err).NotTo(HaveOccurred())
	defer probe.Close()
	var size0 int64 = -1
	Eventually(func() int64 {
		_, _ = probe.Write([]byte("capture probe"))
		st, err := os.Stat(file)
		if err != nil {
			return 0
		}
		if size0 < 0 {
			size0 = st.Size()
		}
		return st.Size() - size0
	}, 20*time.Second, 100*time.Millisecond).Should(BeNumerically(">", 0), "dumpcap wrote no probe packet to %s", file)
	return c
}

// stop ends dumpcap (SIGINT: it finishes the file).
func (c *capture) stop() {
	if c.s.ExitCode() >= 0 {
		return
	}
	_ = c.s.Command.Process.Signal(syscall.SIGINT)
	select {
	case <-c.s.Exited:
	case <-time.After(10 * time.Second):
		c.s.Kill()
		<-c.s.Exited
	}
}

// decode runs tshark on the capture so far. A file still being written may end in a partial packet: tshark
// then says so on stderr, and what it decoded before is kept.
func (c *capture) decode() ([]diamMsg, error) {
	cmd := exec.Command("tshark", "-r", c.file, "-d", "tcp.port=="+c.diamPort+",diameter", "-Y", "diameter", "-T", "pdml")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("tshark: %w: %s", err, stderr.String())
	}
	if i := bytes.LastIndex(out, []byte("</packet>")); err != nil && i >= 0 && !bytes.Contains(out, []byte("</pdml>")) {
		out = append(out[:i+len("</packet>")], []byte("\n</pdml>\n")...)
	}
	return decodePDML(out)
}

// exchange is a request with its answer (nil: unanswered).
type exchange struct {
	Req diamMsg
	Ans *diamMsg
}

// pairs matches answers to requests by connection and hop-by-hop identifier.
func pairs(msgs []diamMsg) []exchange {
	type key struct {
		stream int
		hbh    string
	}
	idx := map[key]int{}
	var out []exchange
	for _, m := range msgs {
		k := key{m.Stream, m.HopByHop}
		if m.Request {
			idx[k] = len(out)
			out = append(out, exchange{Req: m})
			continue
		}
		if i, ok := idx[k]; ok && out[i].Ans == nil && out[i].Req.Cmd == m.Cmd {
			a := m
			out[i].Ans = &a
			delete(idx, k)
		}
	}
	return out
}

// cxExpectations is what the interop run must show in the capture.
type cxExpectations struct {
	sarTypes             []int     // the Server-Assignment-Types, in order
	schemesSeen          []string  // each must appear in some MAR
	schemesNever         []string  // none may appear
	silenceFrom, silence time.Time // a DWR answered by a DWA on each connection in [silenceFrom, silence]
}

// checkCx returns every way the capture differs from what a user of the HSS expects; none means it passed.
func checkCx(msgs []diamMsg, want cxExpectations) []string {
	var problems []string
	bad := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }
	ex := pairs(msgs)
	streams := map[int]bool{}
	count := map[string]int{}
	var sarTypes []int
	schemes := map[string]bool{}
	for _, e := range ex {
		streams[e.Req.Stream] = true
		count[cmdName(e.Req.Cmd)]++
		if e.Ans == nil {
			bad("unanswered: %s", e.Req)
			continue
		}
		if e.Ans.Result != 2001 && e.Ans.Result != 2002 {
			bad("result %d (want 2001 or 2002): %s answered by %s", e.Ans.Result, e.Req, *e.Ans)
		}
		switch e.Req.Cmd {
		case cmdSA:
			sarTypes = append(sarTypes, e.Req.SARType)
		case cmdMA:
			for _, s := range e.Req.Schemes {
				schemes[s] = true
			}
		}
	}
	if count["CE"] != 2 {
		bad("%d CER (want exactly 2: one per CSCF, no connection closed and reopened)", count["CE"])
	}
	if len(streams) != 2 {
		bad("%d TCP connections carried Diameter (want 2)", len(streams))
	}
	for _, c := range []string{"UA", "MA", "SA"} {
		if count[c] == 0 {
			bad("no %sR in the capture", c)
		}
	}
	if count["LI"] != 1 {
		bad("%d LIR (want exactly 1: the call's, at the I-CSCF)", count["LI"])
	}
	if !slices.Equal(sarTypes, want.sarTypes) {
		bad("SAR types %v (want %v)", sarTypes, want.sarTypes)
	}
	for _, s := range want.schemesSeen {
		if !schemes[s] {
			bad("no MAR with SIP-Authentication-Scheme %q (seen: %v)", s, keys(schemes))
		}
	}
	for _, s := range want.schemesNever {
		if schemes[s] {
			bad("a MAR with SIP-Authentication-Scheme %q", s)
		}
	}
	for _, e := range ex {
		if e.Req.Cmd != cmdDW && e.Req.Cmd != cmdCE && !e.Req.At.Before(want.silenceFrom) && !e.Req.At.After(want.silence) {
			bad("Cx traffic during the silence: %s", e.Req)
		}
	}
	for st := range streams {
		ok := false
		for _, e := range ex {
			if e.Req.Stream == st && e.Req.Cmd == cmdDW && e.Ans != nil && e.Ans.Result == 2001 &&
				!e.Req.At.Before(want.silenceFrom) && !e.Req.At.After(want.silence) {
				ok = true
			}
		}
		if !ok {
			bad("connection %d: no DWR answered by a DWA 2001 during the silence", st)
		}
	}
	return problems
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dwrs lists the DWRs of [from, to] as "sender at offset" lines.
func dwrs(msgs []diamMsg, from, to time.Time) []string {
	var out []string
	for _, e := range pairs(msgs) {
		if e.Req.Cmd != cmdDW || e.Req.At.Before(from) || e.Req.At.After(to) {
			continue
		}
		ans := "unanswered"
		if e.Ans != nil {
			ans = fmt.Sprintf("DWA %d after %s", e.Ans.Result, e.Ans.At.Sub(e.Req.At).Round(time.Microsecond))
		}
		idle := "no message before it"
		for _, m := range msgs {
			if m.Stream == e.Req.Stream && m.At.Before(e.Req.At) {
				idle = fmt.Sprintf("%.1f s after the connection's previous message", e.Req.At.Sub(m.At).Seconds())
			}
		}
		out = append(out, fmt.Sprintf("DWR from %s on connection %d at %.1f s into the silence (%s), %s",
			e.Req.OriginHost, e.Req.Stream, e.Req.At.Sub(from).Seconds(), idle, ans))
	}
	return out
}
