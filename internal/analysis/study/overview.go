package study

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Published is one study's study.json as published, and where a document links to it.
type Published struct {
	Result *Result
	// Link is the study's directory as the document links to it (e.g. results/study-risk).
	Link string
}

// ReadPublished reads a study.json; link is its directory as the overview's document links to it.
func ReadPublished(path, link string) (Published, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Published{}, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Published{}, fmt.Errorf("%s: not a study.json: %w", path, err)
	}
	if r.Study == "" {
		return Published{}, fmt.Errorf("%s: not a study.json: no \"study\" field", path)
	}
	return Published{Result: &r, Link: filepath.ToSlash(link)}, nil
}

// claimPlaces are where in the study a claim's text says it is, in the order of the study (§2.2's problems,
// §2's case for the quasi-pool, then Table 1 row by row, then the conclusion under it): a claim's text begins with
// its place (docs/study.md, "Claims").
var claimPlaces = []string{
	"§2.2.1", "§2.2.2", "§2.2.3", "§2.2.4",
	"§2 准POOL",
	"Table 1 组网模式", "Table 1 冗余程度", "Table 1 数据同步", "Table 1 切换时间", "Table 1 倒换接管话务",
	"Table 1 倒换风险", "Table 1 技术实现",
	"§2 conclusion",
}

// claimPlace is the index of the place c's text begins with (len(claimPlaces) when none).
func claimPlace(text string) int {
	for i, p := range claimPlaces {
		if strings.HasPrefix(text, p) {
			return i
		}
	}
	return len(claimPlaces)
}

// readingRe finds where a claim's text turns from the study's words to the project's reading of them ("Read: …",
// "Read (experiment …): …", "Read under …").
var readingRe = regexp.MustCompile(`\sRead[\s:(]`)

// claimWording is a claim's text without its reading: the study's words and their translation.
func claimWording(text string) string {
	if loc := readingRe.FindStringIndex(text); loc != nil && loc[0] > 0 {
		return strings.TrimSpace(text[:loc[0]])
	}
	return text
}

// ClaimsOverview is the table of every claim of the published studies in the order of the paper, with each
// verdict and the numbers behind it: the one place a reviewer reads which of the study's claims the testbed
// supports, refutes or cannot measure (docs/results.md, "The study's claims"). Made from the study.json files
// alone, like every other table of results.md.
func ClaimsOverview(studies []Published) string {
	type row struct {
		place int
		c     ClaimResult
		s     Published
	}
	var rows []row
	withClaims := 0
	for _, s := range studies {
		for _, c := range s.Result.Claims {
			rows = append(rows, row{claimPlace(c.Text), c, s})
		}
		if len(s.Result.Claims) > 0 {
			withClaims++
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.place, b.place) })
	var b bytes.Buffer
	count := map[string]int{}
	for _, r := range rows {
		count[r.c.Verdict]++
	}
	fmt.Fprintf(&b, "%d claims from %d studies: ", len(rows), withClaims)
	var parts []string
	for _, v := range []string{VerdictSupported, VerdictRefuted, VerdictInconclusive, VerdictNotMeasurable, VerdictPending} {
		if count[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[v], v))
		}
	}
	b.WriteString(strings.Join(parts, ", ") + ". Each check: the KPI's mean over the runs [95 % CI], n runs; " +
		"the study's section has how the claim is read and every run behind it.\n\n")
	b.WriteString("| claim (the study's words) | study | verdict | checks: scheme, experiment: KPI bound → mean [95 % CI] (n runs) |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, r := range rows {
		verdict := "**" + r.c.Verdict + "**"
		if r.c.Provisional {
			verdict += " (provisional: runs pending)"
		}
		var checks []string
		for _, g := range groupSweepChecks(r.c.Checks) {
			k := g[0]
			if len(g) == 1 {
				c := fmt.Sprintf("`%s`, %s: `%s` %s %g → %s", k.Schemes(), k.Experiment, k.KPI, k.Op, k.Value, checkValue(k))
				if k.Mean != nil || k.Verdict != VerdictPending {
					c += " " + checkMark(k.Verdict)
				}
				checks = append(checks, c)
				continue
			}
			// The points of one sweep, one line: every value's measurement, then where the bound does not hold.
			base, _, _ := strings.Cut(k.Experiment, "@")
			var vals, not []string
			held := 0
			for _, k := range g {
				_, point, _ := strings.Cut(k.Experiment, "@")
				vals = append(vals, point+": "+checkValue(k))
				if k.Verdict == VerdictSupported {
					held++
				} else {
					not = append(not, strings.Trim(checkMark(k.Verdict), "()")+" at "+point)
				}
			}
			mark := fmt.Sprintf("(holds at all %d values)", len(g))
			if held < len(g) {
				mark = fmt.Sprintf("(holds at %d of %d values; %s)", held, len(g), strings.Join(not, "; "))
			}
			checks = append(checks, fmt.Sprintf("`%s`, sweep %s: `%s` %s %g → %s %s", k.Schemes(), base, k.KPI, k.Op,
				k.Value, strings.Join(vals, "; "), mark))
		}
		if r.c.Reason != "" {
			checks = append(checks, oneCell(r.c.Reason))
		}
		fmt.Fprintf(&b, "| `%s`: %s | [%s](%s/study.md) | %s | %s |\n", r.c.ID, oneCell(claimWording(r.c.Text)),
			r.s.Result.Study, r.s.Link, verdict, strings.Join(checks, "<br>"))
	}
	return b.String()
}

// checkValue is a check's measurement in a cell: mean [95 % CI] (n runs).
func checkValue(k CheckResult) string {
	switch {
	case k.Mean == nil && k.Verdict == VerdictPending:
		return "not run yet"
	case k.Mean != nil && k.CILow == nil:
		return num(*k.Mean) + " (1 run, no CI)"
	case k.Mean != nil:
		return fmt.Sprintf("%s [%s, %s] (%d)", num(*k.Mean), num(*k.CILow), num(*k.CIHigh), k.Runs)
	}
	return "no value"
}

// groupSweepChecks splits a claim's checks into runs of consecutive checks that differ only in the point of one
// sweep (<experiment>@<param>=<value>, the expansion of a check on a sweep experiment); any other check is a run
// of its own.
func groupSweepChecks(checks []CheckResult) [][]CheckResult {
	var out [][]CheckResult
	for _, k := range checks {
		if n := len(out); n > 0 && sameSweepCheck(out[n-1][0], k) {
			out[n-1] = append(out[n-1], k)
			continue
		}
		out = append(out, []CheckResult{k})
	}
	return out
}

func sameSweepCheck(a, b CheckResult) bool {
	ab, _, aok := strings.Cut(a.Experiment, "@")
	bb, _, bok := strings.Cut(b.Experiment, "@")
	return aok && bok && ab == bb && a.Scheme == b.Scheme && a.KPI == b.KPI && a.Op == b.Op && a.Value == b.Value
}

// checkMark is a check's verdict in a cell: a word, so that the table reads without a legend.
func checkMark(v string) string {
	switch v {
	case VerdictSupported:
		return "(holds)"
	case VerdictRefuted:
		return "(**fails**)"
	case VerdictInconclusive:
		return "(*CI straddles the bound*)"
	}
	return "(" + v + ")"
}
