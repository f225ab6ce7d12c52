package report

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/imslab/quasipool/internal/runtime/obs"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/imslab/quasipool/internal/analysis/figure"
)

// Timeline window around the (first) fault: from timelineBeforeS before it to timelineAfterS after it, clipped
// to the run; the whole run without a fault. Rates are per timelineBinS.
const (
	timelineBeforeS = 10.0
	timelineAfterS  = 30.0
	timelineBinS    = 1.0
)

var (
	poolMember = regexp.MustCompile(`^(pcscf|scscf)[0-9]+$`)
	colDetect  = figure.Detect
)

// timelineSeries is one line of a timeline panel: a count per bin.
type timelineSeries struct {
	name   string
	counts []float64
	col    color.Color
	dashed bool
}

// timeline is what plots/timeline.svg draws, in bins of timelineBinS from FromS.
type timeline struct {
	fromS, toS float64
	members    []timelineSeries // requests routed to each P-/S-CSCF member (sip_tx events, all senders, by sending time)
	cx         []timelineSeries // the HSS's Cx answers: total and per command
	calls      []timelineSeries // calls answered / failed (users' traffic; probes apart), by start
	detections []detection      // peer_state down events for a faulted node
}

type detection struct {
	node string
	atS  float64
}

// memberOf returns the pool member a sip_tx event's peer designates ("pcscf1.ims.test" → "pcscf1"), or "".
func (r *run) memberOf(peer string, kinds map[string]string) string {
	host, _, _ := strings.Cut(peer, ".")
	if k, ok := kinds[host]; ok {
		if k == "pcscf" || k == "scscf" {
			return host
		}
		return ""
	}
	if poolMember.MatchString(host) {
		return host
	}
	return ""
}

// buildTimeline bins the run's events and records around the first fault.
func (a *analysis) buildTimeline(r *run) *timeline {
	tl := &timeline{fromS: 0, toS: a.s.DurationS}
	if len(a.s.Faults) > 0 {
		t0 := a.s.Faults[0].T0S
		tl.fromS = math.Max(0, math.Floor(t0-timelineBeforeS))
		tl.toS = math.Min(a.s.DurationS, math.Ceil(t0+timelineAfterS))
		for _, f := range a.s.Faults {
			for _, n := range sortedKeys(f.TimeToDetectS) {
				tl.detections = append(tl.detections, detection{node: n, atS: f.T0S + f.TimeToDetectS[n]})
			}
		}
		sort.SliceStable(tl.detections, func(i, j int) bool { return tl.detections[i].atS < tl.detections[j].atS })
	}
	if tl.toS <= tl.fromS {
		tl.toS = tl.fromS + timelineBinS
	}
	n := int(math.Ceil((tl.toS - tl.fromS) / timelineBinS))
	bin := func(tNs int64) int {
		x := (a.offset(tNs) - tl.fromS) / timelineBinS
		if x < 0 || x >= float64(n) {
			return -1
		}
		return int(x)
	}
	kinds := map[string]string{}
	for _, nc := range r.nodes {
		kinds[nc.Name] = nc.Kind
	}
	members := map[string][]float64{}
	cx := map[string][]float64{}
	total := make([]float64, n)
	for _, e := range r.events {
		t := e.TNs
		if x, ok := e.Data.(obs.SIPTx); ok {
			t -= x.LatencyUs * 1000 // recorded when the transaction ended: placed when the request was sent
		}
		i := bin(t)
		if i < 0 {
			continue
		}
		switch x := e.Data.(type) {
		case obs.SIPTx:
			if m := r.memberOf(x.Peer, kinds); m != "" {
				if members[m] == nil {
					members[m] = make([]float64, n)
				}
				members[m][i]++
			}
		case obs.CxAnswer:
			cmd := x.Cmd
			if cmd == "" {
				cmd = "other"
			}
			if cx[cmd] == nil {
				cx[cmd] = make([]float64, n)
			}
			cx[cmd][i]++
			total[i]++
		}
	}
	for k, name := range sortedKeys(floatKeys(members)) {
		tl.members = append(tl.members, timelineSeries{name: name, counts: members[name], col: memberColour(k),
			dashed: strings.HasPrefix(name, "scscf")})
	}
	if len(cx) > 0 {
		tl.cx = append(tl.cx, timelineSeries{name: "all Cx", counts: total, col: color.Black})
		for k, name := range sortedKeys(floatKeys(cx)) {
			tl.cx = append(tl.cx, timelineSeries{name: name, counts: cx[name], col: memberColour(k), dashed: true})
		}
	}
	answered, failed := make([]float64, n), make([]float64, n)
	for _, c := range groupCalls(r) {
		m := c.main()
		if m.Result == "aborted" {
			continue // cut off by the end of the run (docs/report.md)
		}
		if i := bin(m.TNs); i >= 0 {
			if m.ok() {
				answered[i]++
			} else {
				failed[i]++
			}
		}
	}
	tl.calls = []timelineSeries{{name: "calls answered", counts: answered, col: colOthers},
		{name: "calls failed", counts: failed, col: colAffected}}
	if len(r.probes) > 0 {
		pa, pf := make([]float64, n), make([]float64, n)
		for _, p := range r.probes {
			if p.Type != "call" || p.Direction != "mo" || p.Result == "aborted" {
				continue // the caller's record tells a probe's outcome
			}
			if i := bin(p.TNs); i >= 0 {
				if p.ok() {
					pa[i]++
				} else {
					pf[i]++
				}
			}
		}
		tl.calls = append(tl.calls, timelineSeries{name: "probes answered", counts: pa, col: colOthers, dashed: true},
			timelineSeries{name: "probes failed", counts: pf, col: colAffected, dashed: true})
	}
	return tl
}

