// Package results turns the committed runs under docs/results into what the documents show: docs/results.md's
// generated sections (the published studies, the 100k storm table, the claims overview), the tables other
// documents quote (issue 11's scenarios, the storms, mutual backup, the overload bench, the KPI regression, a
// study's late users) and the publication of a run or a study into a directory that can be committed. Nothing
// is run: every figure is read from the runs' summary.json (report.Summary), study.json and bench.json.
package results

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/imslab/quasipool/internal/analysis/study"
)

// Studies are the published studies, in docs/results.md's order (docs/results/study-<name>).
var Studies = []string{"published", "risk", "cost", "table1", "sweeps", "mixed-pool"}

// Page is the file whose generated sections Page's methods rewrite.
const Page = "docs/results.md"

// Config says where the repository is and where the progress lines go.
type Config struct {
	// Root is the repository root (docs/, studies/, scenarios/); paths are joined to it as they are, so the
	// study files' relative paths come out as the study recorded them when Root is ".".
	Root string
	// Out receives one line per section rewritten (default io.Discard).
	Out io.Writer
	// Provenance is recorded in each study's regenerated study.json and study.md.
	Provenance study.Provenance
	// PrintForms also draws every study figure's print forms (3.5 in and 7 in, as PDF, SVG and PNG) into the
	// study's figures/; without it only the screen SVGs a committed study keeps are redrawn.
	PrintForms bool
}

func (c Config) out() io.Writer {
	if c.Out == nil {
		return io.Discard
	}
	return c.Out
}

func (c Config) path(rel string) string { return filepath.Join(c.Root, rel) }

// All rewrites every section docs/results.md has markers for: each published study with its runs in
// docs/results/study-<name>, the storm table, then the claims overview (which reads the studies' study.json).
func All(ctx context.Context, c Config) error {
	page, err := os.ReadFile(c.path(Page))
	if err != nil {
		return err
	}
	for _, s := range Studies {
		if !exists(c.path(filepath.Join("docs", "results", "study-"+s, study.FileJSON))) ||
			!bytes.Contains(page, []byte(marker("study:"+s, "begin"))) {
			continue
		}
		if err := Study(ctx, c, s, ""); err != nil {
			return err
		}
	}
	if bytes.Contains(page, []byte(marker("storms", "begin"))) {
		if err := Storms(c); err != nil {
			return err
		}
	}
	return Claims(c)
}

// Study rewrites a study's outputs (study.json, study.md, results.md, figures/) from its committed runs in dir
// (default docs/results/study-<name>; study file studies/<name>.yaml) and docs/results.md's section between
// <!-- study:<name>:begin --> and <!-- study:<name>:end --> from its results.md, the links made relative to
// docs/, with the example runs (repetition 1 of each experiment and scheme) whose plots were published. Runs of
// the study not done yet are no error: the tables say how many there are.
func Study(ctx context.Context, c Config, name, dir string) error {
	if dir == "" {
		dir = filepath.Join("docs", "results", "study-"+name)
	}
	dir = filepath.Clean(dir)
	rel := strings.TrimPrefix(filepath.ToSlash(dir), "docs/") // the directory as docs/results.md links to it
	file := filepath.Join("studies", name+".yaml")
	if !exists(c.path(file)) {
		return fmt.Errorf("results: %s not found", file)
	}
	if !exists(c.path(filepath.Join(dir, study.FileJSON))) {
		return fmt.Errorf("results: %s not found", filepath.Join(dir, study.FileJSON))
	}
	f, err := study.Load(c.path(file))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	plan, err := f.Plan(false)
	if err != nil {
		return fmt.Errorf("results: %s: %w", file, err)
	}
	res, err := study.Execute(ctx, study.Config{Plan: plan, File: c.path(file), OutDir: c.path(dir), Out: io.Discard,
		ResultsOnly: true, Provenance: c.Provenance, PrintForms: c.PrintForms})
	if err != nil && !errors.Is(err, study.ErrPending) {
		return fmt.Errorf("results: study %s: %w", name, err)
	}
	if res != nil {
		fmt.Fprintf(c.out(), "results: study %s: %d of %d runs done\n", name, res.RunsDone, res.RunsPlanned)
	}
	md, err := os.ReadFile(c.path(filepath.Join(dir, study.FileResults)))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	frag := relinkFigures(string(md), rel)
	examples, err := exampleRuns(c.path(dir), rel)
	if err != nil {
		return err
	}
	if examples != "" {
		frag += "\nExample runs: repetition 1 of every experiment and scheme (one seed: the same victim, " +
			"instant and users for every scheme), with the ladder diagrams of one takeover call per direction (where the " +
			"run has one), the timeline around the fault and the restoration curve:\n\n" + examples
	}
	if err := c.replaceSection("study:"+name, frag); err != nil {
		return err
	}
	fmt.Fprintf(c.out(), "results: %s updated from %s\n", Page, filepath.Join(dir, study.FileJSON))
	return nil
}

var (
	figureLink = regexp.MustCompile(`\]\(figures/`)
	runLink    = regexp.MustCompile(`\]\(([a-z0-9-]*)/([^)]*)/rep([0-9]*)/`)
)

// relinkFigures makes a study's results.md links (to figures/ and to its runs) relative to docs/.
func relinkFigures(md, rel string) string {
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		l = figureLink.ReplaceAllLiteralString(l, "]("+rel+"/figures/")
		lines[i] = runLink.ReplaceAllString(l, "]("+rel+"/${1}/${2}/rep${3}/")
	}
	return strings.Join(lines, "\n")
}

