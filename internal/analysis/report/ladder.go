package report

import (
	"fmt"
	"html"
	"slices"
	"sort"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

// ladder is one drawn sequence diagram.
type ladder struct {
	info LadderInfo
	svg  string
}

// chooseLadderCalls picks, per direction, the takeover call to draw: among affected users' successful calls
// after their fault, the earliest one before the user's next re-registration whose Call-ID appears in the trace
// (else the earliest one in the trace at all).
func (a *analysis) chooseLadderCalls(r *run, sipCallIDs map[string]bool) map[string]*record {
	out := map[string]*record{}
	for _, dir := range []string{"mo", "mt"} {
		var fallback *record
		for i := range r.records {
			x := &r.records[i]
			u, aff := a.affected[x.IMPU]
			if x.Type != "call" || x.Direction != dir || !x.ok() || !aff || x.TNs < u.t0Ns || !sipCallIDs[x.CallID] {
				continue
			}
			if u.reregNs == 0 || x.TNs < u.reregNs {
				out[dir] = x
				break
			}
			if fallback == nil {
				fallback = x
			}
		}
		if out[dir] == nil && fallback != nil {
			out[dir] = fallback
		}
	}
	return out
}

// ladderMessages collects the messages of one call: every SIP message with its Call-ID, and the Diameter
// requests about either party sent while the call was being set up or held (from its start to the end of its
// record plus 1 s), with their answers (matched by hop-by-hop and end-to-end identifiers).
func ladderMessages(rec *record, calls map[string]*call, msgs []msg) []msg {
	parties := map[string]bool{userPart(rec.IMPU): true}
	if c := calls[rec.CallID]; c != nil {
		for _, x := range []*record{c.mo, c.mt} {
			if x != nil {
				parties[userPart(x.IMPU)] = true
			}
		}
	}
	for _, id := range []string{rec.From, rec.To} {
		if id != "" {
			parties[userPart(id)] = true
		}
	}
	var sipFirst, sipLast int64
	for _, m := range msgs {
		if m.Proto == "sip" && m.callID == rec.CallID {
			if sipFirst == 0 {
				sipFirst = m.TNs
			}
			sipLast = m.TNs
		}
	}
	from, to := rec.TNs-100e6, rec.TNs+int64(rec.Duration*1e6)+1e9
	if rec.Setup200 != nil {
		to += int64(*rec.Setup200 * 1e6)
	}
	if sipFirst != 0 {
		from, to = min(from, sipFirst), max(to, sipLast)
	}
	type txn struct{ h, e uint32 }
	asked := map[txn]bool{}
	var out []msg
	for _, m := range msgs {
		switch {
		case m.Proto == "sip" && m.callID == rec.CallID:
			out = append(out, m)
		case m.Proto == "diameter" && m.TNs >= from && m.TNs <= to && m.cmd >= 300 && m.cmd <= 305:
			if m.request {
				for _, u := range m.users {
					if parties[u] {
						asked[txn{m.hopByHop, m.endToEnd}] = true
						out = append(out, m)
						break
					}
				}
			} else if asked[txn{m.hopByHop, m.endToEnd}] {
				out = append(out, m)
			}
		}
	}
	return out
}

// laneOrder sorts lanes along the signalling path: phones, BAC, P-CSCFs, I-CSCF, S-CSCFs, HSS, others.
func laneOrder(name string) int {
	switch {
	case name == "ue":
		return 0
	case strings.HasPrefix(name, "bac"):
		return 1
	case strings.HasPrefix(name, "pcscf"):
		return 2
	case strings.HasPrefix(name, "icscf"):
		return 3
	case strings.HasPrefix(name, "scscf"):
		return 4
	case strings.HasPrefix(name, "hss"):
		return 5
	}
	return 6
}

// ladderLayout places one sequence diagram: one lane per node along the signalling path, one row per message.
// The SVG and the PNG of a ladder are drawn from the same layout (in points, y growing downwards as in SVG).
type ladderLayout struct {
	title         string
	lanes         []string
	width, height int
	laneX         []int
	rows          []ladderRow
}

// ladderRow is one message's arrow: from x1 to x2 at height y, its label and its offset from the first message.
type ladderRow struct {
	y, x1, x2 int
	diameter  bool
	label     string
	offsetMs  float64
}

const ladderLeft, ladderLaneW, ladderTop, ladderRowH, ladderBottom = 90, 150, 70, 26, 30

// The SVG's colours of SIP and Diameter messages, the PNG's (ladderpng.go).
var ladderSIPColor, ladderCxColor = figure.Hex(figure.Blue), figure.Hex(figure.Cx)

func layoutLadder(title string, msgs []msg, ab addressBook) ladderLayout {
	laneSet := map[string]bool{}
	for _, m := range msgs {
		laneSet[ab.name(m.Src)] = true
		laneSet[ab.name(m.Dst)] = true
	}
	lanes := make([]string, 0, len(laneSet))
	for l := range laneSet {
		lanes = append(lanes, l)
	}
	sort.Slice(lanes, func(i, j int) bool {
		oi, oj := laneOrder(lanes[i]), laneOrder(lanes[j])
		if oi != oj {
			return oi < oj
		}
		return lanes[i] < lanes[j]
	})
	l := ladderLayout{title: title, lanes: lanes, width: ladderLeft + ladderLaneW*len(lanes) + 20,
		height: ladderTop + ladderRowH*len(msgs) + ladderBottom}
	for i := range lanes {
		l.laneX = append(l.laneX, ladderLeft+ladderLaneW*i+ladderLaneW/2)
	}
	x := func(lane string) int { return l.laneX[slices.Index(lanes, lane)] }
	var t0 int64
	if len(msgs) > 0 {
		t0 = msgs[0].TNs
	}
	for i, m := range msgs {
		l.rows = append(l.rows, ladderRow{y: ladderTop + ladderRowH*i + ladderRowH/2, x1: x(ab.name(m.Src)),
			x2: x(ab.name(m.Dst)), diameter: m.Proto == "diameter", label: m.label, offsetMs: float64(m.TNs-t0) / 1e6})
	}
	return l
}

// svg renders the layout as an SVG sequence diagram, one lane per node, one arrow per message, with the time
// offset from the first message on the left; id makes its arrow marker unique in an HTML page.
func (l ladderLayout) svg(id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="ladder" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		l.width, l.height, l.width, l.height)
	marker := "arrow-" + id // unique per ladder: several ladders share one HTML document
	fmt.Fprintf(&b, `<defs><marker id="%s" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>`+"\n", marker)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", html.EscapeString(l.title))
	for i, lane := range l.lanes {
		fmt.Fprintf(&b, `<text x="%d" y="50" text-anchor="middle" font-weight="bold" class="lane">%s</text>`+"\n", l.laneX[i], html.EscapeString(lane))
		fmt.Fprintf(&b, `<line x1="%d" y1="58" x2="%d" y2="%d" stroke="#999" stroke-dasharray="4,3"/>`+"\n", l.laneX[i], l.laneX[i], l.height-10)
	}
	for _, r := range l.rows {
		color := ladderSIPColor
		if r.diameter {
			color = ladderCxColor
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" fill="#555">+%.1f ms</text>`+"\n", r.y+4, r.offsetMs)
		if r.x1 == r.x2 { // a node talking to itself: a small loop
			fmt.Fprintf(&b, `<path d="M%d,%d h30 v10 h-30" fill="none" stroke="%s" marker-end="url(#%s)"/>`+"\n", r.x1, r.y-5, color, marker)
		} else {
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" marker-end="url(#%s)"/>`+"\n", r.x1, r.y, r.x2, r.y, color, marker)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" fill="%s" class="msg">%s</text>`+"\n", (r.x1+r.x2)/2, r.y-4, color, html.EscapeString(r.label))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
