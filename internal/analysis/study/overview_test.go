package study_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/imslab/quasipool/internal/analysis/study"
)

var _ = Describe("the claims overview", Label("unit"), func() {
	// Two published studies as imslab study writes them (only the fields the overview reads).
	risk := `{"study": "risk", "claims": [
	  {"id": "risk-low", "text": "Table 1 倒换风险, 准POOL: 小 (low). Read: the users are still served.", "verdict": "refuted",
	   "checks": [{"check": {"experiment": "second-fault", "scheme": "quasi-pool", "kpi": "restored_at_end", "op": ">=", "value": 0.99},
	               "verdict": "refuted", "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n_runs": 10, "pending": 0}]}]}`
	published := `{"study": "published", "claims": [
	  {"id": "barely-notice", "text": "§2 conclusion, 准POOL: 用户基本无感知", "verdict": "not measurable", "reason": "no call | of their own"},
	  {"id": "no-timely-restore", "text": "§2.2.1 无法及时恢复业务 Read (experiment p): nobody by the bound.", "verdict": "supported", "provisional": true,
	   "checks": [{"check": {"experiment": "p", "scheme": "n-plus-1", "kpi": "restored_at_bound", "op": "<=", "value": 0.05},
	               "verdict": "supported", "mean": 0, "ci_low": 0, "ci_high": 0, "n_runs": 12, "pending": 8},
	              {"check": {"experiment": "s", "scheme": "n-plus-1", "kpi": "restored_at_bound", "op": "<=", "value": 0.05},
	               "verdict": "not run yet", "n_runs": 0, "pending": 20}]}]}`
	write := func(dir, name, body string) string {
		p := filepath.Join(dir, "results", "study-"+name, "study.json")
		Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		Expect(os.WriteFile(p, []byte(body), 0o644)).To(Succeed())
		return p
	}

	It("lists every claim in the paper's order with its verdict, its numbers and a link to its study", func() {
		dir := GinkgoT().TempDir()
		var studies []study.Published
		for _, s := range [][2]string{{"risk", risk}, {"published", published}} {
			p, err := study.ReadPublished(write(dir, s[0], s[1]), "results/study-"+s[0])
			Expect(err).NotTo(HaveOccurred())
			studies = append(studies, p)
		}
		out := study.ClaimsOverview(studies)
		Expect(out).To(HavePrefix("3 claims from 2 studies: 1 supported, 1 refuted, 1 not measurable."))
		rows := []string{}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "| `") {
				rows = append(rows, l)
			}
		}
		Expect(rows).To(HaveLen(3))
		// §2.2 before Table 1 before the conclusion, whatever the order of the studies.
		Expect(rows[0]).To(HavePrefix("| `no-timely-restore`"))
		Expect(rows[1]).To(HavePrefix("| `risk-low`"))
		Expect(rows[2]).To(HavePrefix("| `barely-notice`"))
		// The study's words without the project's reading, the verdict, each check with n.
		Expect(rows[0]).NotTo(ContainSubstring("nobody by the bound"))
		Expect(rows[0]).To(ContainSubstring("[published](results/study-published/study.md)"))
		Expect(rows[0]).To(ContainSubstring("**supported** (provisional: runs pending)"))
		Expect(rows[0]).To(ContainSubstring("`n-plus-1`, p: `restored_at_bound` <= 0.05 → 0 [0, 0] (12) (holds)"))
		Expect(rows[0]).To(ContainSubstring("`n-plus-1`, s: `restored_at_bound` <= 0.05 → not run yet |"))
		Expect(rows[1]).NotTo(ContainSubstring("still served"))
		Expect(rows[1]).To(ContainSubstring("0.5 [0.4, 0.6] (10) (**fails**)"))
		Expect(rows[2]).To(ContainSubstring("no call \\| of their own"))
	})

	It("puts the points of one sweep on one line, saying at which values the bound does not hold", func() {
		pt := func(v, verdict string, mean, lo, hi float64) string {
			return `{"check": {"experiment": "pool-size@pool_size=` + v + `", "scheme": "quasi-pool", "kpi": "restored_at_bound", "op": ">=", "value": 0.99},
			  "verdict": "` + verdict + `", "mean": ` + fmt.Sprint(mean) + `, "ci_low": ` + fmt.Sprint(lo) + `, "ci_high": ` + fmt.Sprint(hi) + `, "n_runs": 5, "pending": 0}`
		}
		sweeps := `{"study": "sweeps", "claims": [{"id": "any-n", "text": "§2 准POOL方案的优势", "verdict": "refuted", "checks": [` +
			pt("2", "supported", 1, 1, 1) + `,` + pt("3", "inconclusive", 0.99, 0.97, 1) + `,` + pt("4", "refuted", 0.5, 0.4, 0.6) + `,
			{"check": {"experiment": "pcscf-kill", "scheme": "quasi-pool", "kpi": "restored_at_end", "op": ">=", "value": 0.99},
			 "verdict": "supported", "mean": 1, "ci_low": 1, "ci_high": 1, "n_runs": 20, "pending": 0}]}]}`
		p, err := study.ReadPublished(write(GinkgoT().TempDir(), "sweeps", sweeps), "results/study-sweeps")
		Expect(err).NotTo(HaveOccurred())
		out := study.ClaimsOverview([]study.Published{p})
		Expect(out).To(ContainSubstring("| `quasi-pool`, sweep pool-size: `restored_at_bound` >= 0.99 → pool_size=2: 1 [1, 1] (5); " +
			"pool_size=3: 0.99 [0.97, 1] (5); pool_size=4: 0.5 [0.4, 0.6] (5) (holds at 1 of 3 values; " +
			"*CI straddles the bound* at pool_size=3; **fails** at pool_size=4)<br>" +
			"`quasi-pool`, pcscf-kill: `restored_at_end` >= 0.99 → 1 [1, 1] (20) (holds) |"))
	})

	It("refuses a file that is not a study.json, naming it", func() {
		dir := GinkgoT().TempDir()
		_, err := study.ReadPublished(write(dir, "x", `{"experiments": []}`), "x")
		Expect(err).To(MatchError(ContainSubstring("not a study.json")))
		_, err = study.ReadPublished(write(dir, "y", `{"study": `), "y")
		Expect(err).To(MatchError(ContainSubstring("study-y/study.json: not a study.json")))
	})
})
