package compare

import (
	"fmt"
	"strings"

	"github.com/imslab/quasipool/internal/topology"
)

// StudyColumn is one scheme's column of the study's Table 1 (异地容灾组网方式的指标对比分析, SPEC §1): the study's own
// words, Chinese then English, one per row of the table (StudyAspects).
type StudyColumn struct {
	Name   string    // the study's name of the scheme, e.g. 1+1互备
	Values [7]string // in the order of StudyAspects
}

// StudyAspects are the rows of the study's Table 1, the study's words then English.
var StudyAspects = [7]string{
	"组网模式 (layout)", "冗余程度 (redundancy)", "数据同步 (data sync)", "切换时间 (switchover time)",
	"倒换接管话务 (traffic taken over)", "倒换风险 (switchover risk)", "技术实现 (complexity)",
}

// StudyReading says which reading of the garbled rows the columns use. In the seed text the rows data sync,
// traffic taken over and complexity carry seven values for six columns, so one value per row is spurious; the
// two readings differ only in the N+1 column.
const StudyReading = "Three rows of the study's Table 1 (data sync, traffic taken over, complexity) carry seven " +
	"values for six columns in the source text; the N+1 column is read as \"no sync, after re-registration, simple\" " +
	"because §2.1 describes the N+1 spare as a cold standby (SPEC §1). The other columns, 1+1互备 included, read " +
	"the same either way."

// Study maps the testbed's schemes onto the study's columns.
var Study = map[string]StudyColumn{
	topology.SchemeActiveStandby: {"1+1主备", [7]string{"配对 (pairs)", "1倍 (1×)", "是 (yes)", "快 (fast)",
		"全部 (all)", "大 (high)", "简单 (simple)"}},
	topology.SchemeMutual: {"1+1互备", [7]string{"配对 (pairs)", "1倍 (1×)", "是 (yes)", "快 (fast)",
		"全部 (all)", "小 (low)", "复杂 (complex)"}},
	topology.SchemeNPlus1: {"N+1备份", [7]string{"N+1", "1/N", "否 (no)", "慢 (slow)",
		"用户重注册后才完成话务接管 (after re-registration)", "大 (high)", "简单 (simple)"}},
	topology.SchemeLoadSharing: {"负荷分担", [7]string{"N", "1/(N-1)", "否 (no)", "慢 (slow)",
		"用户重注册后才完成话务接管 (after re-registration)", "小 (low)", "简单 (simple)"}},
	topology.SchemePoolSync: {"POOL", [7]string{"N", "1/(N-1)", "是 (yes)", "快 (fast)", "全部 (all)",
		"小 (low)", "复杂 (complex)"}},
	topology.SchemeQuasiPool: {"准POOL", [7]string{"N", "1/(N-1)", "是（HSS共享或容灾查询） (yes, through the HSS)",
		"快 (fast)", "全部 (all)", "小 (low)", "一般 (moderate)"}},
}

// studyRows is the study's Table 1 beside the measurement: a header (aspect, then one column per variant) and
// one row per aspect whose cells are "study: <the study's words> · measured: <what this run shows>".
func studyRows(rows []Row) [][]string {
	head := []string{"Table 1 row"}
	for _, r := range rows {
		head = append(head, fmt.Sprintf("%s (%s)", r.Variant, Study[r.Scheme].Name))
	}
	out := [][]string{head}
	for i, aspect := range StudyAspects {
		line := []string{aspect}
		for _, r := range rows {
			line = append(line, "study: "+Study[r.Scheme].Values[i]+" · measured: "+studyMeasured(i, r))
		}
		out = append(out, line)
	}
	return out
}

// studyMeasured is what a run shows for row i of StudyAspects.
func studyMeasured(i int, r Row) string {
	if r.Error != "" && r.AffectedUsers == 0 && r.CallsTotal == 0 && i > 1 {
		return "run failed"
	}
	switch i {
	case 0:
		return fmt.Sprintf("%d/%d processes P/S, %d active each", r.Members[0], r.Members[1], r.ActiveMembers[0])
	case 1:
		measured := "survivors' load not measured in this run"
		if r.PeakLoadRatio != nil {
			measured = fmt.Sprintf("measured: the busiest survivor served %.2f× an active member's SIP requests/s "+
				"after the takeover", *r.PeakLoadRatio)
			if r.CPUPeakRatio != nil {
				measured += fmt.Sprintf(" and used %.2f× its CPU", *r.CPUPeakRatio)
			}
		}
		return fmt.Sprintf("%.0f %% of the processes idle; by configuration one failure adds %s to the load of %s; %s",
			r.SpareCapacity*100, takeoverShare(r), takeoverBy(r.Scheme), measured)
	case 2:
		return fmt.Sprintf("member to member: %s; %d replication messages, %d bytes in the run",
			yesNo(r.StateReplicated), r.ReplMessagesRun, r.ReplBytesRun)
	case 3:
		return fmt.Sprintf("interruption p50 MO %s s, MT %s s", p50(r.MO), p50(r.MT))
	case 4:
		return fmt.Sprintf("%s MO / %s MT of the %d affected users before re-registration", pct(r.MO.TakenOver),
			pct(r.MT.TakenOver), r.AffectedUsers)
	case 5:
		return "not measured by this scenario"
	}
	return "not measurable"
}

func p50(d Dir) string {
	if d.InterruptionS == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", d.InterruptionS.P50)
}

func writeMDTable(b *strings.Builder, rows [][]string) {
	for i, row := range rows {
		cells := make([]string, len(row))
		for j, c := range row {
			cells[j] = mdCell(c)
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
		if i == 0 {
			fmt.Fprintf(b, "|%s\n", strings.Repeat("---|", len(row)))
		}
	}
}

func writeHTMLTable(b *strings.Builder, rows [][]string, esc func(string) string) {
	b.WriteString("<table>\n")
	for i, row := range rows {
		tag := "td"
		if i == 0 {
			tag = "th"
		}
		b.WriteString("<tr>")
		for _, c := range row {
			fmt.Fprintf(b, "<%s>%s</%s>", tag, esc(c), tag)
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n")
}

// takeoverShare is the dead member's load, as a share of one member's, that each member taking over gets: all of
// it for the schemes with a single backup per member, 1/(N-1) when the survivors share it.
func takeoverShare(r Row) string {
	switch r.Scheme {
	case topology.SchemeMutual, topology.SchemeActiveStandby, topology.SchemeNPlus1:
		return "100 %"
	}
	if n := r.ActiveMembers[0]; n > 1 {
		return fmt.Sprintf("%.0f %%", 100/float64(n-1))
	}
	return "–"
}

func takeoverBy(scheme string) string {
	switch scheme {
	case topology.SchemeMutual:
		return "the partner"
	case topology.SchemeActiveStandby:
		return "the idle standby"
	case topology.SchemeNPlus1:
		return "the idle spare"
	}
	return "each survivor"
}