func floatKeys(m map[string][]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k := range m {
		out[k] = 0
	}
	return out
}

func memberColour(i int) color.Color { return figure.MemberColour(i) }

// plotTimeline draws the timeline around the fault as three panels over one time axis: requests/s routed to
// each pool member, the HSS's Cx answers/s, and calls answered/failed per second; the faults and every node's
// detection of them are vertical lines in each panel. It returns SVG and PNG.
func plotTimeline(s *Summary, tl *timeline) (svg, png []byte, err error) {
	panel := func(title, y string, series []timelineSeries, legend bool) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Title.TextStyle.Font.Size = figure.PanelTitle
		p.Y.Label.Text = y
		p.X.Min, p.X.Max = tl.fromS, tl.toS
		p.Y.Min = 0
		top := 1.0
		for _, se := range series {
			top = max(top, slices.Max(append([]float64{0}, se.counts...)))
		}
		p.Y.Max = top * 1.15
		p.Legend.Top, p.Legend.Left = true, false
		p.Legend.TextStyle.Font.Size = figure.PanelLegend
		for _, se := range series {
			var xys plotter.XYs
			for i, c := range se.counts {
				x := tl.fromS + float64(i)*timelineBinS
				xys = append(xys, plotter.XY{X: x, Y: c / timelineBinS}, plotter.XY{X: x + timelineBinS, Y: c / timelineBinS})
			}
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = se.col, vg.Points(1.2)
			if se.dashed {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
			}
			p.Add(l)
			p.Legend.Add(se.name, l)
		}
		for i, f := range s.Faults {
			if err := vline(p, f.T0S, p.Y.Max, colFault, figure.LongDash, 1.5,
				legendIf(legend && i == 0, fmt.Sprintf("fault: %s %s", f.Kind, f.Target))); err != nil {
				return nil, err
			}
			if f.HealS != nil {
				if err := vline(p, *f.HealS, p.Y.Max, colFault, figure.HealDash, 1.5,
					legendIf(legend && i == 0, "healed")); err != nil {
					return nil, err
				}
			}
		}
		var who []string
		for _, d := range tl.detections {
			who = append(who, fmt.Sprintf("%s +%.2f s", d.node, d.atS-s.Faults[0].T0S))
		}
		if len(who) > 4 {
			who = append(who[:4], "…")
		}
		for i, d := range tl.detections {
			if err := vline(p, d.atS, p.Y.Max, colDetect, []vg.Length{vg.Points(2), vg.Points(2)}, 1,
				legendIf(legend && i == 0, "detected down: "+strings.Join(who, ", "))); err != nil {
				return nil, err
			}
		}
		return p, nil
	}
	win := fmt.Sprintf("%.0f–%.0f s", tl.fromS, tl.toS)
	p1, err := panel(fmt.Sprintf("Requests routed to each pool member (sip_tx events of every sender, per %g s; %s)",
		timelineBinS, win), "requests/s", tl.members, true)
	if err != nil {
		return nil, nil, fmt.Errorf("report: timeline: %w", err)
	}
	p2, err := panel("Cx requests answered by the HSS (cx_answer events)", "Cx/s", tl.cx, false)
	if err != nil {
		return nil, nil, fmt.Errorf("report: timeline: %w", err)
	}
	p3, err := panel("Calls by outcome, by start (caller's record; reachability probes dashed)", "calls/s", tl.calls, false)
	if err != nil {
		return nil, nil, fmt.Errorf("report: timeline: %w", err)
	}
	p3.X.Label.Text = "time since start (s)"
	plots := [][]*plot.Plot{{p1}, {p2}, {p3}}
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	drawAll := func(c vg.CanvasSizer) {
		cs := plot.Align(plots, tiles, draw.New(c))
		for i := range plots {
			plots[i][0].Draw(cs[i][0])
		}
	}
	if svg, err = figure.DrawSVG(figure.Panels, drawAll); err != nil {
		return nil, nil, fmt.Errorf("report: timeline: %w", err)
	}
	if png, err = figure.DrawPNG(figure.Panels, drawAll); err != nil {
		return nil, nil, fmt.Errorf("report: timeline: %w", err)
	}
	return svg, png, nil
}

func legendIf(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

func vline(p *plot.Plot, x, top float64, col color.Color, dashes []vg.Length, width float64, legend string) error {
	if x < p.X.Min || x > p.X.Max {
		return nil
	}
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
	if err != nil {
		return err
	}
	l.Color, l.Dashes, l.Width = col, dashes, vg.Points(width)
	p.Add(l)
	if legend != "" {
		p.Legend.Add(legend, l)
	}
	return nil
}

// csv renders the timeline's counts: one row per bin (start_s, then one column per series, counts per bin).
func (tl *timeline) csv() ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	head := []string{"start_s"}
	var cols [][]float64
	for _, g := range []struct {
		prefix string
		series []timelineSeries
	}{{"requests_to_", tl.members}, {"cx_", tl.cx}, {"", tl.calls}} {
		for _, se := range g.series {
			head = append(head, g.prefix+strings.ReplaceAll(se.name, " ", "_"))
			cols = append(cols, se.counts)
		}
	}
	_ = w.Write(head)
	n := int(math.Ceil((tl.toS - tl.fromS) / timelineBinS))
	for i := range n {
		row := []string{strconv.FormatFloat(tl.fromS+float64(i)*timelineBinS, 'f', -1, 64)}
		for _, c := range cols {
			row = append(row, strconv.FormatFloat(c[i], 'f', -1, 64))
		}
		_ = w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("report: timeline.csv: %w", err)
	}
	return buf.Bytes(), nil
}