// exampleRuns lists the runs of a study directory whose plots were published (repetition 1 of every experiment
// and scheme), one markdown item each with its seed and links to its ladders, timeline and restoration curve.
func exampleRuns(dir, rel string) (string, error) {
	plots, err := filepath.Glob(filepath.Join(dir, "*", "*", "rep1", "plots"))
	if err != nil {
		return "", err
	}
	// In the order of the whole paths, as they were always listed ("sync-partition-standby/…" before
	// "sync-partition/…").
	slices.Sort(plots)
	var b strings.Builder
	for _, d := range plots {
		if !isDir(d) {
			continue
		}
		run := filepath.Dir(d)
		runRel, err := filepath.Rel(dir, run)
		if err != nil {
			return "", err
		}
		runRel = filepath.ToSlash(runRel)
		var links strings.Builder
		for _, p := range []struct{ file, label string }{{"ladder_mo.svg", "MO ladder"}, {"ladder_mt.svg", "MT ladder"},
			{"timeline.svg", "timeline"}, {"restore.svg", "restoration curve"}} {
			if !exists(filepath.Join(d, p.file)) {
				continue
			}
			fmt.Fprintf(&links, " [%s](%s/%s/plots/%s)", p.label, rel, runRel, p.file)
			if png := strings.TrimSuffix(p.file, ".svg") + ".png"; exists(filepath.Join(d, png)) {
				fmt.Fprintf(&links, " ([PNG](%s/%s/plots/%s))", rel, runRel, png)
			}
		}
		if links.Len() == 0 {
			continue
		}
		seed, err := runSeed(run)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "- `%s` (seed %s):%s\n", runRel, seed, links.String())
	}
	return b.String(), nil
}

// runSeed is the seed a study run's study-run.json records.
func runSeed(run string) (string, error) {
	b, err := os.ReadFile(filepath.Join(run, "study-run.json"))
	if err != nil {
		return "", fmt.Errorf("results: %w", err)
	}
	var rec struct {
		Seed json.Number `json:"seed"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return "", fmt.Errorf("results: %s: %w", filepath.Join(run, "study-run.json"), err)
	}
	return rec.Seed.String(), nil
}

// Storms rewrites docs/results.md's table of issue 13's 100k storm runs (docs/results/issue13/storm-100k-*).
func Storms(c Config) error {
	runs, err := filepath.Glob(c.path(filepath.Join("docs", "results", "issue13", "storm-100k-*")))
	if err != nil {
		return err
	}
	var dirs, names []string
	for _, r := range runs {
		if isDir(r) {
			dirs = append(dirs, r)
			names = append(names, strings.TrimPrefix(filepath.ToSlash(r), filepath.ToSlash(c.path(""))+"/"))
		}
	}
	if len(dirs) == 0 {
		return errors.New("results: no docs/results/issue13/storm-100k-*/ to tabulate")
	}
	table, err := StormTable(dirs)
	if err != nil {
		return err
	}
	frag := "<!-- Generated by `imslab results storms` (imslab table storms) from each run's summary.json.gz and " +
		"probes.json; do not edit by hand. -->\n\n" + table
	if err := c.replaceSection("storms", frag); err != nil {
		return err
	}
	fmt.Fprintf(c.out(), "results: %s's storm table updated from %s\n", Page, strings.Join(names, " "))
	return nil
}

// Claims rewrites docs/results.md's overview of every claim from the published studies' study.json (in
// Studies' order; a study not published yet is left out).
func Claims(c Config) error {
	var studies []study.Published
	var names []string
	for _, s := range Studies {
		rel := filepath.Join("docs", "results", "study-"+s, study.FileJSON)
		if !exists(c.path(rel)) {
			continue
		}
		p, err := study.ReadPublished(c.path(rel), filepath.Join("results", "study-"+s))
		if err != nil {
			return fmt.Errorf("results: %w", err)
		}
		studies = append(studies, p)
		names = append(names, rel)
	}
	frag := "<!-- Generated by `imslab results claims` (imslab claims) from the studies' study.json; do not edit by " +
		"hand. -->\n\n" + study.ClaimsOverview(studies)
	if err := c.replaceSection("claims", frag); err != nil {
		return err
	}
	fmt.Fprintf(c.out(), "results: %s's claims overview updated from %s\n", Page, strings.Join(names, " "))
	return nil
}

func marker(name, end string) string { return "<!-- " + name + ":" + end + " -->" }

// replaceSection replaces the lines of docs/results.md between the line holding <!-- name:begin --> and the
// line holding <!-- name:end --> by frag's.
func (c Config) replaceSection(name, frag string) error {
	b, err := os.ReadFile(c.path(Page))
	if err != nil {
		return err
	}
	out, err := ReplaceSection(string(b), name, frag)
	if err != nil {
		return err
	}
	tmp := c.path(Page) + ".new"
	if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.path(Page))
}

// ReplaceSection returns doc with the lines between the line holding <!-- name:begin --> and the line holding
// <!-- name:end --> (both kept) replaced by frag's lines. Every line of the result ends in a newline.
func ReplaceSection(doc, name, frag string) (string, error) {
	begin, end := marker(name, "begin"), marker(name, "end")
	if !strings.Contains(doc, begin) {
		return "", fmt.Errorf("results: markers %s / %s missing in %s", begin, end, Page)
	}
	var b strings.Builder
	skip := false
	for _, l := range lines(doc) {
		switch {
		case strings.Contains(l, begin):
			b.WriteString(l + "\n")
			for _, f := range lines(frag) {
				b.WriteString(f + "\n")
			}
			skip = true
			continue
		case strings.Contains(l, end):
			skip = false
		}
		if !skip {
			b.WriteString(l + "\n")
		}
	}
	return b.String(), nil
}

// lines splits s into lines; a final newline ends the last line rather than starting another.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
